"""Helpers for tests on a multi-broker cluster: broker processes of one cluster under a ZooKeeper
chroot of their own, and what the tests ask of it (bootstrap strings, a ZooKeeper client,
partition states as the brokers' Metadata answers show them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.conftest import BrokerProcess, wait_until

SESSION_TIMEOUT_MS = 4000


@dataclass
class Cluster:
    connect: str
    brokers: list[BrokerProcess]
    client_config: dict[str, str] = field(default_factory=dict)  # librdkafka security settings

    def broker(self, node_id: int) -> BrokerProcess:
        return self.brokers[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.alive)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, **self.client_config})

    def partitions(self, topic: str, client: AdminClient | None = None) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition → (leader, replicas, isr) as a broker's Metadata answers them."""
        md = (client or self.admin()).list_topics(topic, timeout=10).topics[topic]
        return {i: (p.leader, list(p.replicas), sorted(p.isrs)) for i, p in md.partitions.items()}

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()


def start_cluster(
    connect: str, root: Path, nodes: int = 3,
    broker_overrides: Callable[[int, BrokerProcess], dict[str, object]] | None = None,
    client_config: dict[str, str] | None = None, **overrides: object,
) -> Cluster:
    """``nodes`` brokers (node ids 1..nodes) on ZooKeeper ``connect``, started one after another;
    returns once every broker knows the whole cluster. ``broker_overrides(node id, process)``
    gives properties of one broker (its own listeners, say), over ``overrides``; ``client_config``
    the librdkafka security settings for each broker's ``bootstrap`` listener (SASL, TLS)."""
    settings: dict[str, object] = {
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "offsets.topic.replication.factor": 1,
        "group.initial.rebalance.delay.ms": 0,
        **overrides,
    }
    brokers = [BrokerProcess(root / f"broker-{node}", **{"node.id": node, **settings}) for node in range(1, nodes + 1)]
    if broker_overrides is not None:
        for node, broker in enumerate(brokers, start=1):
            broker.overrides.update({k: str(v) for k, v in broker_overrides(node, broker).items()})
    cluster = Cluster(connect, brokers, dict(client_config or {}))
    try:
        for broker in brokers:
            broker.start()
        # A broker listens before it registers: wait until every broker knows all of them (the
        # controller's UpdateMetadata reached it), as a user would before creating topics.
        for broker in brokers:
            client = AdminClient({"bootstrap.servers": broker.bootstrap, **cluster.client_config})
            wait_until(lambda client=client: len(client.list_topics(timeout=10).brokers) == nodes, timeout=30,
                       message=f"broker {broker.bootstrap} knowing all {nodes} brokers")
    except BaseException:
        cluster.kill()
        raise
    return cluster


def zk_client(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=5)
    client.start(timeout=10)
    return client
