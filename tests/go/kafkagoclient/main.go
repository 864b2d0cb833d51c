// Command kafkagoclient drives kafka-go 0.2.1 (the version Debian bookworm packages; Produce v2
// and Fetch v2 with message format v1) against a broker for odradek's end-to-end tests. Each
// subcommand prints what it saw as JSON lines on stdout; any error goes to stderr with exit
// status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/gzip"
	"github.com/segmentio/kafka-go/lz4"
	"github.com/segmentio/kafka-go/snappy"

	"odradek/tests/go/report"
)

var (
	brokers   = flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	topic     = flag.String("topic", "", "topic")
	partition = flag.Int("partition", 0, "partition the writer sends to")
	count     = flag.Int("count", 1, "number of messages to write or read")
	group     = flag.String("group", "", "consumer group of the reader")
	codec     = flag.String("codec", "none", "none, gzip, snappy or lz4")
	timeout   = flag.Duration("timeout", 20*time.Second, "give up after this long")
)

// clientID names the program's requests, so the recording proxy can tell them from others.
var dialer = &kafka.Dialer{ClientID: "odradek-kafka-go-test", Timeout: 10 * time.Second, DualStack: true}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kafkagoclient [flags] write|read")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	addrs := strings.Split(*brokers, ",")
	switch flag.Arg(0) {
	case "write":
		write(ctx, addrs)
	case "read":
		read(ctx, addrs)
	default:
		flag.Usage()
		os.Exit(2)
	}
}

var (
	check = report.Check
	emit  = report.Emit
)

// write sends count messages (keys k0, k1, ..., values v0, v1, ..., timestamps
// 1_700_000_000_000 + i) to one partition through a Writer, synchronously.
func write(ctx context.Context, addrs []string) {
	config := kafka.WriterConfig{
		Brokers:      addrs,
		Topic:        *topic,
		Dialer:       dialer,
		Balancer:     kafka.BalancerFunc(func(kafka.Message, ...int) int { return *partition }),
		BatchSize:    *count,
		BatchTimeout: 50 * time.Millisecond,
		MaxAttempts:  10,
	}
	switch *codec {
	case "none":
	case "gzip":
		config.CompressionCodec = gzip.NewCompressionCodec()
	case "snappy":
		config.CompressionCodec = snappy.NewCompressionCodec()
	case "lz4":
		config.CompressionCodec = lz4.NewCompressionCodec()
	default:
		check(fmt.Errorf("unknown codec %q", *codec))
	}
	writer := kafka.NewWriter(config)
	messages := make([]kafka.Message, *count)
	for i := range messages {
		messages[i] = kafka.Message{
			Key:   []byte(fmt.Sprintf("k%d", i)),
			Value: []byte(fmt.Sprintf("v%d", i)),
			Time:  time.Unix(0, (1_700_000_000_000+int64(i))*int64(time.Millisecond)),
		}
	}
	check(writer.WriteMessages(ctx, messages...))
	check(writer.Close())
}

// read reads count messages of topic as a member of group; ReadMessage commits each offset
// (the Reader's CommitInterval is 0: synchronous commits).
func read(ctx context.Context, addrs []string) {
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        addrs,
		GroupID:        *group,
		Dialer:         dialer,
		Topic:          *topic,
		MinBytes:       1,
		MaxBytes:       1 << 20,
		MaxWait:        200 * time.Millisecond,
		SessionTimeout: 10 * time.Second,
	})
	for got := 0; got < *count; got++ {
		m, err := reader.ReadMessage(ctx)
		if err != nil {
			check(fmt.Errorf("after %d of %d messages: %v", got, *count, err))
		}
		emit(map[string]interface{}{
			"partition": m.Partition, "offset": m.Offset, "key": string(m.Key),
			"value": string(m.Value), "timestamp": m.Time.UnixNano() / int64(time.Millisecond),
		})
	}
	check(reader.Close())
}
