import java.time.Duration;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's AdminClient through one scenario on TOPIC (which must not exist) and GROUP, printing
 * one {@code name value...} line per fact for the test to check: the cluster, the topic created
 * with three partitions and a config, its configs described and altered, ten records written to
 * partition 0 and their offsets listed, records deleted, the group (a Java consumer that read and
 * committed) listed and described while its member is live, its offsets altered and deleted
 * once it is empty, and a second topic, TOPIC-doomed, created and deleted (TOPIC stays, for the
 * test to look at with another client).
 *
 * <p>Usage: JavaAdmin BOOTSTRAP TOPIC GROUP
 */
public final class JavaAdmin {
    private static void print(String name, Object... values) {
        StringBuilder line = new StringBuilder(name);
        for (Object value : values) {
            line.append(' ').append(value);
        }
        System.out.println(line);
    }

    private static String nodes(Collection<Node> nodes) {
        return nodes.stream().map(n -> n.id() + "@" + n.host() + ":" + n.port()).sorted()
                .collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(config)) {
            DescribeClusterResult cluster = admin.describeCluster();
            print("cluster.id", cluster.clusterId().get());
            print("cluster.controller", cluster.controller().get().id());
            print("cluster.nodes", nodes(cluster.nodes().get()));

            NewTopic created = new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "3600000"));
            String doomed = topic + "-doomed";
            admin.createTopics(List.of(created, new NewTopic(doomed, 1, (short) 1))).all().get();
            Set<String> listed = admin.listTopics().names().get();
            print("listed", listed.contains(topic), listed.contains(doomed));
            TopicDescription description = admin.describeTopics(List.of(topic))
                    .allTopicNames().get().get(topic);
            for (TopicPartitionInfo partition : description.partitions()) {
                print("partition", partition.partition(), "leader", partition.leader().id(),
                        "replicas", nodes(partition.replicas()), "isr", nodes(partition.isr()));
            }

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            printConfig(admin, resource, "before");
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "65536"),
                            AlterConfigOp.OpType.SET)))).all().get();
            printConfig(admin, resource, "after");

            TopicPartition zero = new TopicPartition(topic, 0);
            Properties producerConfig = new Properties();
            producerConfig.putAll(config);
            producerConfig.put("key.serializer", StringSerializer.class.getName());
            producerConfig.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, 1_000_000L + i, "k" + i, "v" + i));
                }
            }
            printOffsets(admin, zero, "offsets.before");
            long low = admin.deleteRecords(Map.of(zero, RecordsToDelete.beforeOffset(4)))
                    .lowWatermarks().get(zero).get().lowWatermark();
            print("deleted.low_watermark", low);
            printOffsets(admin, zero, "offsets.after");

            Properties consumerConfig = new Properties();
            consumerConfig.putAll(config);
            consumerConfig.put("group.id", group);
            consumerConfig.put("group.protocol", "classic");
            consumerConfig.put("auto.offset.reset", "earliest");
            consumerConfig.put("enable.auto.commit", "false");
            consumerConfig.put("key.deserializer", StringDeserializer.class.getName());
            consumerConfig.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig)) {
                consumer.subscribe(List.of(topic));
                int read = 0;
                long deadline = System.currentTimeMillis() + 20_000;
                while (read < 6 && System.currentTimeMillis() < deadline) {
                    read += consumer.poll(Duration.ofMillis(200)).count();
                }
                print("consumed", read);
                consumer.commitSync(Map.of(zero, new OffsetAndMetadata(8)));
                for (GroupListing listing : admin.listGroups().all().get()) {
                    print("group.listed", listing.groupId(), listing.type().orElse(null),
                            listing.protocol());
                }
                ConsumerGroupDescription described = admin.describeConsumerGroups(List.of(group))
                        .describedGroups().get(group).get();
                print("group.state", described.groupState());
                print("group.type", described.type());
                print("group.assignor", described.partitionAssignor());
                print("group.coordinator", described.coordinator().id());
                for (MemberDescription member : described.members()) {
                    print("group.member", member.consumerId(), member.clientId(),
                            member.assignment().topicPartitions().stream()
                                    .map(tp -> tp.topic() + ":" + tp.partition()).sorted()
                                    .collect(Collectors.joining(",")));
                }
                printGroupOffsets(admin, group, "group.offset");
                // A group may not drop the offsets of a topic it still consumes.
                try {
                    admin.deleteConsumerGroupOffsets(group, Set.of(zero)).all().get();
                    print("group.offset.delete_live", "deleted");
                } catch (ExecutionException error) {
                    print("group.offset.delete_live", error.getCause().getClass().getSimpleName());
                }
            }

            // The consumer has left: the group is empty, so its offsets may be set and removed.
            TopicPartition two = new TopicPartition(topic, 2);
            admin.alterConsumerGroupOffsets(group, Map.of(
                    zero, new OffsetAndMetadata(6), two, new OffsetAndMetadata(0, "set by admin")))
                    .all().get();
            printGroupOffsets(admin, group, "group.offset.altered");
            admin.deleteConsumerGroupOffsets(group, Set.of(zero)).all().get();
            printGroupOffsets(admin, group, "group.offset.deleted");
            print("group.state.after", admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get().groupState());

            admin.deleteTopics(List.of(doomed)).all().get();
            Set<String> after = admin.listTopics().names().get();
            print("deleted.listed", after.contains(doomed), after.contains(topic));
        }
        print("done");
    }

    private static void printGroupOffsets(Admin admin, String group, String name)
            throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed = new TreeMap<>(
                Comparator.comparing(TopicPartition::toString));
        committed.putAll(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get());
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : committed.entrySet()) {
            print(name, entry.getKey().topic() + ":" + entry.getKey().partition(),
                    entry.getValue().offset(), entry.getValue().metadata().isEmpty()
                            ? "-" : entry.getValue().metadata().replace(' ', '_'));
        }
    }

    private static void printConfig(Admin admin, ConfigResource resource, String when)
            throws Exception {
        Config described = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        for (String name : List.of("retention.ms", "max.message.bytes", "cleanup.policy")) {
            ConfigEntry entry = described.get(name);
            print("config." + when, name, entry.value(), entry.source());
        }
    }

    private static void printOffsets(Admin admin, TopicPartition partition, String name)
            throws Exception {
        Map<String, OffsetSpec> specs = new TreeMap<>(Map.of(
                "earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
                "max_timestamp", OffsetSpec.maxTimestamp(),
                "at_1000005", OffsetSpec.forTimestamp(1_000_005L)));
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            ListOffsetsResultInfo info = admin.listOffsets(Map.of(partition, spec.getValue()))
                    .partitionResult(partition).get();
            print(name, spec.getKey(), info.offset(), info.timestamp());
        }
    }
}
