package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"pybroker/tests/go/internal/peer"
)

// admin runs kadm calls on a topic of its own (created here with -rf and 2 partitions, then
// grown to 3, filled, trimmed and deleted) and a group of its own; it prints one line per step.
func admin(args []string) {
	fs, c := peer.Flags("admin")
	rf := fs.Int("rf", 1, "replication factor")
	groupName := fs.String("group", "", "group id for the group steps")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	cl := client(c, kgo.DefaultProduceTopic(c.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	t := c.Topic

	configs := map[string]*string{"retention.ms": kadm.StringPtr("3600000")}
	created, err := adm.CreateTopics(ctx, 2, int16(*rf), configs, t)
	peer.Check(err, "create topics")
	r := created[t]
	peer.Emit(map[string]any{"step": "create", "err": code(r.Err), "partitions": r.NumPartitions,
		"rf": r.ReplicationFactor})
	waitForLeaders(ctx, adm, t, 2)
	again, err := adm.CreateTopics(ctx, 2, int16(*rf), nil, t)
	peer.Check(err, "create topics again")
	peer.Emit(map[string]any{"step": "create_again", "err": code(again[t].Err)})

	keys := []string{"retention.ms", "cleanup.policy", "max.message.bytes"}
	described := describeConfigs(ctx, adm, t, keys)
	peer.Emit(map[string]any{"step": "describe_configs", "configs": described})
	altered := alterTopicConfigs(ctx, adm, t, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	})
	described = describeChanged(ctx, adm, t, keys, described)
	peer.Emit(map[string]any{"step": "alter_configs", "err": code(altered[0].Err), "configs": described})
	altered = alterTopicConfigs(ctx, adm, t, []kadm.AlterConfig{
		{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	})
	peer.Emit(map[string]any{"step": "subtract_config", "err": code(altered[0].Err),
		"configs": describeChanged(ctx, adm, t, []string{"cleanup.policy"}, described)})

	grown, err := adm.CreatePartitions(ctx, 1, t)
	peer.Check(err, "create partitions")
	detail := waitForLeaders(ctx, adm, t, 3)
	replicas := map[int32]int{}
	for p, d := range detail.Partitions {
		replicas[p] = len(d.Replicas)
	}
	peer.Emit(map[string]any{"step": "create_partitions", "err": code(grown[t].Err), "replicas": replicas})

	// Ten records a partition, a second apart from base.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var rs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 10; i++ {
			rs = append(rs, &kgo.Record{Partition: p, Value: []byte(peer.Value("a", int(p), i)),
				Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
	}
	produceToNewPartitions(ctx, cl, rs)

	list := func(what string, listed kadm.ListedOffsets, err error) map[int32]any {
		peer.Check(err, "list "+what+" offsets")
		out := map[int32]any{}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				out[o.Partition] = map[string]int16{"err": code(o.Err)}
			} else if what == "max_timestamp" || what == "after" {
				out[o.Partition] = []int64{o.Offset, o.Timestamp - base.UnixMilli()}
			} else {
				out[o.Partition] = o.Offset
			}
		})
		return out
	}
	starts, err := adm.ListStartOffsets(ctx, t)
	offsets := map[string]any{"start": list("start", starts, err)}
	ends, err := adm.ListEndOffsets(ctx, t)
	offsets["end"] = list("end", ends, err)
	stable, err := adm.ListCommittedOffsets(ctx, t)
	offsets["committed"] = list("committed", stable, err)
	maxes, err := adm.ListMaxTimestampOffsets(ctx, t)
	offsets["max_timestamp"] = list("max_timestamp", maxes, err)
	after, err := adm.ListOffsetsAfterMilli(ctx, base.Add(5500*time.Millisecond).UnixMilli(), t)
	offsets["after"] = list("after", after, err)
	peer.Emit(map[string]any{"step": "list_offsets", "offsets": offsets})

	var trim kadm.Offsets
	trim.Add(kadm.Offset{Topic: t, Partition: 0, At: 4})
	trim.Add(kadm.Offset{Topic: t, Partition: 1, At: 10})
	deleted, err := adm.DeleteRecords(ctx, trim)
	peer.Check(err, "delete records")
	lows := map[int32]any{}
	deleted.Each(func(d kadm.DeleteRecordsResponse) {
		lows[d.Partition] = map[string]any{"err": code(d.Err), "low_watermark": d.LowWatermark}
	})
	starts, err = adm.ListStartOffsets(ctx, t)
	peer.Emit(map[string]any{"step": "delete_records", "results": lows, "start": list("start", starts, err),
		"first_read": firstOffset(ctx, c, t, 0)})

	g := *groupName
	var commits kadm.Offsets
	commits.Add(kadm.Offset{Topic: t, Partition: 0, At: 5, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: t, Partition: 2, At: 7, LeaderEpoch: -1})
	peer.Check(adm.CommitAllOffsets(ctx, g, commits), "commit offsets")
	listed, err := adm.ListGroups(ctx)
	peer.Check(err, "list groups")
	groups, err := adm.DescribeGroups(ctx, g)
	peer.Check(err, "describe groups")
	d := groups[g]
	fetched, err := adm.FetchOffsets(ctx, g)
	peer.Check(err, "fetch offsets")
	committed := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) { committed[o.Partition] = o.At })
	_, isListed := listed[g]
	peer.Emit(map[string]any{"step": "groups", "listed": isListed, "protocol_type": listed[g].ProtocolType,
		"state": d.State, "err": code(d.Err), "members": len(d.Members), "committed": committed})
	deletedGroups, err := adm.DeleteGroups(ctx, g)
	peer.Check(err, "delete groups")
	groups, err = adm.DescribeGroups(ctx, g)
	peer.Check(err, "describe deleted group")
	peer.Emit(map[string]any{"step": "delete_group", "err": code(deletedGroups[g].Err),
		"state_after": groups[g].State})

	var all kadm.TopicsSet
	all.Add(t, 0, 1, 2)
	peer.Emit(map[string]any{"step": "elect", "results": electPreferred(ctx, adm, all)})

	gone, err := adm.DeleteTopics(ctx, t)
	peer.Check(err, "delete topics")
	peer.Poll(ctx, "the deleted topic to leave the metadata", func() bool {
		topics, err := adm.ListTopics(ctx, t)
		return err == nil && !topics.Has(t)
	})
	peer.Emit(map[string]any{"step": "delete_topic", "err": code(gone[t].Err)})
}

