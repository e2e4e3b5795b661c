// Command franz is the franz-go (kgo, kadm) peer of tests/integration/test_go_clients.py: each
// sub-command runs one scenario against the brokers of -bootstrap and prints what it observed as
// JSON lines on stdout; a failure prints {"error": ...} and exits with status 1. Client logs
// (warnings and errors) go to stderr.
package main

import (
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"pybroker/tests/go/internal/peer"
)

func main() {
	peer.Run(map[string]func([]string){
		"create":    create,
		"produce":   produce,
		"txn":       txn,
		"read":      read,
		"group":     group,
		"admin":     admin,
		"elect":     elect,
		"producers": producers,
		"eos":       eos,
	})
}

// client is a kgo client of the brokers in c with the options given; it never creates topics.
func client(c *peer.Common, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append(base(c), opts...)...)
	peer.Check(err, "new client")
	return cl
}

// base are the options of every client: the brokers, a client id, warnings logged to stderr.
func base(c *peer.Common) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.Brokers()...),
		kgo.ClientID("go-franz-peer"),
		kgo.MetadataMinAge(100 * time.Millisecond), // kadm's Metadata answers are cached that long
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
	}
}

// code is the Kafka error code of err: 0 for nil, -1 for an error that is not Kafka's.
func code(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	default:
		return -1
	}
}

// codecs maps the names the tests use to kgo's codecs and batch attributes.
var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

var codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// create creates a topic and waits until every partition has a leader.
func create(args []string) {
	fs, c := peer.Flags("create")
	rf := fs.Int("rf", 1, "replication factor")
	config := fs.String("config", "", "comma-separated key=value topic configs")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	adm := kadm.NewClient(client(c))
	defer adm.Close()
	configs := map[string]*string{}
	for _, kv := range strings.Split(*config, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			configs[k] = kadm.StringPtr(v)
		}
	}
	_, err := adm.CreateTopic(ctx, int32(c.Partitions), int16(*rf), configs, c.Topic)
	peer.Check(err, "create topic "+c.Topic)
	waitForLeaders(ctx, adm, c.Topic, c.Partitions)
	peer.Emit(map[string]any{"created": c.Topic, "partitions": c.Partitions})
}

// waitForLeaders polls Metadata until the topic has n partitions, each with a leader.
func waitForLeaders(ctx context.Context, adm *kadm.Client, topic string, n int) kadm.TopicDetail {
	var detail kadm.TopicDetail
	peer.Poll(ctx, "leaders of "+topic, func() bool {
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil || topics[topic].Err != nil || len(topics[topic].Partitions) != n {
			return false
		}
		detail = topics[topic]
		for _, p := range detail.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
	return detail
}

func sortedInt32(ps []int32) []int32 {
	sorted := append([]int32{}, ps...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted
}
