// Command sarama is the IBM/sarama peer of tests/integration/test_go_clients.py: each
// sub-command runs one scenario against the brokers of -bootstrap and prints what it observed as
// JSON lines on stdout; a failure prints {"error": ...} and exits with status 1. Sarama's own log
// goes to stderr.
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/IBM/sarama"

	"pybroker/tests/go/internal/peer"
)

func main() {
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	peer.Run(map[string]func([]string){
		"create":  create,
		"produce": produce,
		"txn":     txn,
		"read":    read,
		"group":   group,
		"admin":   admin,
	})
}

// config is sarama's configuration for a Kafka 3.9.2 cluster that never creates topics by
// itself; acknowledged and failed produces are both reported.
func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_9_2_0
	cfg.ClientID = "go-sarama-peer"
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 50 * time.Millisecond
	cfg.Admin.Retry.Backoff = 50 * time.Millisecond
	cfg.Admin.Timeout = 10 * time.Second
	return cfg
}

// idempotent is config() for an idempotent producer as sarama requires it: acks=all, one
// request in flight per broker.
func idempotent() *sarama.Config {
	cfg := config()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	return cfg
}

func newClient(c *peer.Common, cfg *sarama.Config) sarama.Client {
	cl, err := sarama.NewClient(c.Brokers(), cfg)
	peer.Check(err, "new client")
	return cl
}

// code is the Kafka error code of err: 0 for nil, -1 for an error that is not Kafka's.
func code(err error) int16 {
	var ke sarama.KError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return int16(ke)
	default:
		return -1
	}
}

var codecs = map[string]sarama.CompressionCodec{
	"none":   sarama.CompressionNone,
	"gzip":   sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy,
	"lz4":    sarama.CompressionLZ4,
	"zstd":   sarama.CompressionZSTD,
}

// create creates a topic with ClusterAdmin.CreateTopic and waits until every partition has a
// leader.
func create(args []string) {
	fs, c := peer.Flags("create")
	rf := fs.Int("rf", 1, "replication factor")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	cl := newClient(c, config())
	defer func() { _ = cl.Close() }()
	adm, err := sarama.NewClusterAdminFromClient(cl)
	peer.Check(err, "new cluster admin")
	detail := &sarama.TopicDetail{NumPartitions: int32(c.Partitions), ReplicationFactor: int16(*rf)}
	peer.Check(adm.CreateTopic(c.Topic, detail, false), "create topic "+c.Topic)
	waitForLeaders(ctx, cl, c.Topic, c.Partitions)
	peer.Emit(map[string]any{"created": c.Topic, "partitions": c.Partitions})
}

// waitForLeaders refreshes the metadata until the topic has n partitions, each with a leader.
func waitForLeaders(ctx context.Context, cl sarama.Client, topic string, n int) {
	peer.Poll(ctx, "leaders of "+topic, func() bool {
		if cl.RefreshMetadata(topic) != nil {
			return false
		}
		ps, err := cl.Partitions(topic)
		if err != nil || len(ps) != n {
			return false
		}
		for _, p := range ps {
			if _, err := cl.Leader(topic, p); err != nil {
				return false
			}
		}
		return true
	})
}
