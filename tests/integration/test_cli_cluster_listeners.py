"""`pybroker cluster` with per-broker listeners, as client test suites run it.

- A SASL_PLAINTEXT listener beside PLAINTEXT on every broker, from one ``--override`` template:
  cluster.json and the printed table name both, Metadata on each listener names that listener's
  addresses, confluent-kafka produces through one and consumes through the other (PLAIN user
  alice), and a wrong password is refused.
- ``advertised.listeners`` pointing at a TCP proxy per broker (asyncio forwarders run by this
  test), set per broker in a ``--config`` file, replication on an INTERNAL listener of their own:
  a client bootstrapped through the proxies gets the proxies in Metadata and produces and
  consumes through them; a proxy cut makes its broker unreachable to the client while the
  cluster stays whole (every broker registered, every ISR full, acks=all answered); the proxy
  back, the client reaches the broker again.

Every process the command starts is stopped by PID (`ClusterCommand.kill` as a last resort).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.client.admin import Admin
from tests.conftest import free_port, wait_until
from tests.integration import clients
from tests.integration.test_cli_cluster import (
    ClusterCommand,
    assert_clean_logs,
    free_ports,
    processes_using,
)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')
ALICE = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "alice", "sasl.password": "alice-secret"}


def brokers_in_metadata(bootstrap: str, **config: Any) -> dict[int, str]:
    """{node id: host:port} of the brokers in Metadata through ``bootstrap`` (confluent-kafka)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap, **config}).list_topics(timeout=10)
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def create_topic(bootstrap: str, topic: str, **config: Any) -> None:
    """Three partitions, replicas on all three brokers, partition N-1 led by broker N."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **config})
    new = NewTopic(topic, num_partitions=3, replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    admin.create_topics([new])[topic].result(30)


def values(bootstrap: str, topic: str, count: int, partition: int, **config: Any) -> list[bytes]:
    records = clients.consume_confluent(bootstrap, topic, count, partition=partition, **config)
    return [r[2] for r in records]


@pytest.mark.timeout(180)
def test_a_sasl_listener_beside_plaintext_on_every_broker(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    first = free_ports(6)  # PLAINTEXT on first..first+2, SASL_PLAINTEXT on first+3..first+5
    plain = [f"127.0.0.1:{first + i}" for i in range(3)]
    sasl = [f"127.0.0.1:{first + 3 + i}" for i in range(3)]
    command = ClusterCommand(
        directory, "--brokers", "3", "--port", str(first), "--zookeeper-port", str(free_port()),
        "--override", "listeners=PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{port+3}",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
    )
    try:
        manifest = command.wait_running()

        # What it prints and writes: the PLAINTEXT addresses are the bootstrap servers.
        out = command.text()
        assert f"Bootstrap servers: {','.join(plain)}\n" in out
        assert f"Bootstrap servers (SASL_PLAINTEXT): {','.join(sasl)}\n" in out
        assert manifest["bootstrap_servers"] == ",".join(plain)
        assert manifest["bootstrap_listener"] == "PLAINTEXT"
        for i, broker in enumerate(manifest["brokers"]):
            assert broker["address"] == plain[i]
            assert broker["listeners"] == {"PLAINTEXT": plain[i], "SASL_PLAINTEXT": sasl[i]}
            properties = Path(broker["config"]).read_text()
            assert f"listeners=PLAINTEXT://{plain[i]},SASL_PLAINTEXT://{sasl[i]}\n" in properties

        # Metadata on each listener names that listener's addresses.
        assert brokers_in_metadata(sasl[1], **ALICE) == {1: sasl[0], 2: sasl[1], 3: sasl[2]}
        assert brokers_in_metadata(plain[1]) == {1: plain[0], 2: plain[1], 3: plain[2]}

        # Produce through one listener, consume through the other, on every broker.
        create_topic(",".join(sasl), "both", **ALICE)
        for partition in range(3):
            clients.produce_confluent(",".join(sasl), "both", [(b"k", b"sasl-%d" % partition)],
                                      partition=partition, **ALICE)
            clients.produce_confluent(",".join(plain), "both", [(b"k", b"plain-%d" % partition)],
                                      partition=partition)
        for partition in range(3):
            expected = [b"sasl-%d" % partition, b"plain-%d" % partition]
            assert values(",".join(plain), "both", 2, partition) == expected
            assert values(",".join(sasl), "both", 2, partition, **ALICE) == expected

        # The SASL listener does check passwords.
        with pytest.raises(KafkaException):
            brokers_in_metadata(sasl[0], **{**ALICE, "sasl.password": "wrong"})

        assert command.stop() == 0, command.text()
        assert not processes_using(directory)
        assert_clean_logs(directory)
    finally:
        command.kill()


# --- a TCP proxy per broker ----------------------------------------------------------------------

class Proxy:
    """A TCP forwarder from 127.0.0.1:``port`` (free when made) to 127.0.0.1:``target``, run on
    a `Proxies` loop. `cut` closes its listening socket and aborts every connection through it;
    `restore` listens on the same port again."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.connections = 0  # accepted and forwarded
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.BaseTransport] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def listen(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for transport in list(self._transports):
            transport.abort()
        self._transports.clear()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1",
                                                                             self.target)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._transports.update((writer.transport, upstream_writer.transport))
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        self._transports.difference_update((writer.transport, upstream_writer.transport))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.transport.abort()  # one side gone: so is the other


