"""Fetch (1): read record batches, long-polling up to max_wait_ms for min_bytes.

Kafka's ``handleFetchRequest``: the request's fetch session metadata makes its context when it
arrives (`pybroker.server.fetch_session`: sessionless, full with a new session, incremental in
an existing one, or a session error); the context says which partitions are read (an
incremental request's are its session's, listed in the request or not). Each is refused
(authorization, KIP-253's partition count, a partition the metadata does not know) or read;
when the read completes — at once or from the fetch purgatory — the answer is a
`PendingFetchResponse`, whose context generates the response data (creating or updating the
session) unless the client quotas throttle it (`pybroker.server.quota.throttling`).

The response lists the partitions read, in the context's order, then those refused (Kafka's
order), consecutive partitions of a topic under one topic entry; an incremental response only
those that changed.

Authorization (Kafka's ``handleFetchRequest``): a follower's fetch (replica id >= 0) needs
CLUSTER_ACTION on the cluster, all or nothing; a consumer's needs READ on each topic. Refused
partitions answer TOPIC_AUTHORIZATION_FAILED (high watermark -1), before any other check.

Versions 0–3 expect message sets (magic 0 up to v1, magic 1 up to v3): what was read is converted
once it is read (``_native.down_convert``, Kafka's lazy down-conversion, cut or padded as Kafka
sends it; up to v2 a first batch over the partition's limit gives no records, as in Kafka), unless
the topic's ``compression.type`` is zstd (UNSUPPORTED_COMPRESSION_TYPE, as for
a zstd batch met on the way) or a consumer reads a topic with ``message.downconversion.enable``
false (UNSUPPORTED_VERSION). Up to v5 a KAFKA_STORAGE_ERROR is answered NOT_LEADER_OR_FOLLOWER,
which those clients know to retry (Kafka's ``maybeDownConvertStorageError``).

KIP-392 (fetch from follower): from v11 a consumer sends its rack and may read a follower (to the
follower's high watermark); a leader configured with ``replica.selector.class`` may answer it a
preferred read replica instead of records (`pybroker.server.replica_selector`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace

from pybroker import _native
from pybroker.common.errors import CorruptRecordError, ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest, FetchResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.fetch_session import FetchContext, FetchMetadata, SessionResponse
from pybroker.server.partition import READ_COMMITTED
from pybroker.server.quota.throttling import DeferredResponse
from pybroker.server.replica_manager import (
    ClientMetadata,
    FetchPartitionRequest,
    FetchPartitionResult,
)
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.FETCH
VERSIONS = (0, 12)
LAST_MESSAGE_SET_VERSION = 3  # versions up to this one read message format v0 (up to v1) or v1
LAST_HARD_LIMIT_VERSION = 2  # partition_max_bytes binds even the first batch (KIP-74 came with v3)
LAST_VERSION_WITHOUT_STORAGE_ERROR = 5
FIRST_CLIENT_METADATA_VERSION = 11  # KIP-392: the consumer's rack; it may read followers
AUTHORIZES = frozenset(
    {(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER), (AclOperation.READ, ResourceType.TOPIC)}
)


def handle(ctx: RequestContext, request: FetchRequest) -> PendingFetchResponse | Awaitable[PendingFetchResponse]:
    fetch_data = {
        TopicPartition(topic.topic, p.partition): FetchPartitionRequest(
            TopicPartition(topic.topic, p.partition),
            p.fetch_offset,
            p.partition_max_bytes,
            p.current_leader_epoch,
            p.log_start_offset,
            p.last_fetched_epoch,
        )
        for topic in request.topics
        for p in topic.partitions
    }
    to_forget = [
        TopicPartition(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions
    ]
    follower = request.replica_id >= 0
    context = ctx.services.fetch_manager.new_context(
        FetchMetadata(request.session_id, request.session_epoch), follower, fetch_data, to_forget
    )
    interesting, erroneous = _classify(ctx, request, context.partitions())
    if not interesting:  # nothing to read: no long poll (Kafka answers at once)
        return _pending(ctx, request, context, erroneous)
    # Kafka lowers the request's limit to the broker's fetch.max.bytes, and min_bytes with it.
    max_bytes = min(request.max_bytes, ctx.services.config.get("fetch.max.bytes"))
    outcome = ctx.services.replica_manager.fetch_messages(
        request.replica_id,
        request.max_wait_ms,
        min(request.min_bytes, max_bytes),
        max_bytes,
        interesting,
        read_committed=request.isolation_level == READ_COMMITTED,
        client=(
            ClientMetadata(request.rack_id or "", ctx.listener_name)
            if ctx.api_version >= FIRST_CLIENT_METADATA_VERSION and not follower
            else None
        ),
    )
    if asyncio.isfuture(outcome):
        return _respond_later(ctx, request, context, interesting, outcome, erroneous)
    return _pending(ctx, request, context, _in_order(interesting, outcome, erroneous))


def _classify(
    ctx: RequestContext, request: FetchRequest, partitions: list[FetchPartitionRequest]
) -> tuple[list[FetchPartitionRequest], dict[TopicPartition, FetchPartitionResult]]:
    """The partitions to read, and those refused with their error (TOPIC_AUTHORIZATION_FAILED,
    KIP-253's INVALID_PARTITION_METADATA, UNKNOWN_TOPIC_OR_PARTITION), both in order."""
    interesting: list[FetchPartitionRequest] = []
    erroneous: dict[TopicPartition, FetchPartitionResult] = {}
    if not partitions:
        return interesting, erroneous
    metadata = ctx.services.metadata_cache
    if request.replica_id >= 0:
        if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            return interesting, {
                p.topic_partition: FetchPartitionResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in partitions
            }
        denied: set[str] = set()
        count_errors: dict[TopicPartition, ErrorCode] = {}
    else:
        denied = {
            name
            for name in dict.fromkeys(p.topic_partition.topic for p in partitions)
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)
        }
        count_errors = _partition_count_errors(ctx, request, denied)
    for p in partitions:
        tp = p.topic_partition
        if tp.topic in denied:
            erroneous[tp] = FetchPartitionResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif tp in count_errors:
            erroneous[tp] = FetchPartitionResult(count_errors[tp])
        elif not metadata.contains(tp):
            erroneous[tp] = FetchPartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            interesting.append(p)
    return interesting, erroneous


