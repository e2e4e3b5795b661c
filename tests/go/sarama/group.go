package main

import (
	"context"
	"sort"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"pybroker/tests/go/internal/peer"
)

// member is one consumer of a group (sarama's ConsumerGroup, range assignor, eager
// rebalancing): what it owns in the current session, and what it read.
type member struct {
	topic      string
	group      sarama.ConsumerGroup
	reader     atomic.Pointer[peer.Reader] // where the records go
	assignment peer.Assignment
	done       chan struct{}
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.assignment.Assigned(s.Claims()[m.topic])
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error {
	m.assignment.Revoked("revoked", s.Claims()[m.topic])
	return nil
}

// ConsumeClaim reads a partition until the session ends, marking every record; the end marker
// commits the marked offsets.
func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(msg, "")
			reader := m.reader.Load()
			if reader.IsMarker(msg.Value) {
				s.Commit() // before the reader tells that the partition is done
			}
			reader.Add(msg.Partition, msg.Offset, msg.Value, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

// join starts a member consuming the topic into reader until ctx ends; every record is marked,
// and the end marker of a partition commits.
func join(ctx context.Context, c *peer.Common, name, isolation string, reader *peer.Reader) *member {
	cfg := config()
	cfg.Consumer.IsolationLevel = isolationLevel(isolation)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	group, err := sarama.NewConsumerGroup(c.Brokers(), name, cfg)
	peer.Check(err, "new consumer group")
	m := &member{topic: c.Topic, group: group, done: make(chan struct{})}
	m.reader.Store(reader)
	go func() {
		for err := range group.Errors() {
			sarama.Logger.Printf("group error: %v", err)
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{c.Topic}, m); err != nil && ctx.Err() == nil {
				peer.Fail("consume: %v", err)
			}
		}
	}()
	return m
}

func (m *member) close() {
	<-m.done
	peer.Check(m.group.Close(), "close consumer group")
}

// group: member a consumes the topic until every partition delivered the end marker (each
// marker commits); with -second, member b joins and both wait until the rebalance has split the
// partitions between them (the group is described then). Prints what a consumed, the
// assignment changes of each member, and the committed and end offsets.
func group(args []string) {
	fs, c := peer.Flags("group")
	name := fs.String("group", "", "group id")
	until := fs.String("until", "END", "the end marker")
	isolation := fs.String("isolation", "read_committed", "read_committed or read_uncommitted")
	second := fs.Bool("second", false, "a second member joins once the first has consumed everything")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	cl := newClient(c, config())
	defer func() { _ = cl.Close() }()
	adm, err := sarama.NewClusterAdminFromClient(cl)
	peer.Check(err, "new cluster admin")

	consuming, stop := context.WithCancel(ctx)
	first := peer.NewReader(*until, c.Partitions)
	a := join(consuming, c, *name, *isolation, first)
	peer.Poll(ctx, "the end marker of every partition", first.Done)
	peer.Emit(map[string]any{"member": "a", "partitions": first.Result()})
	if *second {
		// Whatever either member reads from now on is late: a committed everything.
		late := peer.NewReader("", c.Partitions)
		a.reader.Store(late)
		b := join(consuming, c, *name, *isolation, late)
		peer.Poll(ctx, "the partitions split between both members", func() bool {
			return peer.Split(c.Partitions, &a.assignment, &b.assignment)
		})
		described, err := adm.DescribeConsumerGroups([]string{*name})
		peer.Check(err, "describe consumer groups")
		d := described[0]
		var sizes []int
		for _, m := range d.Members {
			assignment, err := m.GetMemberAssignment()
			peer.Check(err, "member assignment")
			sizes = append(sizes, len(assignment.Topics[c.Topic]))
		}
		sort.Ints(sizes)
		peer.Emit(map[string]any{"describe": map[string]any{
			"state": d.State, "protocol_type": d.ProtocolType, "protocol": d.Protocol,
			"members": len(d.Members), "sizes": sizes, "err": int16(d.Err),
		}})
		peer.Emit(map[string]any{"member": "a", "events": a.assignment.Events(), "owned": a.assignment.Owned()})
		peer.Emit(map[string]any{"member": "b", "events": b.assignment.Events(), "owned": b.assignment.Owned()})
		stop()
		a.close()
		b.close()
		peer.Emit(map[string]any{"late": late.Result()})
	} else {
		stop()
		a.close()
	}
	peer.Emit(offsets(cl, adm, c, *name))
}

// offsets are the group's committed offsets and the topic's end offsets, by partition.
func offsets(cl sarama.Client, adm sarama.ClusterAdmin, c *peer.Common,
	group string) map[string]map[int32]int64 {
	ps := make([]int32, c.Partitions)
	for p := range ps {
		ps[p] = int32(p)
	}
	fetched, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{c.Topic: ps})
	peer.Check(err, "list consumer group offsets")
	out := map[string]map[int32]int64{"committed": {}, "end": {}}
	for _, p := range ps {
		if block := fetched.GetBlock(c.Topic, p); block != nil && block.Err == sarama.ErrNoError {
			out["committed"][p] = block.Offset
		}
		end, err := cl.GetOffset(c.Topic, p, sarama.OffsetNewest)
		peer.Check(err, "end offset")
		out["end"][p] = end
	}
	return out
}
