import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Kafka's Java consumer in a group (classic protocol unless a config says otherwise) reading
 * {@code TOPICS} (comma-separated) until it has {@code EXPECTED} records or {@code TIMEOUT_MS} passed, then one more
 * short poll (to see a record too many), a synchronous commit and close. Prints
 * {@code record <topic> <partition> <offset> <key> <value> <header>=<value>,...} per record, then
 * {@code committed <topic> <partition> <offset>} per partition it committed.
 *
 * <p>Usage: JavaConsumer BOOTSTRAP TOPICS GROUP EXPECTED TIMEOUT_MS [config=value ...]
 */
public final class JavaConsumer {
    private static final Comparator<TopicPartition> BY_NAME =
            Comparator.comparing(TopicPartition::topic).thenComparing(TopicPartition::partition);

    public static void main(String[] args) {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("group.id", args[2]);
        config.put("group.protocol", "classic");
        config.put("auto.offset.reset", "earliest");
        config.put("enable.auto.commit", "false");
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class.getName());
        for (int i = 5; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            config.put(pair[0], pair[1]);
        }
        int expected = Integer.parseInt(args[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]);
        int seen = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(List.of(args[1].split(",")));
            Map<TopicPartition, Long> next = new TreeMap<>(BY_NAME);
            boolean extraPoll = false;
            while (true) {
                boolean done = seen >= expected || System.currentTimeMillis() >= deadline;
                if (done && extraPoll) {
                    break;
                }
                extraPoll = done;
                for (ConsumerRecord<String, String> record
                        : consumer.poll(Duration.ofMillis(done ? 300 : 200))) {
                    StringBuilder headers = new StringBuilder();
                    for (Header header : record.headers()) {
                        if (headers.length() > 0) {
                            headers.append(',');
                        }
                        headers.append(header.key()).append('=')
                                .append(new String(header.value(), StandardCharsets.UTF_8));
                    }
                    System.out.println("record " + record.topic() + " " + record.partition() + " " + record.offset()
                            + " " + record.key() + " " + record.value() + " " + headers);
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            record.offset() + 1);
                    seen++;
                }
            }
            Map<TopicPartition, OffsetAndMetadata> commit = new TreeMap<>(BY_NAME);
            next.forEach((partition, offset) -> commit.put(partition, new OffsetAndMetadata(offset)));
            consumer.commitSync(commit);
            commit.forEach((partition, offset) ->
                    System.out.println("committed " + partition.topic() + " " + partition.partition() + " " + offset.offset()));
        }
    }
}
