"""``advertised.listeners`` as a per-broker dynamic config, on three pybroker brokers beside three
Kafka 3.9.2 brokers given the same admin calls.

DescribeConfigs shows it writable; setting it for broker 1 (``localhost`` instead of
``127.0.0.1``) rewrites broker 1's registration and every broker's Metadata then names broker 1
by its new host; a listener that does not exist, a setting for the whole cluster, and an unset
inter-broker listener are refused; deleting the setting brings the old host back. The summaries
(errors, read-only flags, sources, hosts every broker reports) must be the same.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import IncrementalAlterConfigsRequest
from tests.conftest import broker_connection, wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for

NAME = "advertised.listeners"
BROKER, SET, DELETE = 4, 0, 1  # ConfigResource.Type.BROKER; AlterConfigOp.OpType SET, DELETE


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory) -> Iterator[Cluster]:
    cluster = start_cluster(chroot_for(zookeeper, "advertised"), tmp_path_factory.mktemp("advertised"))
    try:
        yield cluster
    finally:
        cluster.kill()


def described(admin: AdminClient, broker: str) -> tuple[bool, str, str | None]:
    resource = ConfigResource(ResourceType.BROKER, broker)
    entry = admin.describe_configs([resource])[resource].result(30)[NAME]
    return entry.is_read_only, ConfigSource(entry.source).name, entry.value


def alter(address: str, broker: str, value: str | None) -> tuple[str, str | None]:
    """IncrementalAlterConfigs of ``advertised.listeners`` (None: DELETE) for ``broker`` ("": the
    cluster default, which confluent-kafka cannot send), sent to ``address``; (error, the gist of
    its message: Kafka's texts print Scala maps)."""

    async def send() -> Any:
        connection = await broker_connection(address)
        try:
            request = IncrementalAlterConfigsRequest(validate_only=False, resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=BROKER, resource_name=broker, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name=NAME, config_operation=DELETE if value is None else SET, value=value)])])
            return (await connection.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, version=1)).responses[0]
        finally:
            await connection.close()

    answer = asyncio.run(send())
    message = re.sub(r":\d+", ":N", answer.error_message or "")  # each cluster's own ports
    gist = next((g for g in ("must be a subset of listeners", "inter-broker listener",
                             "broker id must be specified") if g in message), message or None)
    return ErrorCode(answer.error_code).name, gist


def hosts(addresses: list[str]) -> list[str]:
    """Broker 1's host as each broker's Metadata names it."""
    return [AdminClient({"bootstrap.servers": address}).list_topics(timeout=10).brokers[1].host
            for address in addresses]


def scenario(bootstrap: str, addresses: list[str]) -> list[tuple[str, Any]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    first = addresses[0]
    port = first.rsplit(":", 1)[1]
    steps: list[tuple[str, Any]] = [("described", described(admin, "1")[:2]), ("hosts", hosts(addresses))]
    steps.append(("a listener that does not exist",
                  alter(first, "1", f"PLAINTEXT://localhost:{port},OTHER://localhost:1")))
    steps.append(("no inter-broker listener", alter(first, "1", "SSL://localhost:1")))
    steps.append(("for the whole cluster", alter(first, "", f"PLAINTEXT://localhost:{port}")))
    steps.append(("set for broker 1", alter(first, "1", f"PLAINTEXT://localhost:{port}")))
    wait_until(lambda: hosts(addresses) == ["localhost"] * 3, timeout=30, message="every broker naming localhost")
    steps.append(("described after", described(admin, "1")))
    steps.append(("hosts after", hosts(addresses)))
    steps.append(("deleted", alter(first, "1", None)))
    wait_until(lambda: hosts(addresses) == ["127.0.0.1"] * 3, timeout=30, message="every broker naming 127.0.0.1")
    steps.append(("hosts at the end", hosts(addresses)))
    return steps


def test_advertised_listeners_change_at_run_time_as_in_kafka(cluster, kafka_cluster):
    ours = scenario(cluster.bootstrap, [b.bootstrap for b in cluster.brokers])
    theirs = scenario(kafka_cluster.bootstrap, [b.bootstrap for b in kafka_cluster.brokers])
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        if step == "described after":  # the value names each cluster's own port
            mine, kafkas = mine[:2], kafkas[:2]
        assert mine == kafkas, step
    answers = dict(ours)
    assert answers["described"] == (False, "DEFAULT_CONFIG")
    assert answers["described after"][:2] == (False, "DYNAMIC_BROKER_CONFIG")
    assert answers["set for broker 1"] == ("NONE", None) and answers["hosts after"] == ["localhost"] * 3


def test_a_single_broker_without_zookeeper_re_advertises_too(start_broker):
    broker = start_broker()
    port = broker.bootstrap.rsplit(":", 1)[1]
    assert alter(broker.bootstrap, "1", f"PLAINTEXT://localhost:{port}") == ("NONE", None)
    wait_until(lambda: hosts([broker.bootstrap]) == ["localhost"], timeout=10, message="the broker naming localhost")
    broker.stop()
    broker.start()  # stored in its local metadata: still advertised after a restart
    assert hosts([broker.bootstrap]) == ["localhost"]