def _partition_count_errors(
    ctx: RequestContext, request: FetchRequest, denied: set[str]
) -> dict[TopicPartition, ErrorCode]:
    """KIP-253: a consumer that sent a partition count other than the leader's gets
    INVALID_PARTITION_METADATA for the topic's partitions it lists (followers are not checked,
    nor ``denied`` topics)."""
    return ctx.services.replica_manager.partition_count_errors(
        (
            (TopicPartition(t.topic, p.partition), t.undeleted_partition_count)
            for t in request.topics
            if t.undeleted_partition_count >= 0 and t.topic not in denied
            for p in t.partitions
        ),
        producing=False,
    )


def _in_order(
    interesting: list[FetchPartitionRequest],
    results: dict[TopicPartition, FetchPartitionResult],
    erroneous: dict[TopicPartition, FetchPartitionResult],
) -> dict[TopicPartition, FetchPartitionResult]:
    """Kafka's response map: the partitions read in the order read, then those refused."""
    partitions = {p.topic_partition: results[p.topic_partition] for p in interesting}
    partitions.update(erroneous)
    return partitions


async def _respond_later(
    ctx: RequestContext,
    request: FetchRequest,
    context: FetchContext,
    interesting: list[FetchPartitionRequest],
    outcome: asyncio.Future,
    erroneous: dict[TopicPartition, FetchPartitionResult],
) -> PendingFetchResponse:
    return _pending(ctx, request, context, _in_order(interesting, await outcome, erroneous))


