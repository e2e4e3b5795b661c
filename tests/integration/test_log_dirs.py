"""Several log dirs (JBOD) through real clients: DescribeLogDirs and AlterReplicaLogDirs through
kafka-python's ``KafkaAdminClient`` (confluent-kafka 2.16 and aiokafka expose neither), the
``pybroker log-dirs`` tool, a replica moved between dirs under a producer's load and by
``pybroker reassign-partitions`` with ``log_dirs``, and a failed
log dir on a three-broker cluster.
"""

from __future__ import annotations

import json
import os
import threading

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import NoError

from tests.conftest import wait_until
from tests.integration.cluster import start_cluster, zk_client
from tests.integration.test_cli import ok, pybroker
from tests.zookeeper import chroot_for


def replicas_by_dir(admin: KafkaAdminClient, broker_id: int | None = None) -> dict[str, dict[str, tuple[int, int, bool]]]:
    """kafka-python's describe_log_dirs as log dir → {"topic-partition": (size, offset lag, is future)}."""
    out: dict[str, dict[str, tuple[int, int, bool]]] = {}
    for answer in admin.describe_log_dirs(brokers=None if broker_id is None else [broker_id]):
        for result in answer["log_dirs"]:
            dir_ = out.setdefault(result["log_dir"], {})
            for topic in result["topics"]:
                for p in topic["partitions"]:
                    dir_[f"{topic['name']}-{p['partition_index']}"] = (
                        p["partition_size"], p["offset_lag"], p["is_future_key"])
    return out


def test_describe_and_move_a_replica_between_log_dirs_under_load(start_broker, tmp_path, topic_name):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    broker = start_broker(**{"log.dirs": f"{a},{b}", "node.id": 1})
    creator = AdminClient({"bootstrap.servers": broker.bootstrap})
    creator.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])[topic_name].result(10)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        # Placement: one new partition per dir (fewest logs first).
        placed = wait_until(lambda: (d := replicas_by_dir(admin)) and f"{topic_name}-1" in str(d) and d, timeout=10)
        assert set(placed) == {a, b}
        assert f"{topic_name}-0" in placed[a] and f"{topic_name}-1" in placed[b]

        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        sent: list[int] = []
        stop = threading.Event()

        def produce() -> None:
            i = 0
            while not stop.is_set() or i < 2000:
                producer.produce(topic_name, value=b"%08d" % i + b"x" * 200, partition=0)
                sent.append(i)
                i += 1
                if i % 200 == 0:
                    producer.flush(10)
            producer.flush(10)

        thread = threading.Thread(target=produce)
        thread.start()
        try:
            wait_until(lambda: len(sent) > 500, timeout=10)
            results = admin.alter_replica_log_dirs({TopicPartitionReplica(topic_name, 0, 1): b})
            assert [getattr(e, "errno", e) for e in results.values()] in ([NoError], [0]), results
            moved = wait_until(
                lambda: (d := replicas_by_dir(admin)) and f"{topic_name}-0" in d[b] and not d[b][f"{topic_name}-0"][2]
                and f"{topic_name}-0" not in d[a] and d, timeout=30, message="the replica swapped into b")
        finally:
            stop.set()
            thread.join(30)
        assert moved[b][f"{topic_name}-0"][0] > 0
        # The replaced log was renamed ``<name>.<uuid>-delete`` in the swap's step (never two dirs
        # named after the partition), and is removed in a worker thread soon after.
        assert f"{topic_name}-0" not in os.listdir(a)
        wait_until(lambda: not any(name.startswith(f"{topic_name}-0") for name in os.listdir(a)), timeout=10,
                   message="the replaced log's directory removed")

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([__import__("confluent_kafka").TopicPartition(topic_name, 0, 0)])
        got: list[int] = []
        while len(got) < len(sent):
            messages = consumer.consume(1000, timeout=5)
            assert messages, f"only {len(got)} of {len(sent)} records came back"
            got += [int(m.value()[:8]) for m in messages if m.error() is None]
        consumer.close()
        assert got == sent  # nothing lost, nothing twice, in order

        # Unknown dir / partition of no topic: Kafka's errors.
        results = admin.alter_replica_log_dirs({
            TopicPartitionReplica(topic_name, 1, 1): str(tmp_path / "nowhere"),
            TopicPartitionReplica("absent-topic", 0, 1): a,
        })
        assert sorted(e.__name__ for e in results.values()) == ["LogDirNotFoundError", "UnknownTopicOrPartitionError"]

        # kafka-log-dirs.sh's output.
        out = ok(pybroker("log-dirs", "--describe", "--bootstrap-server", broker.bootstrap, "--topic-list", topic_name))
        lines = out.splitlines()
        assert lines[:2] == ["Querying brokers for log directories information",
                             "Received log directory information from brokers 1"]
        document = json.loads(lines[2])
        assert document["version"] == 1 and [x["broker"] for x in document["brokers"]] == [1]
        dirs = {d["logDir"]: d for d in document["brokers"][0]["logDirs"]}
        assert dirs[a]["error"] is None and dirs[a]["partitions"] == []
        assert sorted(p["partition"] for p in dirs[b]["partitions"]) == [f"{topic_name}-0", f"{topic_name}-1"]
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in dirs[b]["partitions"])
        assert "brokers do not exist from --broker-list: 7" in pybroker(
            "log-dirs", "--describe", "--bootstrap-server", broker.bootstrap, "--broker-list", "1,7").stderr
    finally:
        admin.close()


@pytest.mark.broker_log_allows(r"Disk error while writing", r"Error while flushing", r"failed: \[Errno 2\d?\]",
                               r"Not a directory", r"No such file or directory")
