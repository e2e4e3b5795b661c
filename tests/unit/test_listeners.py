"""Listener configuration (Kafka's validation and messages), endpoint selection by listener, and the
inter-broker listener's client security."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from pybroker.common.cluster import BrokerEndpoint, Endpoint, LiveBroker, PartitionState
from pybroker.common.config import ConfigError
from pybroker.common.errors import ErrorCode
from pybroker.controller.requests import UpdateMetadata
from pybroker.controller.wire import to_wire
from pybroker.protocol.messages import DescribeClusterRequest, MetadataRequest
from pybroker.security.authorizer import AllowAllAuthorizer
from pybroker.security.certificates import CertificateAuthority
from pybroker.server.apis import describe_cluster, metadata
from pybroker.server.config import BrokerConfig
from pybroker.server.inter_broker_security import inter_broker_client
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition
from tests.unit.handler_context import allowed_context

# --- configuration ------------------------------------------------------------------------------


def test_endpoints_carry_their_security_protocol() -> None:
    config = BrokerConfig({
        "listeners": "plaintext://127.0.0.1:9092,INTERNAL://:9093,EXTERNAL://[::1]:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,external:sasl_ssl",
        "advertised.listeners": "PLAINTEXT://localhost:9092,INTERNAL://broker1:9093",
    })
    assert config.listeners == [
        Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        Endpoint("INTERNAL", "", 9093, "SSL"),
        Endpoint("EXTERNAL", "::1", 9094, "SASL_SSL"),
    ]
    assert [e.listener_name for e in config.advertised_listeners] == ["PLAINTEXT", "INTERNAL"]
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_default_listener_map_names_listeners_after_protocols() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2,SASL_SSL://127.0.0.1:3",
                           "security.inter.broker.protocol": "SSL"})
    assert [e.security_protocol for e in config.listeners] == ["PLAINTEXT", "SSL", "SASL_SSL"]
    assert config.inter_broker_listener == Endpoint("SSL", "127.0.0.1", 2, "SSL")


def test_inter_broker_listener_name() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:1,REPLICATION://127.0.0.1:2",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:SSL",
                           "inter.broker.listener.name": "replication"})
    assert config.inter_broker_listener_name == "REPLICATION"
    assert config.inter_broker_security_protocol == "SSL"


@pytest.mark.parametrize("props, message", [
    ({"listeners": "CLIENT://127.0.0.1:1"},
     "Error creating broker listeners from 'CLIENT://127.0.0.1:1': No security protocol defined for listener CLIENT"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,plaintext://127.0.0.1:2"},
     "Each listener must have a different name, listeners: PLAINTEXT://127.0.0.1:1,plaintext://127.0.0.1:2"),
    ({"listeners": "PLAINTEXT://:1,SSL://:1"}, "Each listener must have a different port, listeners: PLAINTEXT://:1,SSL://:1"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.2:1"},
     "If you have two listeners on the same port then one needs to be IPv4 and the other IPv6"),
    ({"listeners": "PLAINTEXT://nonsense"}, "Unable to parse PLAINTEXT://nonsense to a broker endpoint"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1", "advertised.listeners": "PLAINTEXT://127.0.0.1:1,SSL://x:2"},
     "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. "
     "Found PLAINTEXT,SSL. The valid options based on the current configuration are PLAINTEXT"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
     "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
    ({"listeners": "SSL://127.0.0.1:1"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options "
     "based on currently configured listeners are SSL"),
    ({"inter.broker.listener.name": "NOPE"},
     "Listener with name NOPE defined in inter.broker.listener.name not found in listener.security.protocol.map."),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"},
     "No enum constant for security protocol TLS"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for "
     "inter-broker communication"),
])
def test_listener_validation(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert message in str(e.value)


def test_listener_validation_accepts_kafka_exceptions() -> None:
    BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://[::1]:1"})  # one IPv4, one IPv6 on a port
    BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"})  # port 0 may repeat
    # a SASL listener's mechanisms may be set for that listener only
    BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "security.inter.broker.protocol": "SASL_PLAINTEXT",
                  "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                  "sasl.mechanism.inter.broker.protocol": "PLAIN"})


# --- the inter-broker client ---------------------------------------------------------------------


def test_inter_broker_client_plaintext() -> None:
    client = inter_broker_client(BrokerConfig({}))
    assert client.listener == "PLAINTEXT" and client.security.security_protocol == "PLAINTEXT"
    broker = LiveBroker(2, (BrokerEndpoint("OTHER", "h", 1), BrokerEndpoint("PLAINTEXT", "h", 2)))
    assert client.endpoint(broker) == BrokerEndpoint("PLAINTEXT", "h", 2)
    assert client.connection("h", 2, "x").security is client.security


def test_inter_broker_client_ssl(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    server = ca.issue_server("b1")
    client = inter_broker_client(BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:1,INTERNAL://127.0.0.1:2",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.ssl.keystore.type": "PEM",
        "listener.name.internal.ssl.keystore.location": str(server.keystore),
        "listener.name.internal.ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(ca.certificate_path),
    }))
    assert client.listener == "INTERNAL"
    assert client.security.uses_tls and not client.security.uses_sasl
    assert client.security.ssl_context is not None and client.security.ssl_context.check_hostname


def test_inter_broker_client_sasl_takes_the_listener_jaas_entry() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret";')
    client = inter_broker_client(BrokerConfig({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:1", "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }))
    security = client.security
    assert (security.security_protocol, security.sasl_mechanism, security.sasl_username, security.sasl_password) == (
        "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret")


def test_inter_broker_sasl_without_credentials_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="No JAAS configuration for the inter-broker listener SASL_PLAINTEXT"):
        inter_broker_client(BrokerConfig({
            "listeners": "SASL_PLAINTEXT://127.0.0.1:1", "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }))


def test_leader_and_isr_live_leaders_on_the_inter_broker_listener() -> None:
    from pybroker.controller.requests import LeaderAndIsr

    leaders = [LiveBroker(1, (BrokerEndpoint("CLIENT", "c", 1, "SSL"), BrokerEndpoint("INTERNAL", "i", 2, "SSL")))]
    request = LeaderAndIsr(0, 1, 5, [], {}, leaders)
    _, _, message = to_wire(request, "INTERNAL")
    assert [(b.host_name, b.port) for b in message.live_leaders] == [("i", 2)]


# --- endpoint selection by the request's listener --------------------------------------------------


def _context(listener: str, version: int) -> RequestContext:
    cache = MetadataCache(1)
    both = LiveBroker(1, (BrokerEndpoint("PLAINTEXT", "h1", 9092), BrokerEndpoint("SSL", "h1", 9093, "SSL")))
    plaintext_only = LiveBroker(2, (BrokerEndpoint("PLAINTEXT", "h2", 9092),))
    states = [
        PartitionState(TopicPartition("t", 0), 1, 1, 0, [1, 2], 0, [1, 2]),
        PartitionState(TopicPartition("t", 1), 1, 2, 0, [2, 1], 0, [2, 1]),
        PartitionState(TopicPartition("t", 2), 1, 3, 0, [3], 0, [3]),
    ]
    cache.update_metadata(UpdateMetadata(1, 1, 1, states, [both, plaintext_only], {"t": uuid.uuid4()}))
    broker = SimpleNamespace(metadata_cache=cache, cluster_id="c", config=BrokerConfig({}),
                             authorizer=AllowAllAuthorizer())
    ctx = allowed_context(broker, version)
    ctx.connection.listener_name = listener
    return ctx


def _metadata(listener: str, version: int):  # noqa: ANN202
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    return asyncio.run(metadata.handle(_context(listener, version), request))


def test_metadata_lists_brokers_on_the_request_listener() -> None:
    plain = _metadata("PLAINTEXT", 12)
    assert [(b.node_id, b.host, b.port) for b in plain.brokers] == [(1, "h1", 9092), (2, "h2", 9092)]
    assert [(p.error_code, p.leader_id) for p in plain.topics[0].partitions] == [
        (ErrorCode.NONE, 1), (ErrorCode.NONE, 2), (ErrorCode.LEADER_NOT_AVAILABLE, -1)]
    secure = _metadata("SSL", 12)
    assert [(b.node_id, b.host, b.port) for b in secure.brokers] == [(1, "h1", 9093)]
    assert [(p.error_code, p.leader_id) for p in secure.topics[0].partitions] == [
        (ErrorCode.NONE, 1), (ErrorCode.LISTENER_NOT_FOUND, -1), (ErrorCode.LEADER_NOT_AVAILABLE, -1)]


def test_metadata_before_v6_answers_leader_not_available_for_a_missing_listener() -> None:
    old = _metadata("SSL", 5)
    assert [(p.error_code, p.leader_id) for p in old.topics[0].partitions][1] == (ErrorCode.LEADER_NOT_AVAILABLE, -1)


def test_describe_cluster_lists_brokers_on_the_request_listener() -> None:
    response = describe_cluster.handle(_context("SSL", 0), DescribeClusterRequest(include_cluster_authorized_operations=False))
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, 9093)]


def test_find_coordinator_answers_on_the_request_listener() -> None:
    from pybroker.protocol.messages import FindCoordinatorRequest
    from pybroker.server.apis import find_coordinator
    from pybroker.server.group.metadata_manager import OFFSETS_TOPIC

    def context(listener: str, leader: int) -> RequestContext:
        ctx = _context(listener, 3)
        state = PartitionState(TopicPartition(OFFSETS_TOPIC, 0), 1, leader, 0, [leader], 0, [leader])
        cache = ctx.services.metadata_cache
        cache.update_metadata(UpdateMetadata(1, 1, 1, [state], list(cache.live_brokers.values()), {}))

        ctx.services.group_coordinator = SimpleNamespace(coordinator_partition=lambda group: 0)
        return ctx

    request = FindCoordinatorRequest(key="g", key_type=0)
    on_ssl = asyncio.run(find_coordinator.handle(context("SSL", 1), request))
    assert (on_ssl.error_code, on_ssl.node_id, on_ssl.port) == (ErrorCode.NONE, 1, 9093)
    missing = asyncio.run(find_coordinator.handle(context("SSL", 2), request))
    assert (missing.error_code, missing.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    on_plaintext = asyncio.run(find_coordinator.handle(context("PLAINTEXT", 2), request))
    assert (on_plaintext.error_code, on_plaintext.host, on_plaintext.port) == (ErrorCode.NONE, "h2", 9092)
