"""Replication between broker processes: followers fetch from their leaders over the wire.

What a user sees on a three-broker cluster with RF=3: every real client's acks=all produce is
answered once the in-sync replicas have the records, and reads them back byte for byte; the
followers hold the same records (a new leader serves them after the old one stops); DeleteRecords
waits for every alive replica unless KIP-1343's LeaderOnly says otherwise, and the log start
offset reaches the followers through their fetches and survives their restart.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka.admin import NewTopic

from pybroker.client.admin import Admin, AdminError
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition
from tests.conftest import wait_until
from tests.integration import clients
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    overrides = getattr(request, "param", {})
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **overrides)
    yield cluster
    cluster.kill()


def create(cluster: Cluster, topic: str, partitions: int = 1, rf: int = 3, **configs: str) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(30)
    wait_until(lambda: all(len(isr) == rf and leader > 0 for leader, _, isr in cluster.partitions(topic).values()),
               timeout=20, message=f"{topic} led with a full ISR")


def leader_of(cluster: Cluster, topic: str, partition: int = 0) -> int:
    return cluster.partitions(topic)[partition][0]


def wait_for_new_leader(cluster: Cluster, topic: str, old: int) -> int:
    return wait_until(lambda: (leader := leader_of(cluster, topic)) not in (old, -1) and leader,
                      timeout=20, message=f"a leader of {topic} other than {old}")


CLIENTS = {
    "confluent-kafka": (lambda b, t, pairs: clients.produce_confluent(b, t, pairs, acks="all"), clients.consume_confluent),
    "aiokafka": (lambda b, t, pairs: clients.produce_aiokafka(b, t, pairs, acks="all"), clients.consume_aiokafka),
    "kafka-python": (lambda b, t, pairs: clients.produce_kafka_python(b, t, pairs, acks="all"),
                     clients.consume_kafka_python),
    "kcat": (lambda b, t, pairs: clients.produce_kcat(b, t, pairs, acks="all"), clients.consume_kcat),
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_acks_all_on_three_replicas_with_each_client(cluster, topic_name, client):
    """Each client produces with acks=all to an RF=3 topic (min.insync.replicas=2) and reads its
    records back byte for byte; after the leader stops, the new leader serves the same bytes."""
    produce, consume = CLIENTS[client]
    create(cluster, topic_name, **{"min.insync.replicas": "2"})
    pairs = [(f"k{i}".encode(), f"value-{i}-".encode() * (1 + i % 7)) for i in range(300)]
    produce(cluster.bootstrap, topic_name, pairs)
    read = consume(cluster.bootstrap, topic_name, len(pairs))
    assert [(k, v) for _, k, v, _ in read] == pairs
    assert [o for o, *_ in read] == list(range(len(pairs)))
    leader = leader_of(cluster, topic_name)
    assert cluster.broker(leader).stop() == 0  # controlled shutdown: a follower takes over
    wait_for_new_leader(cluster, topic_name, leader)
    again = clients.consume_confluent(cluster.bootstrap, topic_name, len(pairs))
    # Seen once in a full suite run: the new leader served only offset 0 for 30 s. The state and
    # the brokers' logs go with the failure so that the next occurrence can be diagnosed.
    assert [(o, k, v) for o, k, v, _ in again] == [(o, k, v) for o, k, v, _ in read], (
        f"{len(again)} of {len(read)} read back; partition (leader, replicas, isr): "
        f"{cluster.partitions(topic_name)[0]}\n"
        + "\n".join(f"--- broker {i + 1}:\n{b.log()[-6000:]}" for i, b in enumerate(cluster.brokers))
    )


def delete_records(bootstrap: str, tp: TopicPartition, offset: int, leader_only: bool, timeout_ms: int) -> object:
    async def run() -> object:
        async with Admin(bootstrap) as admin:
            return (await admin.delete_records({tp: offset}, leader_only=leader_only, timeout_ms=timeout_ms))[tp]

    return asyncio.run(run())


@pytest.mark.parametrize("cluster", [{"replica.fetch.wait.max.ms": 5000}], indirect=True)
def test_delete_records_waits_for_replicas_unless_leader_only(cluster, topic_name):
    """KIP-107 and KIP-1343 with a follower stopped (SIGSTOP, still registered): LeaderOnly=false
    times out (7) waiting for it, LeaderOnly=true answers at once with the leader's log start
    offset; once the follower resumes, LeaderOnly=false completes, long before the followers'
    5 s fetch wait (a parked follower fetch answers as soon as the leader's log start moves)."""
    create(cluster, topic_name)
    clients.produce_confluent(cluster.bootstrap, topic_name, [(None, b"x%d" % i) for i in range(100)], acks="all")
    tp = TopicPartition(topic_name, 0)
    leader, replicas, _ = cluster.partitions(topic_name)[0]
    follower = cluster.broker(next(r for r in replicas if r != leader))
    bootstrap = cluster.broker(leader).bootstrap  # the admin client must not pick the stopped one

    started = time.monotonic()
    done = delete_records(bootstrap, tp, 10, leader_only=False, timeout_ms=30_000)
    assert (done.low_watermark, done.leader_log_start_offset) == (10, 10)
    assert time.monotonic() - started < 2.5

    follower.pause()
    try:
        timed_out = delete_records(bootstrap, tp, 50, leader_only=False, timeout_ms=1500)
        assert isinstance(timed_out, AdminError) and timed_out.error == ErrorCode.REQUEST_TIMED_OUT
        started = time.monotonic()
        leader_only = delete_records(bootstrap, tp, 60, leader_only=True, timeout_ms=30_000)
        assert time.monotonic() - started < 1.0
        assert leader_only.leader_log_start_offset == 60
        assert leader_only.low_watermark < 60  # the stopped follower is still at 10
    finally:
        follower.resume()
    resumed = delete_records(bootstrap, tp, 60, leader_only=False, timeout_ms=10_000)
    assert (resumed.low_watermark, resumed.leader_log_start_offset) == (60, 60)


def earliest_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "earliest"})
    try:
        low, _ = consumer.get_watermark_offsets(KafkaTopicPartition(topic, 0), timeout=10)
        return low
    finally:
        consumer.close()


