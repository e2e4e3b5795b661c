"""ListOffsets (2): earliest, latest, max-timestamp, or first offset at/after a timestamp.

Each topic needs DESCRIBE (Kafka's ``handleListOffsetRequestV1AndAbove``): a refused topic's
partitions answer TOPIC_AUTHORIZATION_FAILED (timestamp and offset -1), before any other check,
and come after the authorized topics in the response, as in Kafka.

Version 0 (Kafka's ``handleListOffsetRequestV0``) answers a list of offsets per partition instead:
segment start offsets by the segments' modification times (``Log.legacy_offsets_before``), capped
at the high watermark for a consumer; it has no duplicate check and no leader epochs.
"""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.partition import (
    FencedLeaderEpochError,
    NotLeaderError,
    UnknownLeaderEpochError,
)
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (0, 7)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.TOPIC)})

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_COMMITTED = 1
MAX_TIMESTAMP = -3
DEBUGGING_REPLICA_ID = -2
CONSUMER_REPLICA_ID = -1

_Partition = ListOffsetsResponse.ListOffsetsPartitionResponse


def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    if ctx.api_version == 0:
        return _handle_v0(ctx, request)
    seen: set[TopicPartition] = set()
    duplicates = {
        tp
        for topic in request.topics
        for p in topic.partitions
        if (tp := TopicPartition(topic.name, p.partition_index)) in seen or seen.add(tp)
    }
    allowed = {name: ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
               for name in dict.fromkeys(t.name for t in request.topics)}
    topics = []
    unauthorized = []
    for topic in request.topics:
        if not allowed[topic.name]:
            unauthorized.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=[
                _error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions
            ]))
            continue
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp in duplicates:
                partitions.append(_error(p.partition_index, ErrorCode.INVALID_REQUEST))
            else:
                partitions.append(_list_offset(ctx, request, tp, p))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics + unauthorized)


def _handle_v0(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    allowed = {name: ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
               for name in dict.fromkeys(t.name for t in request.topics)}
    topics = []
    unauthorized = []
    for topic in request.topics:
        if not allowed[topic.name]:
            unauthorized.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=[
                _Partition(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partitions
            ]))
            continue
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=[
            _legacy_offsets(ctx, request, TopicPartition(topic.name, p.partition_index), p) for p in topic.partitions
        ]))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics + unauthorized)


def _legacy_offsets(ctx: RequestContext, request: ListOffsetsRequest, tp: TopicPartition, p: object) -> _Partition:
    index = tp.partition
    timestamp = p.timestamp  # type: ignore[attr-defined]
    if timestamp < EARLIEST_TIMESTAMP:
        return _Partition(partition_index=index, error_code=ErrorCode.UNSUPPORTED_VERSION)
    replica_manager = ctx.services.replica_manager
    partition = replica_manager.get_partition(tp)
    if partition is None:
        return _Partition(partition_index=index, error_code=replica_manager.missing_partition_error(tp))
    if request.replica_id != DEBUGGING_REPLICA_ID:
        try:
            partition.require_leader()
        except NotLeaderError:
            return _Partition(partition_index=index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    log = partition.log
    offsets = log.legacy_offsets_before(timestamp, p.max_num_offsets,  # type: ignore[attr-defined]
                                        replica_manager.time.milliseconds())
    if request.replica_id == CONSUMER_REPLICA_ID and offsets and offsets[0] > log.high_watermark:
        offsets = [log.high_watermark, *(offset for offset in offsets if offset <= log.high_watermark)]
    return _Partition(partition_index=index, old_style_offsets=offsets)


def _error(index: int, code: ErrorCode) -> _Partition:
    return _Partition(partition_index=index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)


def _list_offset(ctx: RequestContext, request: ListOffsetsRequest, tp: TopicPartition, p: object) -> _Partition:
    broker = ctx.services
    timestamp = p.timestamp  # type: ignore[attr-defined]
    index = tp.partition
    if timestamp < 0 and timestamp not in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP):
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    if timestamp == MAX_TIMESTAMP and ctx.api_version < 7:
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    partition = broker.replica_manager.get_partition(tp)
    if partition is None:
        return _error(index, broker.replica_manager.missing_partition_error(tp))
    try:
        if request.replica_id != DEBUGGING_REPLICA_ID:
            partition.require_leader()
        partition.check_leader_epoch(p.current_leader_epoch)  # type: ignore[attr-defined]
    except NotLeaderError:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    except FencedLeaderEpochError:
        return _error(index, ErrorCode.FENCED_LEADER_EPOCH)
    except UnknownLeaderEpochError:
        return _error(index, ErrorCode.UNKNOWN_LEADER_EPOCH)
    log = partition.log
    # Consumers see up to the high watermark, read_committed ones up to the last stable offset;
    # replicas see the whole log.
    if request.replica_id >= 0:
        max_offset = log.log_end_offset
    elif request.isolation_level == READ_COMMITTED:
        max_offset = log.last_stable_offset
    else:
        max_offset = log.high_watermark
    if timestamp == EARLIEST_TIMESTAMP:
        epoch = log.leader_epoch_cache.epoch_for_offset(log.log_start_offset)
        return _Partition(partition_index=index, timestamp=-1, offset=log.log_start_offset, leader_epoch=epoch)
    # A new leader whose high watermark has not yet reached the start of its epoch cannot tell a
    # client where the log ends (Kafka's OFFSET_NOT_AVAILABLE; the client retries).
    hw_behind_epoch = request.replica_id < 0 and partition.leader_epoch_start_offset > log.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        if hw_behind_epoch:
            return _error(index, ErrorCode.OFFSET_NOT_AVAILABLE)
        return _Partition(partition_index=index, timestamp=-1, offset=max_offset, leader_epoch=partition.leader_epoch)
    found = log.fetch_max_timestamp(max_offset) if timestamp == MAX_TIMESTAMP else log.fetch_offset_by_timestamp(timestamp, max_offset)
    if found is None:
        return _error(index, ErrorCode.OFFSET_NOT_AVAILABLE if hw_behind_epoch else ErrorCode.NONE)
    offset, found_timestamp, epoch = found
    return _Partition(partition_index=index, timestamp=found_timestamp, offset=offset, leader_epoch=epoch)


def error_response(request: ListOffsetsRequest, version: int, error: ErrorCode) -> ListOffsetsResponse:
    """Kafka's getErrorResponse: ``error`` and unknown offsets on every partition."""
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        ListOffsetsResponse.ListOffsetsTopicResponse(
            name=topic.name, partitions=[_error(p.partition_index, error) for p in topic.partitions]
        )
        for topic in request.topics
    ])
