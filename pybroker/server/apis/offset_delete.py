"""OffsetDelete (47): delete a group's committed offsets of some partitions.

Refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) while a consumer group subscribes to the topic;
NON_EMPTY_GROUP for a non-consumer group with members; GROUP_ID_NOT_FOUND for no such group.

Needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED for the request), then READ on each
topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, before the unknown-topic check).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import denied_topics
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.DELETE, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC)})


def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return error_response(request, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    cache = ctx.services.metadata_cache
    order = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    denied = denied_topics(ctx, AclOperation.READ, (t.name for t in request.topics))
    errors = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in order if tp.topic in denied}
    errors.update((tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for tp in order
                  if tp not in errors and not cache.contains(tp))
    known = [tp for tp in order if tp not in errors]
    group_error, results = ctx.services.group_coordinator.handle_delete_offsets(request.group_id, known)
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
