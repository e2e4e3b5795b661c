package main

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"pybroker/tests/go/internal/peer"
)

// member is one consumer of a group, with the changes of its assignment.
type member struct {
	cl         *kgo.Client
	assignment peer.Assignment
}

// newMember joins the group with the cooperative-sticky balancer, committing only explicitly.
func newMember(c *peer.Common, group, isolation string) *member {
	m := &member{}
	own := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { m.assignment.Assigned(ps[c.Topic]) }
	revoke := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.assignment.Revoked(kind, ps[c.Topic])
		}
	}
	m.cl = client(c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(c.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolationLevel(isolation)),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.OnPartitionsAssigned(own), kgo.OnPartitionsRevoked(revoke("revoked")),
		kgo.OnPartitionsLost(revoke("lost")))
	return m
}

// group: member a consumes the topic until every partition delivered the end marker and commits;
// with -second, member b joins and both wait until the cooperative rebalance has split the
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
	cl := client(c)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	a := newMember(c, *name, *isolation)
	reader := peer.NewReader(*until, c.Partitions)
	consume(ctx, a.cl, reader)
	peer.Check(a.cl.CommitUncommittedOffsets(ctx), "commit")
	peer.Emit(map[string]any{"member": "a", "partitions": reader.Result()})

	if *second {
		b := newMember(c, *name, *isolation)
		// Both keep polling (there is nothing left to read: b starts at a's commits); the group's
		// rebalances run on kgo's own goroutines.
		polling, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		late := peer.NewReader("", c.Partitions)
		for _, m := range []*member{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for polling.Err() == nil {
					m.cl.PollFetches(polling).EachRecord(func(r *kgo.Record) {
						late.Add(r.Partition, r.Offset, r.Value, "")
					})
				}
			}()
		}
		peer.Poll(ctx, "the partitions split between both members", func() bool {
			return peer.Split(c.Partitions, &a.assignment, &b.assignment)
		})
		described, err := adm.DescribeGroups(ctx, *name)
		peer.Check(err, "describe group")
		d := described[*name]
		peer.Check(d.Err, "describe group")
		var sizes []int
		for _, m := range d.Members {
			if assigned, ok := m.Assigned.AsConsumer(); ok {
				n := 0
				for _, t := range assigned.Topics {
					n += len(t.Partitions)
				}
				sizes = append(sizes, n)
			}
		}
		sort.Ints(sizes)
		peer.Emit(map[string]any{"describe": map[string]any{
			"state": d.State, "protocol_type": d.ProtocolType, "protocol": d.Protocol,
			"members": len(d.Members), "sizes": sizes, "assigned": assigned(d),
		}})
		stop()
		wg.Wait()
		peer.Emit(map[string]any{"member": "a", "events": a.assignment.Events(), "owned": a.assignment.Owned()})
		peer.Emit(map[string]any{"member": "b", "events": b.assignment.Events(), "owned": b.assignment.Owned()})
		peer.Emit(map[string]any{"late": late.Result()})
		b.cl.Close()
	}
	a.cl.Close()

	peer.Emit(groupOffsets(ctx, cl, *name, c.Topic, c.Partitions))
}

// groupOffsets are the group's committed offsets of the topic's partitions (-1 for none) and
// the topic's end offsets. The OffsetFetch requires stable offsets (KIP-447) and is repeated while
// it answers UNSTABLE_OFFSET_COMMIT: a transaction's commit counts once its markers are written.
func groupOffsets(ctx context.Context, cl *kgo.Client, group, topic string,
	partitions int) map[string]map[int32]int64 {
	offsets := map[string]map[int32]int64{"committed": {}, "end": {}}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = topic
	for p := 0; p < partitions; p++ {
		t.Partitions = append(t.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, t)
	peer.Poll(ctx, "stable offsets of group "+group, func() bool {
		resp, err := req.RequestWith(ctx, cl)
		peer.Check(err, "fetch offsets")
		peer.Check(kerr.ErrorForCode(resp.ErrorCode), "fetch offsets")
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.UnstableOffsetCommit.Code {
					return false
				}
				peer.Check(kerr.ErrorForCode(p.ErrorCode), "fetch offsets")
				offsets["committed"][p.Partition] = p.Offset
			}
		}
		return true
	})
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	peer.Check(err, "list end offsets")
	ends.Each(func(o kadm.ListedOffset) { offsets["end"][o.Partition] = o.Offset })
	return offsets
}

// assigned lists the partitions assigned across the members of a described group.
func assigned(d kadm.DescribedGroup) []int32 {
	ps := []int32{}
	d.AssignedPartitions().Each(func(_ string, p int32) { ps = append(ps, p) })
	return sortedInt32(ps)
}