type configValue struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

// alterTopicConfigs asks again while the answering broker has not heard of the topic yet
// (UNKNOWN_TOPIC_OR_PARTITION, as with describeConfigs), then returns the answer.
func alterTopicConfigs(ctx context.Context, adm *kadm.Client, topic string,
	alters []kadm.AlterConfig) kadm.AlterConfigsResponses {
	var altered kadm.AlterConfigsResponses
	peer.Poll(ctx, "altering the configs of "+topic, func() bool {
		var err error
		altered, err = adm.AlterTopicConfigs(ctx, alters, topic)
		peer.Check(err, "incremental alter configs")
		return !errors.Is(altered[0].Err, kerr.UnknownTopicOrPartition)
	})
	return altered
}

func describeConfigs(ctx context.Context, adm *kadm.Client, topic string,
	keys []string) map[string]configValue {
	// A broker that has not yet heard of a topic just created (its metadata follows the
	// controller's) answers UNKNOWN_TOPIC_OR_PARTITION, Kafka's brokers too: ask again.
	var rc kadm.ResourceConfig
	peer.Poll(ctx, "the configs of "+topic, func() bool {
		described, err := adm.DescribeTopicConfigs(ctx, topic)
		peer.Check(err, "describe configs")
		rc, err = described.On(topic, nil)
		peer.Check(err, "describe configs")
		if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			return false
		}
		peer.Check(rc.Err, "describe configs")
		return true
	})
	out := map[string]configValue{}
	for _, config := range rc.Configs {
		for _, key := range keys {
			if config.Key == key {
				out[key] = configValue{config.MaybeValue(), config.Source.String()}
			}
		}
	}
	return out
}

