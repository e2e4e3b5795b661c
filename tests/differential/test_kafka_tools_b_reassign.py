"""kafka-reassign-partitions (3.9.2's ``ReassignPartitionsCommand``) against three pybroker brokers
and three Apache Kafka 3.9.2 brokers: ``--generate``, ``--execute`` with throttles, ``--verify``;
each command runs against both clusters and the outputs are compared after
`tests.differential.tool_runs.normalize`.

Both clusters get the same topics with the same replica assignments and a few records in every
partition; every reassignment adds at most one replica to a partition, so that the ISR each
partition ends with (``Isr: 2,3,1``: Kafka appends a replica that caught up, and keeps that order)
does not depend on which follower caught up first. The throttles ``--execute`` sets are read back
with kafka-configs, and the partitions' final state with kafka-topics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import KafkaCluster
from tests.conftest import wait_until
from tests.differential.tool_runs import ToolPair
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
CONFIGS = "kafka.admin.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"

ASSIGNMENTS = {"moving": [[1, 2], [2, 3], [3, 1]], "growing": [[1], [2]]}
# moving-0 and moving-1 change replicas (the leader leaves in both), growing-0 moves its only
# replica, growing-1 gains one; moving-2 stays.
TARGETS = {("moving", 0): [2, 3], ("moving", 1): [3, 1], ("growing", 0): [3], ("growing", 1): [2, 1]}


@pytest.fixture(scope="module")
def pybroker_cluster(zookeeper, tmp_path_factory) -> Iterator[Cluster]:
    cluster = start_cluster(chroot_for(zookeeper, "tools-b-reassign"), tmp_path_factory.mktemp("tools-b-reassign"))
    try:
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture(scope="module")
def tools(pybroker_cluster: Cluster, kafka_cluster: KafkaCluster) -> ToolPair:
    return ToolPair([b.bootstrap for b in pybroker_cluster.brokers], [b.bootstrap for b in kafka_cluster.brokers])


def prepare(bootstrap: str) -> None:
    """The topics, with their replica assignments, and three records in every partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, len(replicas), replica_assignment=replicas) for name, replicas in ASSIGNMENTS.items()])
    for future in futures.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for name, replicas in ASSIGNMENTS.items():
        for partition in range(len(replicas)):
            for i in range(3):
                producer.produce(name, b"record-%d" % i, partition=partition)
    assert producer.flush(30) == 0


def partitions(bootstrap: str) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """(topic, partition) → (replicas, ISR) as a broker's Metadata answers them."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {(name, index): (list(p.replicas), list(p.isrs))
            for name in ASSIGNMENTS for index, p in metadata.topics[name].partitions.items()}


def reassigned(bootstrap: str) -> bool:
    state = partitions(bootstrap)
    return all(state[tp][0] == target and sorted(state[tp][1]) == sorted(target) for tp, target in TARGETS.items())


def test_generate_execute_verify(tools: ToolPair, tmp_path: Path) -> None:
    for side in tools.sides():
        prepare(",".join(side))
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": name} for name in ASSIGNMENTS]}))
    ours, theirs = tools.run(REASSIGN, ["--bootstrap-server", "{bootstrap}", "--generate", "--topics-to-move-json-file",
                                        str(topics_file), "--broker-list", "1,2,3"])
    # The current assignment must be the same; the proposal is the tool's own (AdminUtils'
    # assignment from a random first broker): it is only checked to be one.
    current, proposed = ours.out.split("Proposed partition reassignment configuration")
    assert (ours.code, current) == (theirs.code, theirs.out.split("Proposed partition reassignment configuration")[0])
    assert json.loads(current.split("\n")[1])["partitions"] == [
        {"topic": name, "partition": index, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for name in ("growing", "moving") for index, replicas in enumerate(ASSIGNMENTS[name])]
    for side in (ours, theirs):
        plan = json.loads(side.out.split("Proposed partition reassignment configuration")[1].strip())["partitions"]
        assert sorted((p["topic"], p["partition"]) for p in plan) == sorted(
            (name, index) for name, replicas in ASSIGNMENTS.items() for index in range(len(replicas)))
        for p in plan:
            assert len(set(p["replicas"])) == len(ASSIGNMENTS[p["topic"]][p["partition"]])
            assert set(p["replicas"]) <= {1, 2, 3}
    assert proposed

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": name, "partition": index, "replicas": replicas} for (name, index), replicas in TARGETS.items()]}))
    executed = tools.same(REASSIGN, ["--bootstrap-server", "{bootstrap}", "--execute", "--reassignment-json-file",
                                     str(plan_file), "--throttle", "50000000"])
    assert executed.code == 0 and "The inter-broker throttle limit was set to 50000000 B/s" in executed.out
    assert "Successfully started partition reassignments for growing-0,growing-1,moving-0,moving-1" in executed.out

    # The throttles --execute set: the rates on each broker, the throttled replicas on each topic.
    rates = tools.same(CONFIGS, ["--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "brokers",
                                 "--entity-name", "2"])
    assert rates.lines == [
        "Dynamic configs for broker 2 are:",
        "follower.replication.throttled.rate=50000000 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=50000000}",
        "leader.replication.throttled.rate=50000000 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=50000000}",
    ]
    replicas = tools.same(CONFIGS, ["--bootstrap-server", "{bootstrap}", "--describe", "--entity-type", "topics",
                                    "--entity-name", "moving"])
    assert "follower.replication.throttled.replicas=0:3,1:1" in replicas.out

    for side in tools.sides():
        wait_until(lambda side=side: reassigned(",".join(side)), timeout=60, message="the reassignments completing")
    verified = tools.same(REASSIGN, ["--bootstrap-server", "{bootstrap}", "--verify", "--reassignment-json-file",
                                     str(plan_file)])
    assert verified.lines == [
        "Status of partition reassignment:",
        *(f"Reassignment of partition {name}-{index} is completed." for name, index in sorted(TARGETS)),
        "",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topics growing,moving",
    ]

    # The ISR in Kafka's order: the leader appends the replica that caught up; a replica leaving
    # is dropped from its place.
    described = tools.same(TOPICS, ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", "moving"])
    assert [line.split(" Elr:")[0] for line in described.lines[1:]] == [
        "Topic: moving Partition: 0 Leader: 2 Replicas: 2,3 Isr: 2,3",
        "Topic: moving Partition: 1 Leader: 3 Replicas: 3,1 Isr: 3,1",
        "Topic: moving Partition: 2 Leader: 3 Replicas: 3,1 Isr: 3,1",
    ]
    grown = tools.same(TOPICS, ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", "growing"])
    assert "Topic: growing Partition: 1 Leader: 2 Replicas: 2,1 Isr: 2,1" in grown.out