def test_log_start_offset_reaches_followers_and_survives_their_restart(cluster, topic_name):
    """DeleteRecords moves the leader's log start offset; the followers take it from their
    fetches (KIP-107). Then the brokers stop one by one, the last to stop being a former
    follower, and that broker alone, restarted, still starts its log at the deleted offset."""
    create(cluster, topic_name)
    clients.produce_confluent(cluster.bootstrap, topic_name, [(None, b"r%d" % i) for i in range(200)], acks="all")
    tp = TopicPartition(topic_name, 0)
    bootstrap = cluster.bootstrap
    done = delete_records(bootstrap, tp, 120, leader_only=False, timeout_ms=10_000)
    assert done.low_watermark == 120  # every replica reported 120 in a fetch
    leader, replicas, _ = cluster.partitions(topic_name)[0]
    assert cluster.broker(leader).stop() == 0
    second = wait_for_new_leader(cluster, topic_name, leader)
    last = next(r for r in replicas if r not in (leader, second))
    assert cluster.broker(second).stop() == 0
    wait_until(lambda: leader_of(cluster, topic_name) == last, timeout=20, message=f"broker {last} leading")
    assert cluster.broker(last).stop() == 0
    cluster.broker(last).start()
    wait_until(lambda: leader_of(cluster, topic_name) == last, timeout=20, message=f"broker {last} leading again")
    assert earliest_offset(cluster.broker(last).bootstrap, topic_name) == 120
    read = clients.consume_confluent(cluster.broker(last).bootstrap, topic_name, 80, offset=0,
                                     **{"auto.offset.reset": "earliest"})
    assert [o for o, *_ in read] == list(range(120, 200))


@pytest.mark.parametrize("cluster", [{"offsets.topic.replication.factor": 3}], indirect=True)
def test_consumer_group_offsets_survive_the_loss_of_their_coordinator(cluster, topic_name):
    """A group whose coordinator is another broker than the one the client bootstraps from
    commits its offsets (replicated in ``__consumer_offsets``, RF=3); its coordinator is killed
    (kill -9); the group resumes on the new coordinator from the committed offset."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    create(cluster, topic_name)
    clients.produce_confluent(cluster.bootstrap, topic_name, [(None, b"m%d" % i) for i in range(100)], acks="all")
    group = f"{topic_name}-group"

    def consumer() -> Consumer:
        return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})

    first = consumer()
    first.subscribe([topic_name])
    seen: list[bytes] = []
    wait_until(lambda: seen.extend(m.value() for m in first.consume(100, 0.5) if m.error() is None) or len(seen) >= 60,
               timeout=30, message="the first 60 records")
    first.commit(offsets=[KafkaTopicPartition(topic_name, 0, 60)], asynchronous=False)
    first.close()
    admin = cluster.admin()
    coordinator = admin.describe_consumer_groups([group])[group].result(10).coordinator.id
    cluster.broker(coordinator).kill()

    second = consumer()
    try:
        second.subscribe([topic_name])
        rest: list[bytes] = []
        wait_until(lambda: rest.extend(m.value() for m in second.consume(100, 0.5) if m.error() is None)
                   or len(rest) >= 40, timeout=40, message="the records after the committed offset")
        assert rest[0] == b"m60" and len(rest) == 40
        committed = second.committed([KafkaTopicPartition(topic_name, 0)], timeout=10)[0].offset
        assert committed == 60
    finally:
        second.close()
    admin = cluster.admin()
    new_coordinator = admin.describe_consumer_groups([group])[group].result(10).coordinator.id
    assert new_coordinator != coordinator
