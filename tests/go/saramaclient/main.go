// Command saramaclient drives sarama 1.22.1 (the version Debian bookworm packages) against a
// broker for odradek's end-to-end tests. Each subcommand does one thing a sarama user does and
// prints what it saw as JSON lines on stdout, so the Python test can check the data; any error
// is printed on stderr with exit status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"

	"odradek/tests/go/report"
)

var (
	brokers   = flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	version   = flag.String("version", "0.10.0.0", "Kafka version sarama speaks (sets the request versions)")
	topic     = flag.String("topic", "", "topic")
	partition = flag.Int("partition", 0, "partition")
	offset    = flag.Int64("offset", 0, "offset: to read from (consume) or to commit (commit)")
	count     = flag.Int("count", 1, "number of messages to produce or consume")
	group     = flag.String("group", "", "consumer group")
	codec     = flag.String("codec", "none", "none, gzip, snappy, lz4 or zstd")
	timeout   = flag.Duration("timeout", 20*time.Second, "give up after this long")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: saramaclient [flags] produce|consume|group|commit|committed|create-topic|describe-configs|acls")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	config := sarama.NewConfig()
	config.ClientID = "odradek-sarama-test" // the recording proxy tells its requests by it
	v, err := sarama.ParseKafkaVersion(*version)
	check(err)
	config.Version = v
	config.Net.DialTimeout = *timeout
	config.Metadata.Retry.Max = 20
	config.Metadata.Retry.Backoff = 250 * time.Millisecond
	addrs := strings.Split(*brokers, ",")
	switch flag.Arg(0) {
	case "produce":
		produce(addrs, config)
	case "consume":
		consume(addrs, config)
	case "group":
		consumeGroup(addrs, config)
	case "commit":
		commit(addrs, config)
	case "committed":
		committed(addrs, config)
	case "create-topic":
		createTopic(addrs, config)
	case "describe-configs":
		describeConfigs(addrs, config)
	case "acls":
		acls(addrs, config)
	default:
		flag.Usage()
		os.Exit(2)
	}
}

var (
	check = report.Check
	emit  = report.Emit
)

type record struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Timestamp int64  `json:"timestamp"`
}

// produce sends count messages with keys k0, k1, ... and values v0, v1, ... to the partition
// given, with timestamps 1_700_000_000_000 + i, one SendMessages call (one batch per partition).
func produce(addrs []string, config *sarama.Config) {
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Producer.Retry.Max = 10
	config.Producer.Retry.Backoff = 250 * time.Millisecond
	codecs := map[string]sarama.CompressionCodec{
		"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
		"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
		"zstd": sarama.CompressionZSTD,
	}
	c, ok := codecs[*codec]
	if !ok {
		check(fmt.Errorf("unknown codec %q", *codec))
	}
	config.Producer.Compression = c
	producer, err := sarama.NewSyncProducer(addrs, config)
	check(err)
	defer producer.Close()
	messages := make([]*sarama.ProducerMessage, *count)
	for i := range messages {
		messages[i] = &sarama.ProducerMessage{
			Topic:     *topic,
			Partition: int32(*partition),
			Key:       sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:     sarama.StringEncoder(fmt.Sprintf("v%d", i)),
			Timestamp: time.Unix(0, (1_700_000_000_000+int64(i))*int64(time.Millisecond)),
		}
	}
	err = producer.SendMessages(messages)
	if errs, ok := err.(sarama.ProducerErrors); ok && len(errs) > 0 {
		check(errs[0].Err) // the broker's answer, not sarama's summary of it
	}
	check(err)
	for i, m := range messages {
		emit(record{Partition: m.Partition, Offset: m.Offset, Key: fmt.Sprintf("k%d", i), Value: fmt.Sprintf("v%d", i)})
	}
}

func asRecord(m *sarama.ConsumerMessage) record {
	return record{
		Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value),
		Timestamp: m.Timestamp.UnixNano() / int64(time.Millisecond),
	}
}

// consume reads count messages of one partition from offset, without a group.
func consume(addrs []string, config *sarama.Config) {
	config.Consumer.Return.Errors = true
	consumer, err := sarama.NewConsumer(addrs, config)
	check(err)
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(*topic, int32(*partition), *offset)
	check(err)
	defer pc.Close()
	deadline := time.After(*timeout)
	for got := 0; got < *count; got++ {
		select {
		case m := <-pc.Messages():
			emit(asRecord(m))
		case e := <-pc.Errors():
			check(e)
		case <-deadline:
			check(fmt.Errorf("timed out after %d of %d messages", got, *count))
		}
	}
}

// groupHandler marks every message it is given and cancels the session once count are in.
type groupHandler struct {
	mu     sync.Mutex
	got    int
	cancel context.CancelFunc
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *groupHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		if h.got < *count {
			emit(asRecord(m))
			session.MarkMessage(m, "")
			h.got++
		}
		if h.got >= *count {
			h.cancel()
		}
		h.mu.Unlock()
	}
	return nil
}