def test_a_failed_log_dir_takes_its_partitions_offline_and_leadership_moves(zookeeper, tmp_path, request, topic_name):
    """Broker 1 keeps its replicas of partition 0 in dir a and of partition 1 in dir b. Dir a is
    replaced by a file (a dead or unmounted disk as the next I/O sees it: running as root, a
    chmod would not stop anything); the next high-watermark checkpoint fails, so broker 1 takes
    a offline, writes a log dir event to ZooKeeper, and the controller moves partition 0's
    leadership to another replica and takes broker 1 out of its ISR, while broker 1 keeps
    leading partition 1 in dir b. The replica is offline in the metadata until broker 1
    restarts with dir a repaired; then it rejoins the ISR."""
    a, b = tmp_path / "b1-a", tmp_path / "b1-b"

    def overrides(node: int, _broker: object) -> dict[str, object]:
        return {"log.dirs": f"{a},{b}", "replica.high.watermark.checkpoint.interval.ms": 300} if node == 1 else {}

    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, broker_overrides=overrides,
                            **{"auto.leader.rebalance.enable": False})
    try:
        assert ok(pybroker("topics", "--bootstrap-server", cluster.bootstrap, "create", "--topic", topic_name,
                           "--replica-assignment", "1:2:3,1:3:2")) == f"Created topic {topic_name}.\n"
        wait_until(lambda: cluster.partitions(topic_name) == {0: (1, [1, 2, 3], [1, 2, 3]), 1: (1, [1, 3, 2], [1, 2, 3])},
                   timeout=20)
        assert (a / f"{topic_name}-0").is_dir() and (b / f"{topic_name}-1").is_dir()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for partition in (0, 1):
            producer.produce(topic_name, b"before", partition=partition)
        assert producer.flush(10) == 0

        a.rename(tmp_path / "b1-a-unplugged")
        a.write_text("")
        wait_until(lambda: (p := cluster.partitions(topic_name))[0][0] in (2, 3) and 1 not in p[0][2], timeout=20,
                   message="partition 0 led elsewhere, broker 1 out of its ISR")
        assert cluster.partitions(topic_name)[1] == (1, [1, 3, 2], [1, 2, 3])
        zk = zk_client(cluster.connect)
        try:  # the controller deleted the notification it handled
            wait_until(lambda: zk.get_children("/log_dir_event_notification") == [], timeout=10)
        finally:
            zk.stop()
        delivered: list[object] = []
        for partition in (0, 1):
            producer.produce(topic_name, b"after", partition=partition, on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(20) == 0 and delivered == [None, None]

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
        try:
            dirs = replicas_by_dir(admin, 1)
            assert dirs[str(a)] == {} and f"{topic_name}-1" in dirs[str(b)]
            errors = {r["log_dir"]: r["error_code"] for answer in admin.describe_log_dirs(brokers=[1])
                      for r in answer["log_dirs"]}
            assert errors == {str(a): 56, str(b): 0}
            # The controller records broker 1's replica of partition 0 as offline (KIP-112), and
            # every broker's Metadata (v5+) shows it.
            wait_until(lambda: offline_replicas(admin, topic_name) == {0: [1], 1: []}, timeout=10,
                       message="broker 1's replica of partition 0 offline in the metadata")
        finally:
            admin.close()

        # Broker 1 restarts with the disk back: its replica is online again and rejoins the ISR.
        cluster.broker(1).stop()
        a.unlink()
        (tmp_path / "b1-a-unplugged").rename(a)
        cluster.broker(1).start()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
        try:
            wait_until(lambda: offline_replicas(admin, topic_name) == {0: [], 1: []}
                       and cluster.partitions(topic_name)[0][2] == [1, 2, 3], timeout=30,
                       message="broker 1's replica of partition 0 back online and in the ISR")
        finally:
            admin.close()
    finally:
        cluster.kill()


def offline_replicas(admin: KafkaAdminClient, topic: str) -> dict[int, list[int]]:
    """kafka-python's describe_topics (Metadata v5+): partition → offline replicas."""
    [described] = admin.describe_topics([topic])
    return {p["partition_index"]: sorted(p["offline_replicas"]) for p in described["partitions"]}


def test_reassign_partitions_moves_a_replica_to_the_log_dir_named(start_broker, tmp_path, topic_name):
    """``pybroker reassign-partitions --execute`` with a log dir in ``log_dirs`` moves the replica
    there (AlterReplicaLogDirs); ``--verify`` reports the move until it has completed."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    broker = start_broker(**{"log.dirs": f"{a},{b}", "node.id": 1})
    creator = AdminClient({"bootstrap.servers": broker.bootstrap})
    creator.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])[topic_name].result(10)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        placed = wait_until(lambda: (d := replicas_by_dir(admin)) and f"{topic_name}-0" in str(d) and d, timeout=10)
        source = next(d for d, replicas in placed.items() if f"{topic_name}-0" in replicas)
        target = b if source == a else a
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
        out = ok(pybroker("reassign-partitions", "--bootstrap-server", broker.bootstrap, "--execute",
                          "--reassignment-json-file", str(plan)))
        assert out.splitlines()[-1] == f"Successfully started log directory move for: {topic_name}-0-1"
        wait_until(lambda: f"{topic_name}-0" in replicas_by_dir(admin)[target]
                   and f"{topic_name}-0" not in replicas_by_dir(admin)[source], timeout=20)
        verified = pybroker("reassign-partitions", "--bootstrap-server", broker.bootstrap, "--verify",
                            "--reassignment-json-file", str(plan))
        assert f"Reassignment of replica {topic_name}-0-1 completed successfully." in verified.stdout
    finally:
        admin.close()
