package main

import (
	"context"
	"strings"
	"sync"

	"github.com/IBM/sarama"

	"pybroker/tests/go/internal/peer"
)

// produce writes -n records with each codec of -codecs, one idempotent SyncProducer per codec,
// record i of a codec to partition i % partitions with the value
// <codec>-p<partition>-<i / partitions>; then the end marker to every partition.
func produce(args []string) {
	fs, c := peer.Flags("produce")
	names := fs.String("codecs", "none,gzip,snappy,lz4,zstd", "comma-separated codecs")
	n := fs.Int("n", 100, "records per codec")
	end := fs.String("end", "END", "the value written to every partition at the end")
	_ = fs.Parse(args)
	for _, name := range strings.Split(*names, ",") {
		codec, ok := codecs[name]
		if !ok {
			peer.Fail("unknown codec %q", name)
		}
		cfg := idempotent()
		cfg.Producer.Compression = codec
		producer, err := sarama.NewSyncProducer(c.Brokers(), cfg)
		peer.Check(err, "new producer")
		var msgs []*sarama.ProducerMessage
		for i := 0; i < *n; i++ {
			p := i % c.Partitions
			msgs = append(msgs, message(c.Topic, p, peer.Value(name, p, i/c.Partitions)))
		}
		failures := map[string]int{}
		if err := producer.SendMessages(msgs); err != nil {
			if errs, ok := err.(sarama.ProducerErrors); ok {
				for _, e := range errs {
					failures[e.Err.Error()]++
				}
			} else {
				peer.Fail("send: %v", err)
			}
		}
		peer.Check(producer.Close(), "close producer")
		peer.Emit(map[string]any{"codec": name, "acked": len(msgs) - sum(failures), "errors": failures})
	}
	producer, err := sarama.NewSyncProducer(c.Brokers(), idempotent())
	peer.Check(err, "new producer")
	peer.Check(producer.SendMessages(endMessages(c, *end)), "produce the end markers")
	peer.Check(producer.Close(), "close producer")
}

func sum(counts map[string]int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}

func message(topic string, partition int, value string) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Topic: topic, Partition: int32(partition), Value: sarama.StringEncoder(value)}
}

func endMessages(c *peer.Common, end string) []*sarama.ProducerMessage {
	var msgs []*sarama.ProducerMessage
	for p := 0; p < c.Partitions; p++ {
		msgs = append(msgs, message(c.Topic, p, end))
	}
	return msgs
}

// txn runs three transactions of one transactional producer, each writing -n records to every
// partition: <tag>c1 committed, <tag>ab aborted, <tag>c2 committed with the end markers.
func txn(args []string) {
	fs, c := peer.Flags("txn")
	id := fs.String("id", "", "transactional.id")
	n := fs.Int("n", 10, "records per partition and transaction")
	tag := fs.String("tag", "", "prefix of the transactions' names in the values")
	end := fs.String("end", "END", "the value the last transaction writes to every partition")
	_ = fs.Parse(args)
	cfg := idempotent()
	cfg.Producer.Transaction.ID = *id
	producer, err := sarama.NewSyncProducer(c.Brokers(), cfg)
	peer.Check(err, "new transactional producer")
	defer func() { _ = producer.Close() }()
	for _, step := range []struct {
		name   string
		commit bool
	}{{"c1", true}, {"ab", false}, {"c2", true}} {
		peer.Check(producer.BeginTxn(), "begin "+step.name)
		var msgs []*sarama.ProducerMessage
		for p := 0; p < c.Partitions; p++ {
			for i := 0; i < *n; i++ {
				msgs = append(msgs, message(c.Topic, p, peer.Value(*tag+step.name, p, i)))
			}
		}
		if step.name == "c2" {
			msgs = append(msgs, endMessages(c, *end)...)
		}
		peer.Check(producer.SendMessages(msgs), "produce "+step.name)
		if step.commit {
			peer.Check(producer.CommitTxn(), "commit "+step.name)
		} else {
			peer.Check(producer.AbortTxn(), "abort "+step.name)
		}
		peer.Emit(map[string]any{"txn": *tag + step.name, "commit": step.commit, "records": len(msgs)})
	}
}

// read consumes every partition from its oldest offset with partition consumers (no group, all
// at once) until each delivered the end marker; it prints the values and offsets of each
// partition.
func read(args []string) {
	fs, c := peer.Flags("read")
	isolation := fs.String("isolation", "read_uncommitted", "read_committed or read_uncommitted")
	until := fs.String("until", "END", "the end marker")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	cfg := config()
	cfg.Consumer.IsolationLevel = isolationLevel(*isolation)
	consumer, err := sarama.NewConsumer(c.Brokers(), cfg)
	peer.Check(err, "new consumer")
	defer func() { _ = consumer.Close() }()
	reader := peer.NewReader(*until, c.Partitions)
	var wg sync.WaitGroup
	for p := 0; p < c.Partitions; p++ {
		pc, err := consumer.ConsumePartition(c.Topic, int32(p), sarama.OffsetOldest)
		peer.Check(err, "consume partition")
		wg.Add(1)
		go func() {
			defer wg.Done()
			readPartition(ctx, pc, reader)
			peer.Check(pc.Close(), "close partition consumer")
		}()
	}
	wg.Wait()
	peer.Emit(map[string]any{"partitions": reader.Result()})
}

func readPartition(ctx context.Context, pc sarama.PartitionConsumer, reader *peer.Reader) {
	for {
		select {
		case msg := <-pc.Messages():
			if reader.Add(msg.Partition, msg.Offset, msg.Value, "") {
				return
			}
		case err := <-pc.Errors():
			peer.Fail("consume: %v", err)
		case <-ctx.Done():
			peer.Fail("timed out waiting for the end marker of partitions %v", reader.Missing())
		}
	}
}

func isolationLevel(name string) sarama.IsolationLevel {
	switch name {
	case "read_committed":
		return sarama.ReadCommitted
	case "read_uncommitted":
		return sarama.ReadUncommitted
	}
	peer.Fail("unknown isolation level %q", name)
	return sarama.ReadUncommitted
}