// consumeGroup joins group (JoinGroup, SyncGroup, Heartbeat), reads count messages of topic
// from the committed offsets (or the oldest), commits what it read and leaves.
func consumeGroup(addrs []string, config *sarama.Config) {
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	config.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(addrs, *group, config)
	check(err)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	go func() {
		for e := range cg.Errors() {
			fmt.Fprintln(os.Stderr, "group error:", e)
		}
	}()
	handler := &groupHandler{cancel: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{*topic}, handler); err != nil && ctx.Err() == nil {
			check(err)
		}
	}
	check(cg.Close())
	handler.mu.Lock()
	defer handler.mu.Unlock()
	if handler.got < *count {
		check(fmt.Errorf("timed out after %d of %d messages", handler.got, *count))
	}
}

func offsetManager(addrs []string, config *sarama.Config) (sarama.Client, sarama.OffsetManager, sarama.PartitionOffsetManager) {
	client, err := sarama.NewClient(addrs, config)
	check(err)
	om, err := sarama.NewOffsetManagerFromClient(*group, client)
	check(err)
	pom, err := om.ManagePartition(*topic, int32(*partition))
	check(err)
	return client, om, pom
}

// commit commits offset for one partition outside group management (OffsetCommit v1).
func commit(addrs []string, config *sarama.Config) {
	client, om, pom := offsetManager(addrs, config)
	pom.MarkOffset(*offset, "committed by sarama")
	check(pom.Close())
	check(om.Close())
	check(client.Close())
}

// committed prints the committed offset of one partition (OffsetFetch v1).
func committed(addrs []string, config *sarama.Config) {
	client, om, pom := offsetManager(addrs, config)
	next, metadata := pom.NextOffset()
	emit(map[string]interface{}{"offset": next, "metadata": metadata})
	check(pom.Close())
	check(om.Close())
	check(client.Close())
}

func createTopic(addrs []string, config *sarama.Config) {
	admin, err := sarama.NewClusterAdmin(addrs, config)
	check(err)
	defer admin.Close()
	retention := "3600000"
	check(admin.CreateTopic(*topic, &sarama.TopicDetail{
		NumPartitions: int32(*count), ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention},
	}, false))
}

// describeConfigs prints the topic's config entries (DescribeConfigs v0 in sarama 1.22).
func describeConfigs(addrs []string, config *sarama.Config) {
	admin, err := sarama.NewClusterAdmin(addrs, config)
	check(err)
	defer admin.Close()
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: *topic})
	check(err)
	for _, e := range entries {
		emit(map[string]interface{}{"name": e.Name, "value": e.Value, "read_only": e.ReadOnly, "default": e.Default})
	}
}

func listAcls(admin sarama.ClusterAdmin, step string) {
	listed, err := admin.ListAcls(sarama.AclFilter{
		ResourceType: sarama.AclResourceAny, Operation: sarama.AclOperationAny,
		PermissionType: sarama.AclPermissionAny,
	})
	check(err)
	for _, r := range listed {
		for _, a := range r.Acls {
			emit(map[string]interface{}{
				"step": step, "resource_type": int(r.ResourceType), "name": r.ResourceName,
				"principal": a.Principal, "host": a.Host, "operation": int(a.Operation),
				"permission": int(a.PermissionType),
			})
		}
	}
}

// acls creates two ACLs for User:alice (READ on topic, READ on group named like it), lists
// every ACL, deletes the topic's, and lists again (CreateAcls, DescribeAcls, DeleteAcls v0).
func acls(addrs []string, config *sarama.Config) {
	admin, err := sarama.NewClusterAdmin(addrs, config)
	check(err)
	defer admin.Close()
	read := sarama.Acl{
		Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead,
		PermissionType: sarama.AclPermissionAllow,
	}
	for _, kind := range []sarama.AclResourceType{sarama.AclResourceTopic, sarama.AclResourceGroup} {
		check(admin.CreateACL(sarama.Resource{
			ResourceType: kind, ResourceName: *topic, ResoucePatternType: sarama.AclPatternLiteral,
		}, read))
	}
	listAcls(admin, "created")
	deleted, err := admin.DeleteACL(sarama.AclFilter{
		ResourceType: sarama.AclResourceTopic, ResourceName: topic,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny,
	}, false)
	check(err)
	for _, m := range deleted {
		if m.Err != sarama.ErrNoError {
			check(m.Err)
		}
		emit(map[string]interface{}{
			"step": "deleted", "resource_type": int(m.ResourceType), "name": m.ResourceName,
			"principal": m.Principal, "operation": int(m.Operation),
		})
	}
	listAcls(admin, "left")
}
