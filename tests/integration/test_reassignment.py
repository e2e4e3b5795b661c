"""Partition reassignment (KIP-455) on a three-broker cluster on ZooKeeper, through kafka-python's
``KafkaAdminClient.alter_partition_reassignments`` / ``list_partition_reassignments`` (confluent-kafka
2.16 has no reassignment API) and pybroker's own admin client: RF 1 → 3, a move [1, 2] → [2, 3]
under a steady acks=all producer that loses nothing (everything consumed back from the new
replicas once the old one is gone, its log directory deleted), cancellation, Kafka's errors, and
``pybroker reassign-partitions --generate/--execute/--verify/--list`` end to end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

from pybroker.client.admin import Admin
from pybroker.types import TopicPartition
from tests.conftest import wait_until
from tests.integration.cluster import start_cluster
from tests.integration.test_cli import ok, pybroker
from tests.zookeeper import chroot_for


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path,
                            **{"auto.leader.rebalance.enable": False})
    yield cluster
    cluster.kill()


def create(cluster, topic: str, assignment: str) -> None:
    assert ok(pybroker("topics", "--bootstrap-server", cluster.bootstrap, "create", "--topic", topic,
                       "--replica-assignment", assignment)) == f"Created topic {topic}.\n"


def settled(cluster, topic: str, partition: int, replicas: list[int]) -> bool:
    """Every broker's Metadata shows ``replicas`` as the partition's replicas and ISR."""
    for broker in cluster.brokers:
        from confluent_kafka.admin import AdminClient
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10).topics[topic]
        p = md.partitions[partition]
        if list(p.replicas) != replicas or sorted(p.isrs) != sorted(replicas):
            return False
    return True


def test_rf1_to_rf3_through_kafka_python(cluster, topic_name):
    create(cluster, topic_name, "1")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        tp = KTopicPartition(topic_name, 0)
        assert admin.alter_partition_reassignments({tp: [1, 2, 3]}) == {tp: None}
        wait_until(lambda: settled(cluster, topic_name, 0, [1, 2, 3]), timeout=20)
        assert admin.list_partition_reassignments() == {}
        # Errors are Kafka's, per partition
        results = admin.alter_partition_reassignments({tp: [1, 9], KTopicPartition(topic_name, 5): None})
        assert results == {tp: InvalidReplicationAssignmentError,  # INVALID_REPLICA_ASSIGNMENT (39)
                           KTopicPartition(topic_name, 5): NoReassignmentInProgressError}
    finally:
        admin.close()
    for broker in cluster.brokers:
        assert (broker.data_dir / f"{topic_name}-0").is_dir()


def test_a_move_under_acks_all_load_loses_nothing(cluster, topic_name):
    create(cluster, topic_name, "1:2")
    sent: list[str] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5})

        def delivered(err, msg):
            (failed if err else sent).append(msg.value().decode() if not err else str(err))

        i = 0
        while not stop.is_set():
            producer.produce(topic_name, f"m{i}".encode(), on_delivery=delivered)
            producer.poll(0)
            i += 1
            time.sleep(0.002)
        producer.flush(30)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_until(lambda: len(sent) > 200, timeout=20)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            tp = KTopicPartition(topic_name, 0)
            assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
            wait_until(lambda: settled(cluster, topic_name, 0, [2, 3]), timeout=30)
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
        count = len(sent)
        wait_until(lambda: len(sent) > count + 200, timeout=20)  # the producer goes on, on the new leader
    finally:
        stop.set()
        thread.join(60)
    assert failed == []
    # The removed replica's log directory is gone (renamed -delete, then removed)
    wait_until(lambda: not any(p.name.startswith(f"{topic_name}-0") for p in cluster.broker(1).data_dir.iterdir()))
    # Everything acknowledged is read back from the new replicas only
    cluster.broker(1).kill()
    # (kafka-python without a group: no group coordinator, whose partition may be on the dead broker)
    consumer = KafkaConsumer(bootstrap_servers=cluster.broker(2).bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([KTopicPartition(topic_name, 0)])
    consumer.seek_to_beginning()
    got: list[str] = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value.decode() for r in records]
    consumer.close()
    assert set(sent) <= set(got) and len(got) == len(set(got))


def test_cancel_reverts_to_the_original_replicas(cluster, topic_name):
    create(cluster, topic_name, "1")

    async def main() -> None:
        async with Admin(cluster.bootstrap) as admin:
            tp = TopicPartition(topic_name, 0)
            # Broker 3 cannot fetch while stopped: the reassignment stays under way
            os.kill(cluster.broker(3).proc.pid, signal.SIGSTOP)
            try:
                assert await admin.alter_partition_reassignments({tp: [1, 3]}) == {tp: None}
                listed = await admin.list_partition_reassignments()
                assert {p: (r.replicas, r.adding_replicas, r.removing_replicas) for p, r in listed.items()} == {
                    tp: ([1, 3], [3], [])}
                assert await admin.alter_partition_reassignments({tp: None}) == {tp: None}
                assert await admin.list_partition_reassignments([tp]) == {}
            finally:
                os.kill(cluster.broker(3).proc.pid, signal.SIGCONT)

    asyncio.run(main())
    wait_until(lambda: settled(cluster, topic_name, 0, [1]), timeout=20)
    # Broker 3 created the replica, then deleted it
    wait_until(lambda: not any(p.name.startswith(f"{topic_name}-0") for p in cluster.broker(3).data_dir.iterdir()),
               timeout=20)


def test_reassign_partitions_generate_execute_verify(cluster, topic_name, tmp_path):
    create(cluster, topic_name, "1,2")
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic_name}]}))
    out = ok(pybroker("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--generate",
                      "--topics-to-move-json-file", str(topics), "--broker-list", "3"))
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    current = json.loads(lines[1])
    assert current == {"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1], "log_dirs": ["any"]},
        {"topic": topic_name, "partition": 1, "replicas": [2], "log_dirs": ["any"]}]}
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert [p["replicas"] for p in proposed["partitions"]] == [[3], [3]]
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])
    out = ok(pybroker("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--execute",
                      "--reassignment-json-file", str(plan)))
    assert "Current partition replica assignment" in out
    assert out.rstrip().endswith(f"Successfully started partition reassignments for {topic_name}-0,{topic_name}-1")
    wait_until(lambda: settled(cluster, topic_name, 0, [3]) and settled(cluster, topic_name, 1, [3]), timeout=20)
    out = ok(pybroker("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--verify",
                      "--reassignment-json-file", str(plan)))
    assert out.startswith("Status of partition reassignment:\n"
                          f"Reassignment of partition {topic_name}-0 is completed.\n"
                          f"Reassignment of partition {topic_name}-1 is completed.\n")
    assert "Clearing broker-level throttles on brokers" in out
    out = ok(pybroker("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--list"))
    assert out == "No partition reassignments found.\n"
