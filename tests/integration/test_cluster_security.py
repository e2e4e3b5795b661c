"""A secure 3-broker ZooKeeper cluster: brokers replicate over an INTERNAL SASL_SSL listener
(PLAIN as the inter-broker mechanism, the broker's user ``User:broker`` a super user, the ACL
authorizer on); clients use a separate CLIENT SASL_PLAINTEXT listener (PLAIN and SCRAM).

- a topic with RF=3: produce acks=all and consume through confluent-kafka, ISR full everywhere;
- kill -9 of a leader: another replica leads, and the old leader, restarted, rejoins the ISR over
  SASL_SSL;
- a SCRAM user created through one broker logs in on every broker within a second;
- an ACL created through one broker is enforced on every broker within a second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from bench.brokers import free_port
from pybroker.client.connection import BrokerConnection, SaslAuthenticationFailedError
from pybroker.client.security import ClientSecurity
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import MetadataRequest
from pybroker.security.certificates import CertificateAuthority
from tests.conftest import BrokerProcess, wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for

INTERNAL_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                 'username="broker" password="broker-secret" user_broker="broker-secret";')
CLIENT_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_admin="admin-secret";')
ADMIN = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "admin", "sasl.password": "admin-secret"}


@pytest.fixture(scope="module")
def cluster(zookeeper: object, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("secure-cluster")
    ca = CertificateAuthority.create(base / "certs")
    server = ca.issue_server("broker")

    def listeners(node: int, process: BrokerProcess) -> dict[str, object]:
        internal = free_port()
        return {"listeners": f"CLIENT://127.0.0.1:{process.port},INTERNAL://127.0.0.1:{internal}"}

    cluster = start_cluster(
        chroot_for(zookeeper, request.module.__name__), base, nodes=3, broker_overrides=listeners,
        client_config=ADMIN, **{
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": INTERNAL_JAAS,
            "listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.client.plain.sasl.jaas.config": CLIENT_JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.certificate_path),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
            "replica.lag.time.max.ms": 3000,
        })
    try:
        yield cluster
    finally:
        cluster.kill()
    for broker in cluster.brokers:
        problems = broker.unexpected_log_entries([])
        assert not problems, "\n\n".join(problems[:5])


def admin_of(broker: BrokerProcess) -> AdminClient:
    """An admin client that talks to ``broker`` only."""
    return AdminClient({"bootstrap.servers": broker.bootstrap, **ADMIN})


def isr_full(cluster: Cluster, topic: str, partitions: int) -> bool:
    states = cluster.partitions(topic)
    return len(states) == partitions and all(len(isr) == 3 and leader >= 1 for leader, _, isr in states.values())


def produce(cluster: Cluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, **ADMIN, "acks": "all", "linger.ms": 0})
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda error, _m: failures.append(error) if error else None)
    assert producer.flush(30) == 0
    assert failures == []


def consume(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, **ADMIN, "group.id": f"{topic}-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(message.value())
        return out
    finally:
        consumer.close()


def test_replication_and_failover_over_sasl_ssl(cluster: Cluster) -> None:
    topic = "replicated"
    admin = cluster.admin()  # held: a client's futures fail once it is destroyed
    admin.create_topics([NewTopic(topic, 2, 3)], request_timeout=15)[topic].result()
    wait_until(lambda: isr_full(cluster, topic, 2), 20, message="a full ISR on every partition")
    first = [b"a%d" % i for i in range(10)]
    produce(cluster, topic, first)
    assert consume(cluster, topic, 10) == first

    leader = cluster.partitions(topic)[0][0]
    cluster.broker(leader).kill()
    wait_until(lambda: cluster.partitions(topic)[0][0] not in (leader, -1), 20, message="a new leader")
    wait_until(lambda: leader not in cluster.partitions(topic)[0][2], 20, message="the ISR without the dead broker")
    second = [b"b%d" % i for i in range(5)]
    produce(cluster, topic, second)
    cluster.broker(leader).start()
    # The old leader catches up over SASL_SSL and is back in every ISR.
    wait_until(lambda: isr_full(cluster, topic, 2), 30, message="the restarted broker back in the ISR")
    assert consume(cluster, topic, 15) == first + second


async def _login(bootstrap: str, mechanism: str, user: str, password: str,
                 topic: str | None = None) -> int:
    """Logs in; with ``topic``, the error code of a Metadata request for it (else 0)."""
    host, port = bootstrap.split(":")
    connection = BrokerConnection(host, int(port), security=ClientSecurity(
        "SASL_PLAINTEXT", sasl_mechanism=mechanism, sasl_username=user, sasl_password=password))
    await connection.connect()
    try:
        if topic is None:
            return 0
        response = await connection.send(ApiKey.METADATA, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
        return response.topics[0].error_code
    finally:
        await connection.close()


def _logs_in(bootstrap: str, user: str, password: str) -> bool:
    try:
        asyncio.run(_login(bootstrap, "SCRAM-SHA-512", user, password))
        return True
    except SaslAuthenticationFailedError:
        return False


def test_a_scram_user_created_through_one_broker_logs_in_everywhere(cluster: Cluster) -> None:
    for broker in cluster.brokers:
        assert not _logs_in(broker.bootstrap, "erin", "erin-secret")
    admin = cluster.admin()  # AlterUserScramCredentials goes to the controller
    upsert = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"erin-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=10)
    altered = time.monotonic()
    for broker in cluster.brokers:
        wait_until(lambda broker=broker: _logs_in(broker.bootstrap, "erin", "erin-secret"),
                   max(0.05, 1.0 - (time.monotonic() - altered)), message=f"erin logging in on {broker.bootstrap}")


def test_an_acl_created_through_one_broker_is_enforced_everywhere(cluster: Cluster) -> None:
    topic = "acl-everywhere"
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=15)[topic].result()
    upsert = UserScramCredentialUpsertion("frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"frank-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=10)

    def metadata_error(broker: BrokerProcess) -> int:
        return asyncio.run(_login(broker.bootstrap, "SCRAM-SHA-256", "frank", "frank-secret", topic))

    for broker in cluster.brokers:
        wait_until(lambda broker=broker: metadata_error(broker) == ErrorCode.TOPIC_AUTHORIZATION_FAILED, 5)
    through = admin_of(cluster.broker(2))
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:frank", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    through.create_acls([binding], request_timeout=10)[binding].result()
    created = time.monotonic()
    for broker in cluster.brokers:
        wait_until(lambda broker=broker: metadata_error(broker) == ErrorCode.NONE,
                   max(0.05, 1.0 - (time.monotonic() - created)),
                   message=f"the ACL enforced on {broker.bootstrap}")
