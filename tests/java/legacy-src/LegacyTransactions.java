import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer and a read_committed consumer written against the API every
 * kafka-clients since 2.x has (compiled against each old client in turn). Commits
 * {@code c0..c<n-1>}, aborts {@code a0..a<n-1>}, commits {@code last}, shows a second producer
 * with the same transactional id fencing the first, then reads the whole topic back with
 * isolation.level=read_committed (assigned partitions, no group) until {@code last}. Prints
 * {@code committed}, {@code aborted}, {@code committed}, {@code fenced}, one
 * {@code record <value>} line per record read, then {@code done}.
 *
 * <p>Usage: LegacyTransactions BOOTSTRAP TOPIC TXN_ID N
 */
public final class LegacyTransactions {
    private static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("transactional.id", txnId);
        config.put("key.serializer", StringSerializer.class.getName());
        config.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(config);
        producer.initTransactions();
        return producer;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String txnId = args[2];
        int count = Integer.parseInt(args[3]);
        KafkaProducer<String, String> first = producer(bootstrap, txnId);
        first.beginTransaction();
        for (int i = 0; i < count; i++) {
            first.send(new ProducerRecord<>(topic, "c" + i));
        }
        first.commitTransaction();
        System.out.println("committed");
        first.beginTransaction();
        for (int i = 0; i < count; i++) {
            first.send(new ProducerRecord<>(topic, "a" + i));
        }
        first.flush();
        first.abortTransaction();
        System.out.println("aborted");
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, "last"));
        first.commitTransaction();
        System.out.println("committed");
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, "zombie")).get();
        KafkaProducer<String, String> second = producer(bootstrap, txnId);
        try {
            first.commitTransaction();
            System.out.println("zombie committed");
        } catch (ProducerFencedException e) {
            System.out.println("fenced");
        }
        first.close();
        second.close();

        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("isolation.level", "read_committed");
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            boolean last = false;
            long deadline = System.currentTimeMillis() + 30_000;
            // "last" was committed after everything else, but on its own partition: read on
            // until every partition is at its end (the LSO, once the zombie was aborted).
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("record " + record.value());
                    last |= record.value().equals("last");
                }
                if (last && atEnd(consumer, partitions)) {
                    break;
                }
            }
        }
        System.out.println("done");
    }

    private static boolean atEnd(KafkaConsumer<String, String> consumer, List<TopicPartition> partitions) {
        Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
        for (TopicPartition partition : partitions) {
            if (consumer.position(partition) < ends.get(partition)) {
                return false;
            }
        }
        return true;
    }
}
