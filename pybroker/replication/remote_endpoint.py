"""A ``LeaderEndPoint`` over a socket to the source broker (Kafka's ``RemoteLeaderEndPoint``).

Owns one connection from this follower to one leader broker and the three requests a follower
sends in ZooKeeper mode (IBP 3.0): a sessionless Fetch v12 (``ReplicaId`` = this broker,
SessionId 0 / SessionEpoch -1, every partition every time, no forgotten topics),
ListOffsets with ``ReplicaId`` = this broker (EARLIEST -2 / LATEST -1, answered from the
leader's log start and log end offsets), and OffsetForLeaderEpoch v4 with ``ReplicaId``. The
leader's address is looked up when a connection is made, so a leader restarted on another port
is found again; a broken connection is dropped and remade on the next call. Record sets are
handed on as the bytes the response carried: the fetcher appends them once per partition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, overload

from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.client.inter_broker import DIRECT, InterBrokerClient
from pybroker.common.cluster import BrokerEndpoint
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from pybroker.replication.fetcher import (
    EpochEndOffset,
    FetchRequestData,
    FetchResponsePartition,
    LeaderEndPointError,
)
from pybroker.types import TopicPartition

FETCH_VERSION = 12  # the last version with topic names (ZooKeeper mode, IBP 3.0)
LIST_OFFSETS_VERSION = 7
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


class RemoteLeaderEndPoint:
    """Talks to broker ``source_broker_id`` as replica ``replica_id``; ``resolve`` gives the
    broker's inter-broker endpoint (None while it is not alive in this broker's metadata)."""

    def __init__(
        self, source_broker_id: int, replica_id: int, resolve: Callable[[int], BrokerEndpoint | None],
        socket_timeout_ms: int = 30_000, inter_broker: InterBrokerClient = DIRECT,
    ) -> None:
        self._inter_broker = inter_broker
        self.source_broker_id = source_broker_id
        self.replica_id = replica_id
        self._resolve = resolve
        self._timeout_s = socket_timeout_ms / 1000
        self._connection: BrokerConnection | None = None
        self._client_id = f"broker-{replica_id}-fetcher-{source_broker_id}"

    @overload
    async def _send(
        self, api_key: Literal[ApiKey.FETCH], request: FetchRequest, version: int, extra_wait_ms: int = 0,
    ) -> FetchResponse: ...
    @overload
    async def _send(
        self, api_key: Literal[ApiKey.LIST_OFFSETS], request: ListOffsetsRequest, version: int, extra_wait_ms: int = 0,
    ) -> ListOffsetsResponse: ...
    @overload
    async def _send(
        self, api_key: Literal[ApiKey.OFFSET_FOR_LEADER_EPOCH], request: OffsetForLeaderEpochRequest, version: int,
        extra_wait_ms: int = 0,
    ) -> OffsetForLeaderEpochResponse: ...
    async def _send(self, api_key: ApiKey, request: object, version: int, extra_wait_ms: int = 0) -> object:
        if self._connection is None:
            endpoint = self._resolve(self.source_broker_id)
            if endpoint is None:
                raise ConnectionError(f"broker {self.source_broker_id} is not alive in the metadata")
            connection = self._inter_broker.connection(endpoint.host, endpoint.port, self._client_id)
            try:
                await connection.connect(self._timeout_s)
            except (KafkaClientError, OSError, TimeoutError) as e:  # the leader died meanwhile, say
                await connection.close()
                raise ConnectionError(f"connection to broker {self.source_broker_id} failed: {e}") from e
            self._connection = connection
        try:
            return await self._connection.send(api_key, request, version, timeout=self._timeout_s + extra_wait_ms / 1000)
        except (KafkaClientError, OSError, TimeoutError) as e:
            await self.close()
            raise ConnectionError(f"{api_key.name} to broker {self.source_broker_id} failed: {e}") from e

    # --- Fetch -------------------------------------------------------------------------------------

    async def fetch(self, request: FetchRequestData) -> dict[TopicPartition, FetchResponsePartition]:
        topics: dict[str, list[FetchRequest.FetchPartition]] = {}
        for wanted in request.partitions:
            topics.setdefault(wanted.topic_partition.topic, []).append(FetchRequest.FetchPartition(
                partition=wanted.topic_partition.partition, current_leader_epoch=wanted.current_leader_epoch,
                fetch_offset=wanted.fetch_offset, last_fetched_epoch=wanted.last_fetched_epoch,
                log_start_offset=wanted.log_start_offset, partition_max_bytes=wanted.max_bytes,
            ))
        message = FetchRequest(
            replica_id=request.replica_id, max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
            max_bytes=request.max_bytes, isolation_level=0, session_id=request.session_id,
            session_epoch=request.session_epoch,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id="",
        )
        response = await self._send(ApiKey.FETCH, message, FETCH_VERSION, request.max_wait_ms)
        if response.error_code != ErrorCode.NONE:
            raise LeaderEndPointError(ErrorCode.for_code(response.error_code))
        results: dict[TopicPartition, FetchResponsePartition] = {}
        for topic in response.responses:
            for p in topic.partitions:
                diverging, records = p.diverging_epoch, p.records
                assert records is None or isinstance(records, memoryview)  # decoded: a view of the response frame
                results[TopicPartition(topic.topic, p.partition_index)] = FetchResponsePartition(
                    ErrorCode.for_code(p.error_code), p.high_watermark, p.log_start_offset, records or b"",
                    (diverging.epoch, diverging.end_offset)
                    if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0) else None,
                )
        return results

    # --- ListOffsets -------------------------------------------------------------------------------

    async def _list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        message = ListOffsetsRequest(replica_id=self.replica_id, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=tp.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp,
                ),
            ]),
        ])
        response = await self._send(ApiKey.LIST_OFFSETS, message, LIST_OFFSETS_VERSION)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and p.partition_index == tp.partition:
                    if p.error_code != ErrorCode.NONE:
                        raise LeaderEndPointError(ErrorCode.for_code(p.error_code))
                    return int(p.offset)
        raise LeaderEndPointError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets answered nothing for {tp}")

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return await self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return await self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    # --- OffsetForLeaderEpoch ----------------------------------------------------------------------

    async def fetch_epoch_end_offsets(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        topics: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        for tp, (current_epoch, epoch) in partitions.items():
            topics.setdefault(tp.topic, []).append(OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=tp.partition, current_leader_epoch=current_epoch, leader_epoch=epoch,
            ))
        message = OffsetForLeaderEpochRequest(replica_id=self.replica_id, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()
        ])
        response = await self._send(ApiKey.OFFSET_FOR_LEADER_EPOCH, message, OFFSET_FOR_LEADER_EPOCH_VERSION)
        return {
            TopicPartition(topic.topic, p.partition): EpochEndOffset(
                ErrorCode.for_code(p.error_code), p.leader_epoch, p.end_offset
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
