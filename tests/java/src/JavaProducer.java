import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java producer with its defaults (idempotent, acks=all) writing {@code count} keyed
 * records: key {@code <prefix>k<i % keys>}, value {@code <prefix>v<i>}, header {@code n=<i>}.
 * Prints {@code acked <partition> <offset> <value>} for each acknowledged record as it comes
 * (the tests read these while it runs), {@code failed <value> <error>} for each that is not,
 * and {@code done} after close.
 *
 * <p>Usage: JavaProducer BOOTSTRAP TOPIC COUNT PREFIX KEYS PAUSE_MS [config=value ...]
 */
public final class JavaProducer {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("key.serializer", StringSerializer.class.getName());
        config.put("value.serializer", StringSerializer.class.getName());
        for (int i = 6; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            config.put(pair[0], pair[1]);
        }
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String prefix = args[3];
        int keys = Integer.parseInt(args[4]);
        long pauseMs = Long.parseLong(args[5]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            for (int i = 0; i < count; i++) {
                String value = prefix + "v" + i;
                ProducerRecord<String, String> record =
                        new ProducerRecord<>(topic, prefix + "k" + (i % keys), value);
                record.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                producer.send(record, (metadata, error) -> {
                    synchronized (System.out) {
                        if (error == null) {
                            System.out.println("acked " + metadata.partition() + " "
                                    + metadata.offset() + " " + value);
                        } else {
                            System.out.println("failed " + value + " " + error);
                        }
                        System.out.flush();
                    }
                });
                if (pauseMs > 0) {
                    Thread.sleep(pauseMs);
                }
            }
        }
        System.out.println("done");
    }
}
