"""DescribeConfigs synonyms follow Kafka's chain: topic override, then broker properties by precedence,
from the topic config's first broker name on."""

from __future__ import annotations

import asyncio

from pybroker.client.admin import Admin
from pybroker.client.connection import BrokerConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeConfigsRequest

TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


def describe(bootstrap: str, resource_type: int, name: str, keys: list[str] | None):
    async def run():
        host, port = bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        await connection.connect()
        request = DescribeConfigsRequest(include_synonyms=True, resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)])
        response = await connection.send(ApiKey.DESCRIBE_CONFIGS, request)
        await connection.close()
        return response.results[0]

    return asyncio.run(run())


def test_retention_synonyms(start_broker, topic_name):
    broker = start_broker(**{"log.retention.minutes": 30})

    async def create():
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(topic_name, 1, 1, {"segment.ms": "5000"})

    asyncio.run(create())
    result = describe(broker.bootstrap, 2, topic_name, ["retention.ms", "segment.ms", "cleanup.policy"])
    entries = {c.name: c for c in result.configs}
    # As Kafka 3.9.2 answers (checked beside it): a topic config's synonyms start at its first
    # broker name, log.retention.ms, which nothing sets, so log.retention.minutes and
    # log.retention.hours are dropped and the source is DEFAULT_CONFIG, whatever gave the value.
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source) == ("1800000", DEFAULT_CONFIG)
    assert retention.synonyms == []
    segment_ms = entries["segment.ms"]
    assert (segment_ms.value, segment_ms.config_source) == ("5000", TOPIC_CONFIG)
    assert [(s.name, s.source) for s in segment_ms.synonyms] == [("segment.ms", TOPIC_CONFIG)]
    assert [(s.name, s.value) for s in entries["cleanup.policy"].synonyms] == [("log.cleanup.policy", "delete")]
    assert describe(broker.bootstrap, 4, "", None).configs == []
