"""OffsetDelete (47): delete a group's committed offsets of some partitions.

Refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) while a consumer group subscribes to the topic;
NON_EMPTY_GROUP for a non-consumer group with members; GROUP_ID_NOT_FOUND for no such group.
"""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)


def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    cache = ctx.broker.metadata_cache
    order = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in order if not cache.contains(tp)}
    known = [tp for tp in order if tp not in errors]
    group_error, results = ctx.broker.group_coordinator.handle_delete_offsets(request.group_id, known)
    if group_error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
    errors.update(results)
    by_topic: dict[str, list[OffsetDeleteResponse.OffsetDeleteResponsePartition]] = {}
    for tp in order:
        by_topic.setdefault(tp.topic, []).append(
            OffsetDeleteResponse.OffsetDeleteResponsePartition(partition_index=tp.partition, error_code=errors[tp])
        )
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        OffsetDeleteResponse.OffsetDeleteResponseTopic(name=name, partitions=parts) for name, parts in by_topic.items()
    ])


def error_response(request: OffsetDeleteRequest, version: int, error: ErrorCode) -> OffsetDeleteResponse:
    """Kafka's getErrorResponse: the top-level ``error``, no partitions."""
    return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
