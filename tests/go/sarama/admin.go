package main

import (
	"github.com/IBM/sarama"

	"pybroker/tests/go/internal/peer"
)

// admin runs ClusterAdmin calls on a topic of its own (2 partitions, -rf replicas): CreateTopic
// (twice), DescribeTopics, DeleteRecords after ten records a partition, ListConsumerGroups and
// DescribeConsumerGroups for a group that only committed offsets, DeleteTopic. One line per step.
func admin(args []string) {
	fs, c := peer.Flags("admin")
	rf := fs.Int("rf", 1, "replication factor")
	groupName := fs.String("group", "", "group id for the group steps")
	_ = fs.Parse(args)
	ctx, cancel := c.Context()
	defer cancel()
	cl := newClient(c, idempotent())
	defer func() { _ = cl.Close() }()
	adm, err := sarama.NewClusterAdminFromClient(cl)
	peer.Check(err, "new cluster admin")
	t := c.Topic

	detail := &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: int16(*rf),
		ConfigEntries: map[string]*string{"retention.ms": ptr("3600000")}}
	peer.Emit(map[string]any{"step": "create", "err": code(adm.CreateTopic(t, detail, false))})
	waitForLeaders(ctx, cl, t, 2)
	peer.Emit(map[string]any{"step": "create_again", "err": code(adm.CreateTopic(t, detail, false))})

	metadata, err := adm.DescribeTopics([]string{t})
	peer.Check(err, "describe topics")
	replicas := map[int32]int{}
	for _, p := range metadata[0].Partitions {
		replicas[p.ID] = len(p.Replicas)
	}
	peer.Emit(map[string]any{"step": "describe_topics", "err": int16(metadata[0].Err), "name": metadata[0].Name,
		"internal": metadata[0].IsInternal, "replicas": replicas})

	producer, err := sarama.NewSyncProducerFromClient(cl)
	peer.Check(err, "new producer")
	var msgs []*sarama.ProducerMessage
	for p := 0; p < 2; p++ {
		for i := 0; i < 10; i++ {
			msgs = append(msgs, message(t, p, peer.Value("a", p, i)))
		}
	}
	peer.Check(producer.SendMessages(msgs), "produce")
	peer.Check(producer.Close(), "close producer")

	err = adm.DeleteRecords(t, map[int32]int64{0: 4, 1: 10})
	starts := map[int32]int64{}
	for p := int32(0); p < 2; p++ {
		starts[p], _ = cl.GetOffset(t, p, sarama.OffsetOldest)
	}
	peer.Emit(map[string]any{"step": "delete_records", "err": code(err), "start": starts})

	// A group that only committed offsets (no member ever joined).
	offsets, err := sarama.NewOffsetManagerFromClient(*groupName, cl)
	peer.Check(err, "new offset manager")
	pom, err := offsets.ManagePartition(t, 0)
	peer.Check(err, "manage partition")
	pom.MarkOffset(6, "")
	offsets.Commit()
	pom.AsyncClose()
	peer.Check(offsets.Close(), "close offset manager")
	var groups map[string]string
	peer.Poll(ctx, "the group in ListConsumerGroups", func() bool {
		groups, err = adm.ListConsumerGroups()
		_, listed := groups[*groupName]
		return err == nil && listed
	})
	described, err := adm.DescribeConsumerGroups([]string{*groupName})
	peer.Check(err, "describe consumer groups")
	committed, err := adm.ListConsumerGroupOffsets(*groupName, map[string][]int32{t: {0}})
	peer.Check(err, "list consumer group offsets")
	peer.Emit(map[string]any{"step": "groups", "protocol_type": groups[*groupName], "state": described[0].State,
		"members": len(described[0].Members), "committed": committed.GetBlock(t, 0).Offset})

	peer.Emit(map[string]any{"step": "delete_topic", "err": code(adm.DeleteTopic(t))})
	peer.Poll(ctx, "the deleted topic to leave the metadata", func() bool {
		topics, err := adm.ListTopics()
		_, listed := topics[t]
		return err == nil && !listed
	})
}

func ptr(s string) *string { return &s }