def _pending(
    ctx: RequestContext,
    request: FetchRequest,
    context: FetchContext,
    partitions: dict[TopicPartition, FetchPartitionResult],
) -> PendingFetchResponse:
    """The answer for the partitions read, in the form the request's version reads."""
    version = ctx.api_version
    if version <= LAST_MESSAGE_SET_VERSION:
        _down_convert(ctx, request, partitions, to_magic=0 if version <= 1 else 1)
    if version <= LAST_VERSION_WITHOUT_STORAGE_ERROR:
        for tp, result in partitions.items():
            if result.error == ErrorCode.KAFKA_STORAGE_ERROR:
                partitions[tp] = replace(result, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return PendingFetchResponse(request, context, partitions)


def _down_convert(
    ctx: RequestContext,
    request: FetchRequest,
    partitions: dict[TopicPartition, FetchPartitionResult],
    to_magic: int,
) -> None:
    """Kafka's ``maybeConvertFetchedData`` for Fetch v0–3, on ``partitions`` in place."""
    asked = {
        TopicPartition(topic.topic, p.partition): p
        for topic in request.topics
        for p in topic.partitions
    }
    # Up to v2 a partition's limit is hard (no KIP-74): Kafka reads that many bytes, and a first
    # batch larger than them converts to nothing.
    hard_limit = ctx.api_version <= LAST_HARD_LIMIT_VERSION
    replica_manager = ctx.services.replica_manager
    for tp, result in partitions.items():
        config = replica_manager.get_log_config(tp)
        if config is None:
            continue
        if config.compression_type == "zstd":
            partitions[tp] = FetchPartitionResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        elif request.replica_id < 0 and not config.message_downconversion_enable:
            partitions[tp] = FetchPartitionResult(ErrorCode.UNSUPPORTED_VERSION)
        elif hard_limit and len(result.records) > asked[tp].partition_max_bytes:
            partitions[tp] = replace(result, records=b"")
        elif len(result.records):
            try:
                read = result.records.read() if isinstance(result.records, _native.LogRegion) else result.records
                messages = _native.down_convert(read, to_magic, asked[tp].fetch_offset)
            except OSError:  # the segment went (deleted or truncated) since it was read: read again
                partitions[tp] = FetchPartitionResult(ErrorCode.KAFKA_STORAGE_ERROR)
                continue
            except CorruptRecordError as e:
                partitions[tp] = FetchPartitionResult(e.code)
                continue
            partitions[tp] = (
                FetchPartitionResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                if messages is None
                else replace(result, records=messages)
            )


class PendingFetchResponse(DeferredResponse):
    """A fetch whose partitions are read: answered in full by its context (which creates or
    updates the fetch session then), or with the context's throttled response."""

    __slots__ = ("request", "context", "partitions")

    def __init__(
        self,
        request: FetchRequest,
        context: FetchContext,
        partitions: dict[TopicPartition, FetchPartitionResult],
    ) -> None:
        self.request = request
        self.context = context
        self.partitions = partitions

    def response_size(self) -> int:
        return self.context.response_size(self.partitions)

    def respond(self, throttle_time_ms: int) -> FetchResponse:
        context = self.context
        if throttle_time_ms > 0:
            answer = context.throttled_response()
        else:
            answer = context.update_and_generate_response_data(self.partitions)
        return _response(self.request, answer, throttle_time_ms)


# Errors Kafka's KafkaApis answers before the replica manager reads (its partitionResponse): their
# partitions carry an empty aborted-transactions list where a read_uncommitted read carries null.
_REFUSED_BEFORE_READING = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
})


def _response(
    request: FetchRequest, answer: SessionResponse, throttle_time_ms: int = 0
) -> FetchResponse:
    read_committed = request.isolation_level == READ_COMMITTED
    topics: list[FetchResponse.FetchableTopicResponse] = []
    current: FetchResponse.FetchableTopicResponse | None = None
    for tp, result in answer.partitions.items():
        data = FetchResponse.PartitionData(
            partition_index=tp.partition,
            error_code=result.error,
            high_watermark=result.high_watermark,
            last_stable_offset=result.last_stable_offset,
            log_start_offset=result.log_start_offset,
            aborted_transactions=(
                [
                    FetchResponse.AbortedTransaction(
                        producer_id=producer_id, first_offset=first_offset
                    )
                    for producer_id, first_offset in result.aborted_transactions
                ]
                if read_committed or result.error in _REFUSED_BEFORE_READING
                else None
            ),
            preferred_read_replica=result.preferred_read_replica,
            records=result.records,
        )
        if result.diverging_epoch is not None:
            epoch, end_offset = result.diverging_epoch
            data.diverging_epoch = FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)
        if current is None or current.topic != tp.topic:
            current = FetchResponse.FetchableTopicResponse(topic=tp.topic, partitions=[])
            topics.append(current)
        current.partitions.append(data)
    return FetchResponse(
        throttle_time_ms=throttle_time_ms,
        error_code=answer.error,
        session_id=answer.session_id,
        responses=topics,
    )


def error_response(request: FetchRequest, version: int, error: ErrorCode) -> FetchResponse:
    """Kafka's getErrorResponse below v13: ``error`` at the top and on every partition of the
    request (high watermark -1), and the request's session id."""
    return FetchResponse(
        throttle_time_ms=0,
        error_code=error,
        session_id=request.session_id,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=topic.topic,
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=p.partition, error_code=error, high_watermark=-1
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )
