import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * A Kafka Streams word count: lines from INPUT, words (lower case) counted in a state store
 * (with its changelog topic, and a repartition topic for the grouping), each new count written to
 * OUTPUT as {@code word -> count}. Runs with processing.guarantee GUARANTEE (exactly_once_v2 or
 * at_least_once) until its standard input is closed, then closes. Prints {@code state <STATE>} on
 * every state change, {@code restored <store> <changelog topic> <partition> <records>} when a
 * store has been rebuilt from its changelog, and {@code closed} at the end.
 *
 * <p>Usage: JavaStreams BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR GUARANTEE [GROUP_PROTOCOL]
 * (GROUP_PROTOCOL: classic, the default, or streams for KIP-1071's streams rebalance protocol)
 */
public final class JavaStreams {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put("consumer.auto.offset.reset", "earliest");
        if (args.length > 6) {
            config.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[6]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
                .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word)
                .count(Materialized.as("counts"))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        streams.setStateListener((now, before) -> {
            synchronized (System.out) {
                System.out.println("state " + now);
                System.out.flush();
            }
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition partition, String store, long start,
                    long end) {
            }

            @Override
            public void onBatchRestored(TopicPartition partition, String store, long batchEnd,
                    long restored) {
            }

            @Override
            public void onRestoreEnd(TopicPartition partition, String store, long restored) {
                synchronized (System.out) {
                    System.out.println("restored " + store + " " + partition.topic() + " "
                            + partition.partition() + " " + restored);
                    System.out.flush();
                }
            }
        });
        streams.start();
        while (System.in.read() >= 0) {
            // runs until the test closes our standard input
        }
        // Leaving the group (Streams stays in it by default) lets a restarted instance get its
        // tasks at once instead of after the old member's session timeout.
        streams.close(CloseOptions.groupMembershipOperation(
                CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(30)));
        System.out.println("closed");
    }
}
