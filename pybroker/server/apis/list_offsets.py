"""ListOffsets (2): earliest, latest, max-timestamp, or first offset at/after a timestamp.

Each topic needs DESCRIBE (Kafka's ``handleListOffsetRequestV1AndAbove``): a refused topic's
partitions answer TOPIC_AUTHORIZATION_FAILED (timestamp and offset -1), before any other check,
and come after the authorized topics in the response, as in Kafka.

Version 0 (Kafka's ``handleListOffsetRequestV0``) answers a list of offsets per partition instead:
segment start offsets by the segments' modification times (``Log.legacy_offsets_before``), capped
at the high watermark for a consumer; it has no duplicate check and no leader epochs.
"""

from __future__ import annotations

from collections import Counter

from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (0, 7)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.TOPIC)})

DEBUGGING_REPLICA_ID = -2
CONSUMER_REPLICA_ID = -1

_Partition = ListOffsetsResponse.ListOffsetsPartitionResponse


def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    if ctx.api_version == 0:
        return _handle_v0(ctx, request)
    asked = Counter(TopicPartition(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions)
    duplicates = {tp for tp, count in asked.items() if count > 1}
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


def _legacy_offsets(ctx: RequestContext, request: ListOffsetsRequest, tp: TopicPartition, p: ListOffsetsRequest.ListOffsetsPartition) -> _Partition:
    index = tp.partition
    timestamp = p.timestamp
    if timestamp < EARLIEST_TIMESTAMP:
        return _Partition(partition_index=index, error_code=ErrorCode.UNSUPPORTED_VERSION)
    replica_manager = ctx.services.replica_manager
    partition = replica_manager.get_partition(tp)
    if partition is None:
        return _Partition(partition_index=index, error_code=replica_manager.missing_partition_error(tp))
    try:
        offsets = partition.legacy_fetch_offsets_for_timestamp(
            timestamp, p.max_num_offsets,
            is_from_consumer=request.replica_id == CONSUMER_REPLICA_ID,
            fetch_only_from_leader=request.replica_id != DEBUGGING_REPLICA_ID,
        )
    except KafkaError as e:
        return _Partition(partition_index=index, error_code=e.code)
    return _Partition(partition_index=index, old_style_offsets=offsets)


def _error(index: int, code: ErrorCode) -> _Partition:
    return _Partition(partition_index=index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)


def _list_offset(ctx: RequestContext, request: ListOffsetsRequest, tp: TopicPartition, p: ListOffsetsRequest.ListOffsetsPartition) -> _Partition:
    timestamp = p.timestamp
    index = tp.partition
    if timestamp < 0 and timestamp not in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP):
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    if timestamp == MAX_TIMESTAMP and ctx.api_version < 7:
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    replica_manager = ctx.services.replica_manager
    partition = replica_manager.get_partition(tp)
    if partition is None:
        return _error(index, replica_manager.missing_partition_error(tp))
    try:
        found = partition.fetch_offset_for_timestamp(
            timestamp, None if request.replica_id >= 0 else request.isolation_level,
            p.current_leader_epoch,
            fetch_only_from_leader=request.replica_id != DEBUGGING_REPLICA_ID,
        )
    except KafkaError as e:
        return _error(index, e.code)
    if found is None:
        return _error(index, ErrorCode.NONE)
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
