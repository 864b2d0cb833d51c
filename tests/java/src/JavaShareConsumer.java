import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Kafka's Java share consumer (KIP-932) in share group {@code GROUP} reading {@code TOPIC} with
 * explicit acknowledgement until {@code TIMEOUT_MS} passed or it has accepted {@code EXPECTED}
 * records. A record whose value starts with {@code release} is RELEASEd at its first delivery,
 * one starting with {@code reject} REJECTed, one starting with {@code renew} RENEWed (its
 * acquisition lock extended, KIP-1222: the consumer hands it out again, still in the same
 * delivery) and ACCEPTed when it comes back; the others are ACCEPTed. Prints
 * {@code record <partition> <offset> <value> <delivery count>} each time poll returns a record.
 *
 * <p>Usage: JavaShareConsumer BOOTSTRAP TOPIC GROUP EXPECTED TIMEOUT_MS
 */
public final class JavaShareConsumer {
    public static void main(String[] args) {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("group.id", args[2]);
        config.put("share.acknowledgement.mode", "explicit");
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class.getName());
        int expected = Integer.parseInt(args[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]);
        int accepted = 0;
        Set<String> renewed = new HashSet<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(config)) {
            consumer.subscribe(List.of(args[1]));
            while (accepted < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    Optional<Short> count = record.deliveryCount();
                    int deliveries = count.isPresent() ? count.get() : -1;
                    System.out.printf("record %d %d %s %d%n",
                            record.partition(), record.offset(), record.value(), deliveries);
                    String value = record.value() == null ? "" : record.value();
                    if (value.startsWith("release") && deliveries == 1) {
                        consumer.acknowledge(record, AcknowledgeType.RELEASE);
                    } else if (value.startsWith("reject")) {
                        consumer.acknowledge(record, AcknowledgeType.REJECT);
                    } else if (value.startsWith("renew")
                            && renewed.add(record.partition() + "@" + record.offset())) {
                        consumer.acknowledge(record, AcknowledgeType.RENEW);
                    } else {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                        accepted++;
                    }
                }
                consumer.commitSync();
            }
        }
        System.out.flush();
    }
}
