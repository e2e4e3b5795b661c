"""The project's own asyncio admin client.

Owns bootstrapping (the first reachable ``host:port`` of ``bootstrap_servers``), cluster metadata
lookups, and the topic administration calls: create/delete topics, create partitions, describe
and alter topic configs. Each call returns per-resource results or raises ``AdminError`` naming
the resource and Kafka's error.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.controller.metadata import topic_id_to_string
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)

TOPIC_RESOURCE = 2


class AdminError(Exception):
    """A resource-level failure: ``error`` is Kafka's error code."""

    def __init__(self, resource: str, error: int, message: str | None = None) -> None:
        self.resource, self.error = resource, ErrorCode(error)
        super().__init__(f"{resource}: {self.error.name}" + (f" ({message})" if message else ""))


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionInfo] = field(default_factory=list)
    internal: bool = False


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    return out


class Admin:
    """``async with Admin("127.0.0.1:9092") as admin: ...``"""

    def __init__(self, bootstrap_servers: str, client_id: str = "pybroker-admin") -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._client_id = client_id
        self._connection: BrokerConnection | None = None

    async def __aenter__(self) -> Admin:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        errors = []
        for host, port in self._bootstrap:
            connection = BrokerConnection(host, port, self._client_id)
            try:
                await connection.connect()
            except (OSError, KafkaClientError, TimeoutError) as e:
                errors.append(f"{host}:{port}: {e}")
                await connection.close()
                continue
            self._connection = connection
            return
        raise KafkaClientError("could not reach any bootstrap server: " + "; ".join(errors))

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    async def _send(self, api_key: int, request: Any) -> Any:
        if self._connection is None:
            raise KafkaClientError("not connected")
        return await self._connection.send(api_key, request)

    # --- topics --------------------------------------------------------------------------------

    async def describe_topics(self, names: list[str] | None = None) -> list[TopicDescription]:
        request = MetadataRequest(
            topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,
        )
        response = await self._send(ApiKey.METADATA, request)
        out = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {topic.name}", topic.error_code)
            out.append(TopicDescription(
                topic.name,
                topic_id_to_string(topic.topic_id or uuid.UUID(int=0)),
                sorted(
                    (PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
                     for p in topic.partitions),
                    key=lambda p: p.partition,
                ),
                topic.is_internal,
            ))
        return sorted(out, key=lambda t: t.name)

    async def list_topics(self) -> list[str]:
        return [t.name for t in await self.describe_topics(None)]

    async def create_topic(
        self, name: str, num_partitions: int = -1, replication_factor: int = -1,
        configs: dict[str, str] | None = None, validate_only: bool = False, timeout_ms: int = 30000,
    ) -> None:
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=num_partitions, replication_factor=replication_factor, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
        )
        response = await self._send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[topic], timeout_ms=timeout_ms, validate_only=validate_only))
        for result in response.topics:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {result.name}", result.error_code, result.error_message)

    async def delete_topic(self, name: str, timeout_ms: int = 30000) -> None:
        version = self._connection.version_for(ApiKey.DELETE_TOPICS) if self._connection else 0
        if version >= 6:
            request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=timeout_ms)
        else:
            request = DeleteTopicsRequest(topic_names=[name], timeout_ms=timeout_ms)
        response = await self._send(ApiKey.DELETE_TOPICS, request)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {name}", result.error_code, result.error_message)

    async def create_partitions(self, name: str, total_count: int, validate_only: bool = False) -> None:
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=total_count, assignments=None)],
            timeout_ms=30000, validate_only=validate_only,
        )
        response = await self._send(ApiKey.CREATE_PARTITIONS, request)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {name}", result.error_code, result.error_message)

    # --- configs -------------------------------------------------------------------------------

    async def describe_topic_configs(self, name: str) -> dict[str, tuple[str | None, int]]:
        """{config name: (value, config source)} of a topic."""
        request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None)])
        response = await self._send(ApiKey.DESCRIBE_CONFIGS, request)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            raise AdminError(f"topic {name}", result.error_code, result.error_message)
        return {c.name: (c.value, c.config_source) for c in result.configs}

    async def alter_topic_configs(self, name: str, set_configs: dict[str, str], delete_configs: list[str] = ()) -> None:
        """Incrementally SET and DELETE topic config overrides."""
        ops = [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=0, value=v) for k, v in set_configs.items()]
        ops += [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=1, value=None) for k in delete_configs]
        request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configs=ops)], validate_only=False)
        response = await self._send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        result = response.responses[0]
        if result.error_code != ErrorCode.NONE:
            raise AdminError(f"topic {name}", result.error_code, result.error_message)