// describeChanged describes the keys until an answer differs from before, for at most 10 s: the
// broker answering DescribeConfigs may learn of an alteration made through another broker a bit
// later (in a cluster, topic configs travel through ZooKeeper).
func describeChanged(ctx context.Context, adm *kadm.Client, topic string, keys []string,
	before map[string]configValue) map[string]configValue {
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := describeConfigs(ctx, adm, topic, keys)
		for _, key := range keys {
			if now[key] != before[key] || time.Now().After(deadline) {
				return now
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstOffset is the offset of the first record a consumer starting at the log start gets.
func firstOffset(ctx context.Context, c *peer.Common, topic string, partition int32) int64 {
	cl := client(c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	}))
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			peer.Fail("timed out reading %s[%d]", topic, partition)
		}
		fetches.EachError(func(t string, p int32, err error) { peer.Fail("fetch %s[%d]: %v", t, p, err) })
		if records := fetches.Records(); len(records) > 0 {
			return records[0].Offset
		}
	}
}

// electPreferred asks for preferred leader elections: partition → error code.
func electPreferred(ctx context.Context, adm *kadm.Client, s kadm.TopicsSet) map[int32]int16 {
	results, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, s)
	peer.Check(err, "elect leaders")
	codes := map[int32]int16{}
	for _, ps := range results {
		for p, r := range ps {
			codes[p] = code(r.Err)
		}
	}
	return codes
}

// elect: preferred leader elections for every partition of the topic; prints each partition's
// error code, then waits until every partition is led by its preferred replica.
func elect(args []string) {
	fs, c := peer.Flags("elect")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	adm := kadm.NewClient(client(c))
	defer adm.Close()
	var s kadm.TopicsSet
	for p := 0; p < c.Partitions; p++ {
		s.Add(c.Topic, int32(p))
	}
	codes := electPreferred(ctx, adm, s)
	peer.Poll(ctx, "preferred leaders", func() bool {
		topics, err := adm.ListTopics(ctx, c.Topic)
		if err != nil {
			return false
		}
		for _, p := range topics[c.Topic].Partitions {
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	})
	peer.Emit(map[string]any{"results": codes, "preferred_leaders": true})
}

// producers describes the producers of every partition of the topic (DescribeProducers): per
// partition, each producer's last sequence number and the start offset of its open transaction
// (-1 for none), in order of producer id.
func producers(args []string) {
	fs, c := peer.Flags("producers")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	adm := kadm.NewClient(client(c))
	defer adm.Close()
	var s kadm.TopicsSet
	for p := 0; p < c.Partitions; p++ {
		s.Add(c.Topic, int32(p))
	}
	described, err := adm.DescribeProducers(ctx, s)
	peer.Check(err, "describe producers")
	out := map[int32]any{}
	described.EachPartition(func(d kadm.DescribedProducersPartition) {
		if d.Err != nil {
			out[d.Partition] = map[string]int16{"err": code(d.Err)}
			return
		}
		states := [][2]int64{}
		for _, state := range d.ActiveProducers.Sorted() {
			states = append(states, [2]int64{int64(state.LastSequence), state.CurrentTxnStartOffset})
		}
		out[d.Partition] = states
	})
	peer.Emit(map[string]any{"partitions": out})
}

// produceToNewPartitions produces rs, again for the records of partitions the client does not
// know yet: a broker may answer Metadata without the partitions CreatePartitions just added (its
// metadata follows the controller's), and kgo refuses such a record at once; it discovers them
// on a metadata refresh (kgo's ForceMetadataRefresh documents this for Kafka too).
func produceToNewPartitions(ctx context.Context, cl *kgo.Client, rs []*kgo.Record) {
	pending := rs
	peer.Poll(ctx, "the added partitions in the producer's metadata", func() bool {
		var retry []*kgo.Record
		for _, r := range cl.ProduceSync(ctx, pending...) {
			if r.Err != nil && strings.Contains(r.Err.Error(), "invalid record partitioning choice") {
				retry = append(retry, r.Record)
			} else {
				peer.Check(r.Err, "produce")
			}
		}
		pending = retry
		if len(pending) > 0 {
			cl.ForceMetadataRefresh()
		}
		return len(pending) == 0
	})
}
