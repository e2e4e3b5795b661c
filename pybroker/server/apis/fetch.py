"""Fetch (1): read record batches, long-polling up to max_wait_ms for min_bytes.

Fetch sessions (KIP-227) are not cached: every response carries session id 0, which tells
clients to send full fetch requests.

Authorization (Kafka's ``handleFetchRequest``): a follower's fetch (replica id >= 0) needs
CLUSTER_ACTION on the cluster, all or nothing; a consumer's needs READ on each topic. Refused
partitions answer TOPIC_AUTHORIZATION_FAILED (high watermark -1), before any other check.
"""

from __future__ import annotations

import asyncio

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import FetchRequest, FetchResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.replica_manager import FetchPartitionRequest, FetchPartitionResult
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.FETCH
VERSIONS = (4, 12)
READ_COMMITTED = 1
_FINAL_EPOCH = -1
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER), (AclOperation.READ, ResourceType.TOPIC)})


def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse | asyncio.Future:
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    if request.session_epoch not in (0, _FINAL_EPOCH):
        return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0, responses=[])
    partitions = [
        FetchPartitionRequest(
            TopicPartition(topic.topic, p.partition), p.fetch_offset, p.partition_max_bytes,
            p.current_leader_epoch, p.log_start_offset, p.last_fetched_epoch,
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    if request.replica_id >= 0:
        denied = set() if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else {t.topic for t in request.topics}
    else:
        denied = {name for name in dict.fromkeys(t.topic for t in request.topics)
                  if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)}
    refused = _partition_count_errors(ctx, request, denied)
    refused.update((p.topic_partition, FetchPartitionResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                   for p in partitions if p.topic_partition.topic in denied)
    if refused:
        partitions = [p for p in partitions if p.topic_partition not in refused]
    if not partitions and refused:
        return _response(request, refused)  # nothing left to read: no long poll (Kafka answers at once)
    outcome = ctx.broker.replica_manager.fetch_messages(
        request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes, partitions,
        read_committed=request.isolation_level == READ_COMMITTED,
    )
    if asyncio.isfuture(outcome):
        return _respond_later(request, outcome, refused)
    return _response(request, outcome | refused)


def _partition_count_errors(
    ctx: RequestContext, request: FetchRequest, denied: set[str]
) -> dict[TopicPartition, FetchPartitionResult]:
    """KIP-253: a consumer that sent a partition count other than the leader's gets
    INVALID_PARTITION_METADATA for the topic's partitions (followers are not checked, nor
    ``denied`` topics)."""
    if request.replica_id >= 0:
        return {}
    errors = ctx.broker.replica_manager.partition_count_errors(
        ((TopicPartition(t.topic, p.partition), t.undeleted_partition_count) for t in request.topics
         if t.undeleted_partition_count >= 0 and t.topic not in denied for p in t.partitions), producing=False)
    return {tp: FetchPartitionResult(error) for tp, error in errors.items()}


async def _respond_later(
    request: FetchRequest, outcome: asyncio.Future, refused: dict[TopicPartition, FetchPartitionResult]
) -> FetchResponse:
    return _response(request, await outcome | refused)


def _response(request: FetchRequest, results: dict[TopicPartition, FetchPartitionResult]) -> FetchResponse:
    read_committed = request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            result = results[TopicPartition(topic.topic, p.partition)]
            partitions.append(
                FetchResponse.PartitionData(
                    partition_index=p.partition,
                    error_code=result.error,
                    high_watermark=result.high_watermark,
                    last_stable_offset=result.last_stable_offset,
                    log_start_offset=result.log_start_offset,
                    aborted_transactions=(
                        [FetchResponse.AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
                         for producer_id, first_offset in result.aborted_transactions]
                        if read_committed else None
                    ),
                    preferred_read_replica=-1,
                    records=result.records,
                )
            )
            if result.diverging_epoch is not None:
                epoch, end_offset = result.diverging_epoch
                partitions[-1].diverging_epoch = FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)
        topics.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=topics)


def error_response(request: FetchRequest, version: int, error: ErrorCode) -> FetchResponse:
    """Kafka's getErrorResponse below v13: ``error`` at the top and on every partition."""
    response = _response(request, {
        TopicPartition(topic.topic, p.partition): FetchPartitionResult(error)
        for topic in request.topics
        for p in topic.partitions
    })
    response.error_code = error
    return response
