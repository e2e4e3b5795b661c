"""The formatting and option rules of ``pybroker leader-election`` and ``pybroker topics
describe``, checked against Kafka's LeaderElectionCommand and TopicCommand (3.6) without a
broker: output lines, filters, the election JSON file and the replica assignment syntax."""

from __future__ import annotations

import argparse

import pytest

from pybroker.cli import leader_election, topics
from pybroker.client.admin import AdminError, PartitionInfo, TopicDescription
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    leader_election.add_parser(commands)
    topics.add_parser(commands)
    return parser.parse_args(list(argv))


# --- leader-election --------------------------------------------------------------------------


def test_report_lines_are_kafkas():
    results = {
        TopicPartition("b", 0): None,
        TopicPartition("a", 1): None,
        TopicPartition("a", 0): AdminError("partition a-0", ErrorCode.ELECTION_NOT_NEEDED),
        TopicPartition("c", 2): AdminError("partition c-2", ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                           "Failed to elect leader for partition c-2 under strategy "
                                           "PreferredReplicaPartitionLeaderElectionStrategy"),
    }
    lines, failures = leader_election.report("preferred", results)
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions a-1, b-0",
        "Valid replica already elected for partitions a-0",
        "Error completing leader election (PREFERRED) for partition: c-2: PREFERRED_LEADER_NOT_AVAILABLE: "
        "Failed to elect leader for partition c-2 under strategy PreferredReplicaPartitionLeaderElectionStrategy",
    ]
    assert failures == 1
    assert leader_election.report("unclean", {}) == ([], 0)


@pytest.mark.parametrize("argv,problem", [
    (["--bootstrap-server", "h:1", "--all-topic-partitions"], "Missing required option(s): election-type"),
    (["--election-type", "preferred", "--all-topic-partitions"], "Missing required option(s): bootstrap-server"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred"],
     "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t", "--all-topic-partitions"],
     "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"],
     "Missing required option(s): partition"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--all-topic-partitions", "--partition", "1"],
     "Option partition is only allowed if topic is used"),
    (["--bootstrap-server", "h:1", "--election-type", "UNCLEAN", "--topic", "t", "--partition", "0"], None),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--path-to-json-file", "f"], None),
])
def test_options_are_checked_as_kafka_does(argv, problem):
    assert leader_election.usage_error(parse("leader-election", *argv)) == problem


def test_election_type_is_case_insensitive():
    assert parse("leader-election", "--election-type", "PREFERRED").election_type == "preferred"
    with pytest.raises(SystemExit):
        parse("leader-election", "--election-type", "random")


def test_election_json_file():
    text = '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}'
    assert leader_election.parse_election_data(text) == [TopicPartition("foo", 1), TopicPartition("foobar", 2)]
    with pytest.raises(leader_election.ElectionDataError, match="duplicate partitions: foo-1"):
        leader_election.parse_election_data(
            '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foo", "partition": 1}]}')
    with pytest.raises(leader_election.ElectionDataError, match='missing "partitions" field'):
        leader_election.parse_election_data("{}")
    with pytest.raises(leader_election.ElectionDataError, match="not valid JSON"):
        leader_election.parse_election_data("{")
    with pytest.raises(leader_election.ElectionDataError, match=r"partitions\[0\]"):
        leader_election.parse_election_data('{"partitions": [{"topic": "foo"}]}')


# --- topics describe and create ---------------------------------------------------------------

TOPIC = TopicDescription("t", "AAAAAAAAAAAAAAAAAAAAAQ", [
    PartitionInfo(0, 1, 0, [1, 2, 3], [1, 2, 3]),
    PartitionInfo(1, 3, 2, [2, 3, 1], [3, 1]),
    PartitionInfo(2, -1, 4, [3, 1, 2], [3]),
    PartitionInfo(3, 3, 4, [3, 1, 2], [3]),
])


def test_describe_lines_are_topic_commands():
    assert topics.describe_lines(TOPIC, "retention.ms=1000", {1, 2}) == [
        "Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 4\tReplicationFactor: 3\tConfigs: retention.ms=1000",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: 3,1",  # 3 is not alive
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3",
        "\tTopic: t\tPartition: 3\tLeader: none\tReplicas: 3,1,2\tIsr: 3",
    ]


def test_describe_filters_print_partitions_only():
    live = {1, 2, 3}
    assert topics.describe_lines(TOPIC, "", live, under_replicated=True) == [
        "\tTopic: t\tPartition: 1\tLeader: 3\tReplicas: 2,3,1\tIsr: 3,1",
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3",
        "\tTopic: t\tPartition: 3\tLeader: 3\tReplicas: 3,1,2\tIsr: 3",
    ]
    assert topics.describe_lines(TOPIC, "", live, unavailable=True) == [
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3",
    ]
    assert topics.describe_lines(TOPIC, "", {1, 2}, unavailable=True) == [
        topics.partition_line("t", p, {1, 2}) for p in TOPIC.partitions[1:]
    ]


def test_zero_topic_id_is_not_printed():
    topic = TopicDescription("t", topics.ZERO_TOPIC_ID, [PartitionInfo(0, 1, 0, [1], [1])])
    assert topics.topic_line(topic, "") == "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "


def test_kip_253_counts_are_shown_once_the_partition_count_changed():
    partitions = [PartitionInfo(i, 1, 0, [1], [1]) for i in range(4)]
    grown = TopicDescription("t", topics.ZERO_TOPIC_ID, partitions, initial_partition_count=2, undeleted_partition_count=4)
    assert topics.topic_line(grown, "") == ("Topic: t\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: "
                                            "\tInitialPartitionCount: 2\tUndeletedPartitionCount: 4")
    # Unchanged since creation, or described by a broker that does not send them: Kafka's line.
    for counts in ((4, 4), (None, None)):
        plain = TopicDescription("t", topics.ZERO_TOPIC_ID, partitions, initial_partition_count=counts[0],
                                 undeleted_partition_count=counts[1])
        assert topics.topic_line(plain, "") == "Topic: t\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: "


def test_replica_assignment_syntax():
    assert topics.parse_replica_assignment("1:2:3, 2:3:1,3:1:2") == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    assert topics.parse_replica_assignment("4") == [[4]]
    with pytest.raises(ValueError, match="duplicate entries: 1"):
        topics.parse_replica_assignment("1:1")
    with pytest.raises(ValueError, match="Partition 1 has different replication factor: \\[2\\]"):
        topics.parse_replica_assignment("1:2,2")
    with pytest.raises(ValueError, match="not a colon-separated list"):
        topics.parse_replica_assignment("1:x")


@pytest.mark.parametrize("argv,problem", [
    (["create", "--topic", "t", "--replica-assignment", "1:2", "--partitions", "2"],
     'Option "[replica-assignment]" can\'t be used with option "[partitions]" or "[replication-factor]"'),
    (["alter", "--topic", "t", "--replica-assignment", "1:2"], "--replica-assignment is only valid with create"),
    (["describe", "--under-replicated-partitions", "--unavailable-partitions"],
     'Option "[under-replicated-partitions]" can\'t be used with option "[unavailable-partitions]"'),
    (["list", "--unavailable-partitions"],
     "--under-replicated-partitions and --unavailable-partitions are only valid with describe"),
    (["create", "--topic", "t", "--replica-assignment", "1:2"], None),
    (["describe", "--under-replicated-partitions"], None),
])
def test_topics_option_checks(argv, problem):
    args = parse("topics", *argv)
    assert topics._usage_error(args, args.action) == problem