class Proxies:
    """Proxies on an event loop of their own, in a thread of this process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxies", daemon=True)
        self.thread.start()
        self.proxies: list[Proxy] = []

    def run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def start(self, target: int) -> Proxy:
        proxy = Proxy(target)
        self.run(proxy.listen())
        self.proxies.append(proxy)
        return proxy

    def cut(self, proxy: Proxy) -> None:
        self.run(proxy.cut())

    def restore(self, proxy: Proxy) -> None:
        self.run(proxy.listen())

    def close(self) -> None:
        for proxy in self.proxies:
            self.run(proxy.cut())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def proxies() -> Iterator[Proxies]:
    running = Proxies()
    yield running
    running.close()


def deliver(bootstrap: str, topic: str, partition: int, value: bytes) -> object:
    """Produce one record (acks=all, 5 s to deliver it) and wait for the outcome: None when
    delivered, else the error."""
    outcome: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000, "acks": "all"})
    producer.produce(topic, value=value, partition=partition,
                     on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    assert len(outcome) == 1
    return outcome[0]


async def _isrs(bootstrap: str, topic: str) -> tuple[list[int], dict[int, list[int]]]:
    async with Admin(bootstrap, retry_timeout=5.0, request_timeout=5.0) as admin:
        brokers = [node.node_id for node in await admin.brokers()]
        (description,) = await admin.describe_topics([topic])
        return brokers, {p.partition: sorted(p.isr) for p in description.partitions}


@pytest.mark.timeout(180)
def test_advertised_listeners_through_a_proxy_per_broker(tmp_path: Path, proxies: Proxies) -> None:
    directory = tmp_path / "cluster"
    first = free_ports(6)  # PLAINTEXT (clients, through the proxies) and INTERNAL (replication)
    proxy = [proxies.start(first + i) for i in range(3)]
    via_proxies = ",".join(p.address for p in proxy)
    config = tmp_path / "cluster.properties"
    config.write_text(
        "# Clients reach broker N through proxy N; brokers replicate on INTERNAL, not proxied.\n"
        "listeners=PLAINTEXT://{host}:{port},INTERNAL://{host}:{port+3}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
        "inter.broker.listener.name=INTERNAL\n"
        + "".join(f"broker.{i + 1}.advertised.listeners=PLAINTEXT://{p.address},"
                  "INTERNAL://{host}:{port+3}\n" for i, p in enumerate(proxy))
    )
    command = ClusterCommand(directory, "--brokers", "3", "--port", str(first),
                             "--zookeeper-port", str(free_port()), "--config", str(config))
    try:
        manifest = command.wait_running()
        direct = manifest["bootstrap_servers"]
        assert direct == ",".join(f"127.0.0.1:{first + i}" for i in range(3))
        advertised = [b["advertised_listeners"]["PLAINTEXT"] for b in manifest["brokers"]]
        assert advertised == [p.address for p in proxy]
        assert (f"advertised PLAINTEXT://{proxy[1].address},INTERNAL://127.0.0.1:{first + 4}\n"
                in command.text())

        # Bootstrapped through the proxies (or not), a client is told the proxies' addresses.
        proxied = {1: proxy[0].address, 2: proxy[1].address, 3: proxy[2].address}
        assert brokers_in_metadata(via_proxies) == proxied
        assert brokers_in_metadata(direct) == proxied

        # Produce and consume through the proxies, on each broker.
        create_topic(via_proxies, "proxied")
        for partition in range(3):
            clients.produce_confluent(via_proxies, "proxied", [(b"k", b"v%d" % partition)],
                                      partition=partition)
        for partition in range(3):
            assert values(via_proxies, "proxied", 1, partition) == [b"v%d" % partition]
        assert all(p.connections > 0 for p in proxy), [p.connections for p in proxy]

        # Cut proxy 2: broker 2 (the leader of partition 1) is unreachable to the client...
        proxies.cut(proxy[1])
        assert deliver(via_proxies, "proxied", 1, b"lost") is not None
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": proxy[1].address}).list_topics(timeout=3)
        # ...while the cluster stays whole: acks=all answered by brokers 1 and 3 means broker 2
        # (in every ISR) still replicates; all three registered, every ISR full, all running.
        assert deliver(via_proxies, "proxied", 0, b"after-cut-0") is None
        assert deliver(via_proxies, "proxied", 2, b"after-cut-2") is None
        registered, isrs = asyncio.run(_isrs(direct, "proxied"))
        assert registered == [1, 2, 3]
        assert isrs == {0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2, 3]}
        assert brokers_in_metadata(proxy[0].address) == proxied
        assert command.manifest()["state"] == "running"
        assert all(b["pid"] is not None for b in command.manifest()["brokers"])
        assert "exited" not in command.text()

        # Proxy 2 back: the client reaches broker 2 again.
        proxies.restore(proxy[1])
        wait_until(lambda: deliver(via_proxies, "proxied", 1, b"back") is None, timeout=30,
                   interval=0.5, message="a record through the restored proxy 2")
        assert values(via_proxies, "proxied", 2, 1) == [b"v1", b"back"]

        assert command.stop() == 0, command.text()
        assert not processes_using(directory)
        assert_clean_logs(directory)
    finally:
        command.kill()
