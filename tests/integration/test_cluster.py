"""A multi-broker cluster on ZooKeeper: three broker processes and a real ZooKeeper on loopback.

What a user sees: every broker registers under Kafka's znodes, one is elected controller, every
broker answers Metadata with all three brokers, topics created through any broker get their
replicas spread over the brokers and leaders elected, real clients produce to and consume from
the leaders wherever they are, and when the controller dies another broker takes over.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess, wait_until
from tests.integration.cluster import SESSION_TIMEOUT_MS, start_cluster, zk_client
from tests.zookeeper import chroot_for


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    """Three brokers (node ids 1-3) of one cluster, under a chroot of their own."""
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path)
    yield cluster.connect, cluster.brokers
    cluster.kill()


def bootstrap(brokers: list[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers if b.alive)


def test_brokers_register_and_one_controller_is_elected(cluster):
    connect, brokers = cluster
    zk = zk_client(connect)
    try:
        ids = wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"] and True,
                         message="three registered brokers")
        assert ids
        data, stat = zk.get("/brokers/ids/2")
        registration = json.loads(data)
        assert registration["version"] == 5
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{brokers[1].port}"]
        assert stat.ephemeralOwner != 0
        controller = json.loads(zk.get("/controller")[0])
        assert controller["brokerid"] in (1, 2, 3)
        assert int(zk.get("/controller_epoch")[0]) >= 1
        assert json.loads(zk.get("/cluster/id")[0])["version"] == "1"
    finally:
        zk.stop()


def test_every_broker_answers_metadata_with_the_whole_cluster(cluster, topic_name):
    _, brokers = cluster
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    admin.create_topics([NewTopic(topic_name, 6, 1)])[topic_name].result(timeout=30)
    for broker in brokers:
        one = AdminClient({"bootstrap.servers": broker.bootstrap})

        def complete(one: AdminClient = one) -> object:
            md = one.list_topics(topic_name, timeout=10)
            topic = md.topics[topic_name]
            return (sorted(md.brokers) == [1, 2, 3] and len(topic.partitions) == 6
                    and all(p.leader in (1, 2, 3) for p in topic.partitions.values()) and md)

        md = wait_until(complete, timeout=15, message=f"broker {broker.port}'s metadata")
        leaders = {p.leader for p in md.topics[topic_name].partitions.values()}
        assert leaders == {1, 2, 3}  # six partitions spread over three brokers


def test_clients_produce_and_consume_across_brokers(cluster, topic_name):
    _, brokers = cluster
    servers = bootstrap(brokers)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(30)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    sent = {(p, f"{p}-{i}".encode()) for p in range(3) for i in range(20)}
    for partition, value in sorted(sent):
        producer.produce(topic_name, value, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": servers, "group.id": topic_name, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    received = set()
    deadline = time.monotonic() + 30
    try:
        while received != sent and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received.add((message.partition(), message.value()))
    finally:
        consumer.close()
    assert received == sent


def test_another_broker_becomes_controller_when_the_controller_dies(cluster):
    connect, brokers = cluster
    zk = zk_client(connect)
    try:
        first = wait_until(lambda: zk.exists("/controller") and json.loads(zk.get("/controller")[0])["brokerid"],
                           message="a controller")
        epoch = int(zk.get("/controller_epoch")[0])
        brokers[first - 1].kill()

        def moved() -> object:
            if not zk.exists("/controller"):
                return None
            now = json.loads(zk.get("/controller")[0])["brokerid"]
            return now != first and now

        second = wait_until(moved, timeout=SESSION_TIMEOUT_MS / 1000 + 10, message="a new controller")
        assert second in (1, 2, 3)
        assert int(zk.get("/controller_epoch")[0]) == epoch + 1
    finally:
        zk.stop()


def test_a_sigtermed_leader_moves_its_leadership_away_before_it_stops(cluster, topic_name):
    """Controlled shutdown (key 7): the stopping broker asks the controller to elect other
    leaders for the replicated partitions it leads and to take it out of the ISRs, then stops."""
    _, brokers = cluster
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    admin.create_topics([NewTopic(topic_name, 3, 3)])[topic_name].result(30)

    def leaders(client: AdminClient) -> dict[int, tuple[int, list[int]]] | None:
        topic = client.list_topics(topic_name, timeout=10).topics[topic_name]
        if len(topic.partitions) != 3 or any(p.leader < 0 for p in topic.partitions.values()):
            return None
        return {i: (p.leader, sorted(p.isrs)) for i, p in topic.partitions.items()}

    before = wait_until(lambda: leaders(admin), message="leaders of the new topic")
    stopping = before[0][0]
    mark = brokers[stopping - 1].log_mark()
    assert brokers[stopping - 1].stop() == 0
    assert "Controlled shutdown succeeded" in brokers[stopping - 1].log()[mark:]
    survivors = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    after = wait_until(lambda: (found := leaders(survivors)) and all(
        leader != stopping and stopping not in isr for leader, isr in found.values()) and found,
        message="leaderships moved away from the stopped broker")
    assert set(after) == {0, 1, 2}
