package main

import (
	"context"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"pybroker/tests/go/internal/peer"
)

// produce writes -n records with each codec of -codecs, one idempotent producer per codec
// (kgo's default: idempotent, acks=all), record i of a codec to partition i % partitions with
// the value <codec>-p<partition>-<i / partitions>; then the end marker to every partition.
func produce(args []string) {
	fs, c := peer.Flags("produce")
	names := fs.String("codecs", strings.Join(codecNames, ","), "comma-separated codecs")
	n := fs.Int("n", 100, "records per codec")
	end := fs.String("end", "END", "the value written to every partition at the end")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	for _, name := range strings.Split(*names, ",") {
		codec, ok := codecs[name]
		if !ok {
			peer.Fail("unknown codec %q", name)
		}
		cl := client(c, kgo.DefaultProduceTopic(c.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(codec))
		var (
			mu         sync.Mutex
			acked      int
			idempotent = true
			failures   = map[string]int{}
		)
		for i := 0; i < *n; i++ {
			p := i % c.Partitions
			r := &kgo.Record{Partition: int32(p), Value: []byte(peer.Value(name, p, i/c.Partitions))}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures[err.Error()]++
					return
				}
				acked++
				idempotent = idempotent && r.ProducerID >= 0
			})
		}
		peer.Check(cl.Flush(ctx), "flush")
		cl.Close()
		peer.Emit(map[string]any{"codec": name, "acked": acked, "idempotent": idempotent, "errors": failures})
	}
	writeEnd(ctx, c, *end)
}

// writeEnd writes the end marker to every partition with an idempotent producer.
func writeEnd(ctx context.Context, c *peer.Common, end string) {
	cl := client(c, kgo.DefaultProduceTopic(c.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	peer.Check(cl.ProduceSync(ctx, endRecords(c, end)...).FirstErr(), "produce the end markers")
}

func endRecords(c *peer.Common, end string) []*kgo.Record {
	var rs []*kgo.Record
	for p := 0; p < c.Partitions; p++ {
		rs = append(rs, &kgo.Record{Partition: int32(p), Value: []byte(end)})
	}
	return rs
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
	ctx, cancel := c.Context()
	defer cancel()
	cl := client(c, kgo.TransactionalID(*id), kgo.DefaultProduceTopic(c.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	for _, step := range []struct {
		name   string
		commit kgo.TransactionEndTry
	}{{"c1", kgo.TryCommit}, {"ab", kgo.TryAbort}, {"c2", kgo.TryCommit}} {
		peer.Check(cl.BeginTransaction(), "begin "+step.name)
		var rs []*kgo.Record
		for p := 0; p < c.Partitions; p++ {
			for i := 0; i < *n; i++ {
				rs = append(rs, &kgo.Record{Partition: int32(p), Value: []byte(peer.Value(*tag+step.name, p, i))})
			}
		}
		if step.name == "c2" {
			rs = append(rs, endRecords(c, *end)...)
		}
		peer.Check(cl.ProduceSync(ctx, rs...).FirstErr(), "produce "+step.name)
		peer.Check(cl.EndTransaction(ctx, step.commit), "end "+step.name)
		peer.Emit(map[string]any{"txn": *tag + step.name, "commit": bool(step.commit), "records": len(rs)})
	}
}

// read consumes every partition from its start, without a group, until each delivered the end
// marker; it prints the values, offsets and batch codecs of each partition.
func read(args []string) {
	fs, c := peer.Flags("read")
	isolation := fs.String("isolation", "read_uncommitted", "read_committed or read_uncommitted")
	until := fs.String("until", "END", "the end marker")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	cl := client(c, kgo.ConsumeTopics(c.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolationLevel(*isolation)))
	defer cl.Close()
	reader := peer.NewReader(*until, c.Partitions)
	consume(ctx, cl, reader)
	peer.Emit(map[string]any{"partitions": reader.Result()})
}

func isolationLevel(name string) kgo.IsolationLevel {
	switch name {
	case "read_committed":
		return kgo.ReadCommitted()
	case "read_uncommitted":
		return kgo.ReadUncommitted()
	}
	peer.Fail("unknown isolation level %q", name)
	return kgo.ReadUncommitted()
}

// consume polls until the reader is done; a fetch error or the deadline fails the process.
func consume(ctx context.Context, cl *kgo.Client, reader *peer.Reader) {
	for !reader.Done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			peer.Fail("timed out waiting for the end marker of partitions %v", reader.Missing())
		}
		fetches.EachError(func(t string, p int32, err error) { peer.Fail("fetch %s[%d]: %v", t, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			reader.Add(r.Partition, r.Offset, r.Value, codecNames[r.Attrs.CompressionType()])
		})
	}
}
