"""Leader elections on a three-broker cluster on ZooKeeper, as an operator sees them through
``pybroker topics`` (kafka-topics.sh) and ``pybroker leader-election`` (kafka-leader-election.sh),
and through confluent-kafka's ``AdminClient.elect_leaders``.

A broker that was stopped leaves the ISRs; the preferred election cannot give it its leaderships
back while it is down, and can once it has caught up and its leaders have added it back to the
ISRs (AlterPartition).
"""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import wait_until
from tests.integration.cluster import start_cluster
from tests.integration.test_cli import ok, pybroker
from tests.integration.test_cluster import bootstrap
from tests.zookeeper import chroot_for


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    """Three brokers (node ids 1-3), without the automatic rebalance (the test elects by hand)."""
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **{"auto.leader.rebalance.enable": False})
    yield cluster.connect, cluster.brokers
    cluster.kill()


def describe(servers: str, topic: str, *flags: str) -> dict[int, tuple[str, str, str]]:
    """``pybroker topics describe``: partition → (Leader, Replicas, Isr) as printed."""
    out = ok(pybroker("topics", "--bootstrap-server", servers, "describe", "--topic", topic, *flags))
    rows = {}
    for line in out.splitlines():
        if line.startswith("\t"):
            fields = dict(field.split(": ", 1) for field in line.strip().split("\t"))
            rows[int(fields["Partition"])] = (fields["Leader"], fields["Replicas"], fields["Isr"])
    return rows


def partitions(servers: str, topic: str, alive: tuple[int, ...] = (1, 2, 3)) -> dict[int, tuple[int, list[int]]] | None:
    """partition → (leader, ISR) as a Kafka client sees them (None until exactly the ``alive``
    brokers are known)."""
    md = AdminClient({"bootstrap.servers": servers}).list_topics(topic, timeout=10)
    if sorted(md.brokers) != list(alive):
        return None
    return {i: (p.leader, sorted(p.isrs)) for i, p in md.topics[topic].partitions.items()}


def elect(servers: str, *args: str):
    return pybroker("leader-election", "--bootstrap-server", servers, "--election-type", "preferred", *args)


def test_preferred_election_gives_leaderships_back(cluster, topic_name):
    connect, brokers = cluster
    servers = bootstrap(brokers)
    assert ok(pybroker("topics", "--bootstrap-server", servers, "create", "--topic", topic_name,
                       "--replica-assignment", "1:2:3,2:3:1,3:1:2")) == f"Created topic {topic_name}.\n"
    wait_until(lambda: partitions(servers, topic_name) == {0: (1, [1, 2, 3]), 1: (2, [1, 2, 3]), 2: (3, [1, 2, 3])},
               message="the preferred replicas leading")
    first = ok(pybroker("topics", "--bootstrap-server", servers, "describe", "--topic", topic_name)).splitlines()
    assert first[0].startswith(f"Topic: {topic_name}\tTopicId: ")
    assert first[0].endswith("\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: ")
    assert first[1:] == [
        f"\tTopic: {topic_name}\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        f"\tTopic: {topic_name}\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1",
        f"\tTopic: {topic_name}\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1,2",
    ]
    assert ok(elect(servers, "--all-topic-partitions")) == ""  # nothing to elect

    # Broker 2 stops (controlled shutdown: its leadership moves to 3, it leaves the ISRs).
    assert brokers[1].stop() == 0
    moved = {0: (1, [1, 3]), 1: (3, [1, 3]), 2: (3, [1, 3])}
    wait_until(lambda: partitions(bootstrap(brokers), topic_name, alive=(1, 3)) == moved, timeout=20,
               message="broker 2 out of the ISRs")
    assert describe(servers, topic_name) == {
        0: ("1", "1,2,3", "1,3"), 1: ("3", "2,3,1", "3,1"), 2: ("3", "3,1,2", "3,1"),
    }
    assert set(describe(servers, topic_name, "--under-replicated-partitions")) == {0, 1, 2}
    assert describe(servers, topic_name, "--unavailable-partitions") == {}

    # Broker 2 down, it cannot lead: Kafka's PREFERRED_LEADER_NOT_AVAILABLE.
    result = elect(servers, "--all-topic-partitions")
    assert result.returncode == 1
    assert result.stdout == (
        f"Error completing leader election (PREFERRED) for partition: {topic_name}-1: PREFERRED_LEADER_NOT_AVAILABLE: "
        f"Failed to elect leader for partition {topic_name}-1 under strategy "
        "PreferredReplicaPartitionLeaderElectionStrategy\n"
    )
    assert result.stderr == "Error: 1 replica(s) could not be elected\n"

    # Restarted, broker 2 fetches, catches up and its leaders add it back to the ISRs
    # (AlterPartition through the controller), but it leads nothing until an election.
    brokers[1].start()
    wait_until(lambda: partitions(servers, topic_name) == {0: (1, [1, 2, 3]), 1: (3, [1, 2, 3]), 2: (3, [1, 2, 3])},
               timeout=30, message="broker 2 in sync again")

    assert ok(elect(servers, "--topic", topic_name, "--partition", "0")) == \
        f"Valid replica already elected for partitions {topic_name}-0\n"
    assert ok(elect(servers, "--all-topic-partitions")) == \
        f"Successfully completed leader election (PREFERRED) for partitions {topic_name}-1\n"
    # The answer came once the new leader was applied: describe shows it at once. Broker 2 is
    # back at the end of each ISR, where its leader appended it (Kafka's order).
    assert describe(servers, topic_name) == {
        0: ("1", "1,2,3", "1,3,2"), 1: ("2", "2,3,1", "3,1,2"), 2: ("3", "3,1,2", "3,1,2"),
    }
    assert describe(servers, topic_name, "--under-replicated-partitions") == {}

    # Kafka's own client: ElectLeaders goes to the controller; per-partition results.
    admin = AdminClient({"bootstrap.servers": servers})
    tp0, missing = TopicPartition(topic_name, 0), TopicPartition(topic_name, 7)
    results = admin.elect_leaders(ElectionType.PREFERRED, [tp0, missing]).result(timeout=30)
    codes = {(tp.topic, tp.partition): error.code() for tp, error in results.items()}
    assert codes == {(topic_name, 0): KafkaError.ELECTION_NOT_NEEDED,
                     (topic_name, 7): KafkaError.UNKNOWN_TOPIC_OR_PART}
    result = elect(servers, "--topic", topic_name, "--partition", "7")
    assert result.returncode == 1
    assert result.stdout == (f"Error completing leader election (PREFERRED) for partition: {topic_name}-7: "
                             "UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.\n")
