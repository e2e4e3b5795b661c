package main

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"pybroker/tests/go/internal/peer"
)

// eos copies -topic to -out exactly once with a GroupTransactSession (consume in a group,
// produce to the same partition of -out and commit the consumed offsets in one transaction).
// The first transaction that copied records is aborted: the session rewinds to the committed
// offsets and copies them again. Ends once every partition's end marker was copied in a
// committed transaction; prints how many transactions it aborted, then the group's committed
// offsets and the end offsets of -topic.
func eos(args []string) {
	fs, c := peer.Flags("eos")
	out := fs.String("out", "", "output topic")
	group := fs.String("group", "", "group id")
	id := fs.String("id", "", "transactional.id")
	until := fs.String("until", "END", "the end marker")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	s, err := kgo.NewGroupTransactSession(append(base(c),
		kgo.TransactionalID(*id),
		kgo.ConsumerGroup(*group), kgo.ConsumeTopics(c.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.DefaultProduceTopic(*out), kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)...)
	peer.Check(err, "new group transact session")
	defer s.Close()
	copied := peer.NewReader(*until, c.Partitions) // what committed transactions copied
	var committed, aborted int
	for !copied.Done() {
		peer.Check(s.Begin(), "begin")
		fetches := s.PollFetches(ctx)
		if ctx.Err() != nil {
			peer.Fail("timed out waiting for the end marker of partitions %v", copied.Missing())
		}
		fetches.EachError(func(t string, p int32, err error) { peer.Fail("fetch %s[%d]: %v", t, p, err) })
		records := fetches.Records()
		copies := make([]*kgo.Record, 0, len(records))
		for _, r := range records {
			copies = append(copies, &kgo.Record{Partition: r.Partition, Value: r.Value})
		}
		peer.Check(s.ProduceSync(ctx, copies...).FirstErr(), "produce")
		abort := aborted == 0 && len(records) > 0
		done, err := s.End(ctx, kgo.TransactionEndTry(!abort))
		peer.Check(err, "end transaction")
		switch {
		case done:
			committed++
			for _, r := range records {
				copied.Add(r.Partition, r.Offset, r.Value, "")
			}
		case abort:
			aborted++
		case len(records) > 0:
			peer.Fail("a transaction of %d records did not commit", len(records))
		}
	}
	peer.Emit(map[string]any{"aborted": aborted, "committed_some": committed > 0})
	peer.Emit(groupOffsets(ctx, s.Client(), *group, c.Topic, c.Partitions))
}
