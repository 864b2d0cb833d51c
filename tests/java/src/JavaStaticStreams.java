import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count (as JavaStreams: lines from INPUT, words counted in a persistent
 * store, each new count written to OUTPUT) run as a static member of its streams group
 * (group.protocol=streams, group.instance.id INSTANCE_ID, KIP-1071). It runs until its standard
 * input is closed, then closes the default way: a static member stays in the group (it leaves
 * with member epoch -2), so that an instance started again with the same instance id and state
 * directory takes its tasks back without a rebalance. Prints {@code state <STATE>} on every
 * state change and {@code closed} at the end.
 *
 * <p>Usage: JavaStaticStreams BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR INSTANCE_ID
 */
public final class JavaStaticStreams {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        config.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        config.put("group.instance.id", args[5]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "at_least_once");
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put("consumer.auto.offset.reset", "earliest");

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
        streams.start();
        while (System.in.read() >= 0) {
            // runs until the test closes our standard input
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("closed");
    }
}
