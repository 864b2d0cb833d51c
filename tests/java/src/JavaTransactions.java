import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java transactional producer. Mode {@code commit-abort}: commits {@code c0..c<n-1>},
 * aborts {@code a0..a<n-1>}, commits {@code last}, then starts a second producer with the same
 * transactional id and shows the first fenced. Mode {@code copy}: a consume-transform-produce
 * loop from SOURCE to TOPIC in group GROUP ({@code sendOffsetsToTransaction}) until COUNT records
 * were copied. Prints one line per step: {@code committed}, {@code aborted}, {@code fenced},
 * {@code copied <n>}, then {@code done}.
 *
 * <p>Usage: JavaTransactions BOOTSTRAP TOPIC TXN_ID commit-abort N
 *        | JavaTransactions BOOTSTRAP TOPIC TXN_ID copy COUNT SOURCE GROUP
 */
public final class JavaTransactions {
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
        int count = Integer.parseInt(args[4]);
        if (args[3].equals("commit-abort")) {
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
        } else {
            String source = args[5];
            String group = args[6];
            Properties config = new Properties();
            config.put("bootstrap.servers", bootstrap);
            config.put("group.id", group);
            config.put("enable.auto.commit", "false");
            config.put("auto.offset.reset", "earliest");
            config.put("isolation.level", "read_committed");
            config.put("key.deserializer", StringDeserializer.class.getName());
            config.put("value.deserializer", StringDeserializer.class.getName());
            KafkaProducer<String, String> producer = producer(bootstrap, txnId);
            int copied = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
                consumer.subscribe(List.of(source));
                while (copied < count && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                    if (records.isEmpty()) {
                        continue;
                    }
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> record : records) {
                        producer.send(new ProducerRecord<>(topic, "x" + record.value()));
                        offsets.put(new TopicPartition(record.topic(), record.partition()),
                                new OffsetAndMetadata(record.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                    copied += records.count();
                    System.out.println("copied " + copied);
                }
            }
            producer.close();
        }
        System.out.println("done");
    }
}
