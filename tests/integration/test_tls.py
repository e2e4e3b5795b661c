"""TLS listeners with real clients: one broker with a PLAINTEXT, an SSL and a mutual-TLS listener.

The CA and certificates come from `pybroker.security.certificates`; every client checks the
broker's host name (the certificate's SAN has IP:127.0.0.1). The MTLS listener is an SSL listener
with ``listener.name.mtls.ssl.client.auth=required``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.brokers import free_port
from pybroker.client.connection import BrokerConnection
from pybroker.client.security import ClientSecurity
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest, MetadataRequest, ProduceRequest
from pybroker.security.certificates import CertificateAuthority, IssuedCertificate
from tests.conftest import BrokerProcess, auto_create, wait_until
from tests.unit.batches import build_batch


class TlsBroker:
    def __init__(self, process: BrokerProcess, ca: CertificateAuthority, client: IssuedCertificate,
                 ssl_port: int, mtls_port: int) -> None:
        self.process, self.ca, self.client = process, ca, client
        self.plaintext = process.bootstrap
        self.ssl = f"127.0.0.1:{ssl_port}"
        self.mtls = f"127.0.0.1:{mtls_port}"

    def context(self, with_certificate: bool = False) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.certificate_path))
        if with_certificate:
            context.load_cert_chain(str(self.client.certificate), str(self.client.key))
        return context

    def librdkafka(self, with_certificate: bool = False) -> dict[str, str]:
        config = {"security.protocol": "ssl", "ssl.ca.location": str(self.ca.certificate_path)}
        if with_certificate:
            config |= {"ssl.certificate.location": str(self.client.certificate),
                       "ssl.key.location": str(self.client.key)}
        return config


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    base = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority.create(base / "certs")
    server = ca.issue_server("broker")
    client = ca.issue_client("CN=alice,OU=eng,O=pybroker")
    port, ssl_port, mtls_port = free_port(), free_port(), free_port()
    process = BrokerProcess(base / "data", port, **{
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.certificate_path),
        "listener.name.mtls.ssl.client.auth": "required",
        "num.partitions": 1,
    })
    process.start()
    yield TlsBroker(process, ca, client, ssl_port, mtls_port)
    if process.alive:
        assert process.stop() == 0, process.log()
    process.kill()


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


async def _connect(bootstrap: str, context: ssl.SSLContext | None) -> BrokerConnection:
    host, port = bootstrap.split(":")
    security = ClientSecurity("SSL", context) if context is not None else ClientSecurity()
    connection = BrokerConnection(host, int(port), security=security)
    await connection.connect()
    return connection


async def _metadata_ports(bootstrap: str, context: ssl.SSLContext | None) -> list[tuple[str, int]]:
    connection = await _connect(bootstrap, context)
    try:
        response = await connection.send(ApiKey.METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        return [(b.host, b.port) for b in response.brokers]
    finally:
        await connection.close()


def test_metadata_answers_the_listener_the_request_arrived_on(tls: TlsBroker) -> None:
    def port(bootstrap: str) -> int:
        return int(bootstrap.split(":")[1])

    assert run(_metadata_ports(tls.plaintext, None)) == [("127.0.0.1", port(tls.plaintext))]
    assert run(_metadata_ports(tls.ssl, tls.context())) == [("127.0.0.1", port(tls.ssl))]
    assert run(_metadata_ports(tls.mtls, tls.context(with_certificate=True))) == [("127.0.0.1", port(tls.mtls))]


def _pairs(n: int, tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"{tag}-{i}".encode()) for i in range(n)]


def test_confluent_kafka_over_ssl(tls: TlsBroker, topic_name: str) -> None:
    from tests.integration.clients import consume_confluent, produce_confluent

    produce_confluent(tls.ssl, topic_name, _pairs(20, "confluent"), **tls.librdkafka())
    records = consume_confluent(tls.ssl, topic_name, 20, timeout=20, **tls.librdkafka())
    assert [(k, v) for _, k, v, _ in records] == _pairs(20, "confluent")


def test_kcat_over_ssl(tls: TlsBroker, topic_name: str) -> None:
    options = [arg for key, value in tls.librdkafka().items() for arg in ("-X", f"{key}={value}")]
    lines = "\n".join(f"kcat-{i}" for i in range(10)) + "\n"
    subprocess.run(["kcat", "-b", tls.ssl, *options, "-P", "-t", topic_name, "-p", "0"],
                   input=lines.encode(), check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", tls.ssl, *options, "-C", "-t", topic_name, "-p", "0", "-o", "beginning",
                          "-e", "-q"], capture_output=True, check=True, timeout=30)
    assert out.stdout.decode().splitlines() == [f"kcat-{i}" for i in range(10)]


def test_aiokafka_over_ssl(tls: TlsBroker, topic_name: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    async def go() -> list[tuple[bytes, bytes]]:
        context = create_ssl_context(cafile=str(tls.ca.certificate_path))
        producer = AIOKafkaProducer(bootstrap_servers=tls.ssl, security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for key, value in _pairs(10, "aiokafka"):
                await producer.send_and_wait(topic_name, value, key=key, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=tls.ssl, security_protocol="SSL", ssl_context=context,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            out: list[tuple[bytes, bytes]] = []
            async with asyncio.timeout(20):
                while len(out) < 10:
                    batch = await consumer.getmany(tp, timeout_ms=500)
                    out += [(m.key, m.value) for m in batch.get(tp, [])]
            return out
        finally:
            await consumer.stop()

    assert run(go()) == _pairs(10, "aiokafka")


def test_kafka_python_over_ssl(tls: TlsBroker, topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    options = {"security_protocol": "SSL", "ssl_cafile": str(tls.ca.certificate_path), "ssl_check_hostname": True}
    producer = KafkaProducer(bootstrap_servers=tls.ssl, **options)
    try:
        for future in [producer.send(topic_name, value=v, key=k, partition=0) for k, v in _pairs(10, "kafka-python")]:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=tls.ssl, enable_auto_commit=False, **options)
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[tuple[bytes, bytes]] = []

        def got_all() -> bool:
            for messages in consumer.poll(timeout_ms=500).values():
                out.extend((m.key, m.value) for m in messages)
            return len(out) >= 10

        wait_until(got_all, timeout=20)
    finally:
        consumer.close()
    assert out == _pairs(10, "kafka-python")


def test_required_client_certificate(tls: TlsBroker, topic_name: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    without = AdminClient({"bootstrap.servers": tls.mtls, **tls.librdkafka()})
    with pytest.raises(KafkaException):
        without.list_topics(timeout=3)

    async def handshake_without_certificate() -> None:
        await _connect(tls.mtls, tls.context())

    with pytest.raises((ssl.SSLError, ConnectionError, OSError, Exception)):
        run(handshake_without_certificate())

    from tests.integration.clients import consume_confluent, produce_confluent

    produce_confluent(tls.mtls, topic_name, _pairs(5, "mtls"), **tls.librdkafka(with_certificate=True))
    records = consume_confluent(tls.mtls, topic_name, 5, timeout=20, **tls.librdkafka(with_certificate=True))
    assert [(k, v) for _, k, v, _ in records] == _pairs(5, "mtls")


def _fetch(topic: str, offset: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=32 << 20)])],
    )


def test_large_fetch_over_tls_is_byte_exact(tls: TlsBroker, topic_name: str) -> None:
    """A fetch of several MB over TLS (the region is read and written through the transport,
    many TLS records and socket writes) returns exactly what the sendfile path returns."""
    batches = [build_batch([(None, os.urandom(200_000)) for _ in range(5)]) for _ in range(8)]  # 8 MB

    async def go() -> tuple[bytes, bytes]:
        plain = await _connect(tls.plaintext, None)
        secure = await _connect(tls.ssl, tls.context())
        try:
            await auto_create(plain, topic_name)
            for batch in batches:
                response = await secure.send(ApiKey.PRODUCE, ProduceRequest(
                    acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
                        name=topic_name, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
                assert response.responses[0].partition_responses[0].error_code == 0
            over_tls = (await secure.send(ApiKey.FETCH, _fetch(topic_name, 0))).responses[0].partitions[0]
            over_plain = (await plain.send(ApiKey.FETCH, _fetch(topic_name, 0))).responses[0].partitions[0]
            assert over_tls.error_code == over_plain.error_code == 0
            return bytes(over_tls.records), bytes(over_plain.records)
        finally:
            await plain.close()
            await secure.close()

    over_tls, over_plain = run(go())
    assert len(over_tls) == sum(len(b) for b in batches)
    assert over_tls == over_plain


def test_garbage_on_the_ssl_port_never_hurts_the_broker(tls: TlsBroker) -> None:
    host, port = tls.ssl.split(":")
    # A plaintext Kafka request, random bytes, a half-open connection, and a TLS handshake that
    # is dropped in the middle.
    payloads = [
        b"\x00\x00\x00\x17\x00\x12\x00\x03\x00\x00\x00\x01\x00\x09pybroker\x00\x00\x00",
        os.urandom(4096),
        b"",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ]
    for payload in payloads:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            if payload:
                s.sendall(payload)
            s.settimeout(2)
            try:
                s.recv(1024)
            except (TimeoutError, ConnectionError):
                pass
    with ssl.create_default_context(cafile=str(tls.ca.certificate_path)).wrap_socket(
            socket.create_connection((host, int(port)), timeout=5), server_hostname=host) as s:
        s.sendall(os.urandom(64))  # an encrypted garbage frame: the broker closes the connection
    assert tls.process.alive
    assert run(_metadata_ports(tls.ssl, tls.context())) == [("127.0.0.1", int(port))]


def test_a_bad_tls_configuration_stops_the_start_with_one_line(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data", **{
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{free_port()}",
        "ssl.keystore.type": "JKS", "ssl.keystore.location": str(tmp_path / "x.jks"), "ssl.keystore.password": "p",
    })
    with pytest.raises(RuntimeError, match="exited with 1"):
        process.start(timeout=20)
    lines = [line for line in process.log().splitlines() if line.startswith("pybroker:")]
    assert len(lines) == 1 and "ssl.keystore.type JKS is not supported" in lines[0], process.log()


def _established_connections_to(port: int) -> int:
    """Established TCP connections to local ``port`` (from /proc/net/tcp: the client side's remote port)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "01" and int(fields[2].split(":")[1], 16) == port:
            count += 1
    return count


def test_cluster_replicates_over_an_ssl_inter_broker_listener(zookeeper, tmp_path: Path, topic_name: str) -> None:  # noqa: ANN001
    """Three brokers whose inter-broker listener INTERNAL is SSL with required client certificates
    (each broker presents its own): the controller's requests, the replica fetchers and
    AlterPartition all go over it, so an RF=3 topic gets a full ISR and acks=all produces succeed."""
    from confluent_kafka.admin import NewTopic

    from tests.integration.clients import consume_confluent, produce_confluent
    from tests.integration.cluster import start_cluster, zk_client
    from tests.zookeeper import chroot_for

    ca = CertificateAuthority.create(tmp_path / "certs")
    internal_ports: dict[int, int] = {}

    def listeners(node: int, process: BrokerProcess) -> dict[str, object]:
        issued = ca.issue_server(f"broker{node}")
        internal_ports[node] = free_port()
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{process.port},INTERNAL://127.0.0.1:{internal_ports[node]}",
            "listener.name.internal.ssl.keystore.location": str(issued.keystore),
        }

    cluster = start_cluster(
        chroot_for(zookeeper, "tls-cluster"), tmp_path, broker_overrides=listeners,
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
           "inter.broker.listener.name": "INTERNAL",
           "listener.name.internal.ssl.keystore.type": "PEM",
           "listener.name.internal.ssl.truststore.type": "PEM",
           "listener.name.internal.ssl.truststore.location": str(ca.certificate_path),
           "listener.name.internal.ssl.client.auth": "required"},
    )
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "3"})])[topic_name].result(30)
        wait_until(lambda: cluster.partitions(topic_name)[0][2] == [1, 2, 3], timeout=20, message="a full ISR")
        pairs = [(f"k{i}".encode(), f"v{i}".encode() * 50) for i in range(200)]
        produce_confluent(cluster.bootstrap, topic_name, pairs, acks="all")
        read = consume_confluent(cluster.bootstrap, topic_name, len(pairs), timeout=20)
        assert [(k, v) for _, k, v, _ in read] == pairs
        assert cluster.partitions(topic_name)[0][2] == [1, 2, 3]
        # Clients on the PLAINTEXT listener see only PLAINTEXT ports.
        ports = sorted(b.port for b in admin.list_topics(timeout=10).brokers.values())
        assert ports == sorted(b.port for b in cluster.brokers)
        # The registrations carry both listeners with their protocols.
        zk = zk_client(cluster.connect)
        try:
            registration = json.loads(zk.get("/brokers/ids/2")[0])
        finally:
            zk.stop()
        assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"}
        assert registration["endpoints"][1] == f"INTERNAL://127.0.0.1:{internal_ports[2]}"
        # The followers' fetchers are connected to the leader's INTERNAL port, not to its PLAINTEXT one.
        leader = cluster.partitions(topic_name)[0][0]
        assert _established_connections_to(internal_ports[leader]) >= 2
    finally:
        cluster.kill()
