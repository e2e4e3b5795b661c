"""How the controller learns whether partitions marked for deletion are drained (KIP-253).

Owns the one question the controller asks partition leaders about their logs: the log start
offset and the high watermark of some partitions. A partition marked for deletion takes no more
records, so it is drained once the two are equal (every record deleted by DeleteRecords or by
retention), and the controller may then remove it. The seed has the controller ask with
ListOffsets (EARLIEST and LATEST, as a consumer); `NetworkLogOffsets` does exactly that over a
connection per leader, and a broker answers for its own partitions in-process (see
``Broker``). A leader that cannot be reached yields nothing: the check is repeated later.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.client.inter_broker import DIRECT, InterBrokerClient
from pybroker.common.cluster import LiveBroker
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ListOffsetsRequest
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

LogOffsets = dict[TopicPartition, tuple[int, int]]
"""Per partition: (log start offset, high watermark)."""

LogOffsetsReader = Callable[[LiveBroker, list[TopicPartition]], Awaitable[LogOffsets]]
"""Asks ``leader`` for the `LogOffsets` of its ``partitions`` (those it could answer for)."""


class NetworkLogOffsets:
    """A `LogOffsetsReader` over ListOffsets, one connection per broker, opened on first use."""

    def __init__(self, controller_id: int, timeout_s: float = 30.0, inter_broker: InterBrokerClient = DIRECT) -> None:
        self._inter_broker = inter_broker
        self._client_id = f"controller-{controller_id}"
        self._timeout_s = timeout_s
        self._connections: dict[int, BrokerConnection] = {}

    async def __call__(self, leader: LiveBroker, partitions: list[TopicPartition]) -> LogOffsets:
        try:
            connection = await self._connection(leader)
            earliest = await self._list(connection, partitions, EARLIEST_TIMESTAMP)
            latest = await self._list(connection, partitions, LATEST_TIMESTAMP)
        except (OSError, TimeoutError, KafkaClientError) as e:
            log.info("Could not read the log offsets of %d partition(s) on broker %d: %s",
                     len(partitions), leader.broker_id, e)
            await self._drop(leader.broker_id)
            return {}
        return {tp: (earliest[tp], latest[tp]) for tp in partitions if tp in earliest and tp in latest}

    async def _connection(self, broker: LiveBroker) -> BrokerConnection:
        connection = self._connections.get(broker.broker_id)
        if connection is None:
            endpoint = self._inter_broker.endpoint(broker)
            if endpoint is None:
                raise OSError(f"broker {broker.broker_id} advertises no listener {self._inter_broker.listener}")
            connection = self._inter_broker.connection(endpoint.host, endpoint.port, self._client_id)
            await connection.connect(self._timeout_s)
            self._connections[broker.broker_id] = connection
        return connection

    async def _list(self, connection: BrokerConnection, partitions: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        L = ListOffsetsRequest
        request = L(replica_id=-1, isolation_level=0, topics=[
            L.ListOffsetsTopic(name=topic, partitions=[
                L.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in indexes
            ]) for topic, indexes in by_topic.items()
        ])
        response = await connection.send(ApiKey.LIST_OFFSETS, request, timeout=self._timeout_s)
        return {
            TopicPartition(topic.name, p.partition_index): p.offset
            for topic in response.topics for p in topic.partitions if p.error_code == ErrorCode.NONE
        }

    async def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            await connection.close()

    async def close(self) -> None:
        for broker_id in list(self._connections):
            await self._drop(broker_id)
