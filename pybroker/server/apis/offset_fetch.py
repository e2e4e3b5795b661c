"""OffsetFetch (9): a group's committed offsets (v8: several groups in one request).

A partition without a committed offset answers offset -1 and empty metadata; a null topic list
(v2+) asks for every offset the group has. With RequireStable (v7+, KIP-447), a partition whose
offset commit is pending (in flight, or in an open transaction) answers offset -1 and
UNSTABLE_OFFSET_COMMIT, so the consumer retries until the transaction ends; without it the
committed offset is returned.

Authorization (Kafka's ``handleOffsetFetchRequestFromCoordinator``): DESCRIBE on each group, else
the group answers GROUP_AUTHORIZATION_FAILED (v8 per group, v2-7 at the top with no topics; v1 has
no field for it, so every requested partition carries it, as Kafka's getErrorResponse does); then
DESCRIBE on each topic: named topics
without it answer TOPIC_AUTHORIZATION_FAILED (offset -1) per partition, and an all-partitions
request silently leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import denied_topics
from pybroker.server.group.records import OffsetAndMetadata
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = (1, 8)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.GROUP), (AclOperation.DESCRIBE, ResourceType.TOPIC)})


def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    require_stable = ctx.api_version >= 7 and request.require_stable
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, topics = _fetch(ctx, group.group_id, group.topics, require_stable,
                                   OffsetFetchResponse.OffsetFetchResponseTopics,
                                   OffsetFetchResponse.OffsetFetchResponsePartitions)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=error, topics=topics,
            ))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topic_cls = OffsetFetchResponse.OffsetFetchResponseTopic
    partition_cls = OffsetFetchResponse.OffsetFetchResponsePartition
    error, topics = _fetch(ctx, request.group_id, request.topics, require_stable, topic_cls, partition_cls)
    if error != ErrorCode.NONE:
        if ctx.api_version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[])
        # v1 has no top-level error: every requested partition carries it.
        failed = {tp: OffsetAndMetadata(offset=-1) for tp in _partitions(request.topics) or []}
        return OffsetFetchResponse(topics=_topics(failed, topic_cls, partition_cls, error))
    return OffsetFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics)


def _fetch(
    ctx: RequestContext, group_id: str, requested: Any, require_stable: bool, topic_cls: Any, partition_cls: Any,
) -> tuple[ErrorCode, list[Any]]:
    """One group's (error, topics): DESCRIBE on the group, then on each topic, then the coordinator."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    coordinator = ctx.services.group_coordinator
    if requested is None:
        error, offsets = coordinator.handle_fetch_offsets(group_id, None, require_stable)
        if error != ErrorCode.NONE:
            return error, []
        denied = denied_topics(ctx, AclOperation.DESCRIBE, (tp.topic for tp in offsets))
        return error, _topics({tp: o for tp, o in offsets.items() if tp.topic not in denied}, topic_cls, partition_cls)
    denied = denied_topics(ctx, AclOperation.DESCRIBE, (t.name for t in requested))
    error, offsets = coordinator.handle_fetch_offsets(
        group_id, _partitions([t for t in requested if t.name not in denied]), require_stable)
    if error != ErrorCode.NONE:
        return error, []
    unauthorized = {tp: OffsetAndMetadata(offset=-1)
                    for tp in _partitions([t for t in requested if t.name in denied]) or []}
    return error, (_topics(offsets, topic_cls, partition_cls)
                   + _topics(unauthorized, topic_cls, partition_cls, ErrorCode.TOPIC_AUTHORIZATION_FAILED))


def _partitions(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


UNSTABLE = OffsetAndMetadata(offset=-1)


def _topics(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | None], topic_cls: Any, partition_cls: Any,
    error: ErrorCode = ErrorCode.NONE,
) -> list[Any]:
    """Offsets by topic; None (the coordinator's answer for a pending commit under RequireStable)
    is offset -1 with UNSTABLE_OFFSET_COMMIT."""
    by_topic: dict[str, list[Any]] = {}
    for tp, committed in offsets.items():
        partition_error = error if committed is not None else ErrorCode.UNSTABLE_OFFSET_COMMIT
        committed = committed or UNSTABLE
        by_topic.setdefault(tp.topic, []).append(partition_cls(
            partition_index=tp.partition, committed_offset=committed.offset,
            committed_leader_epoch=committed.leader_epoch, metadata=committed.metadata, error_code=partition_error,
        ))
    return [topic_cls(name=name, partitions=partitions) for name, partitions in by_topic.items()]


def error_response(request: OffsetFetchRequest, version: int, error: ErrorCode) -> OffsetFetchResponse:
    """Kafka's getErrorResponse: ``error`` per group (v8), at the top (v2-7), or on every requested
    partition (v1, which has no top-level error)."""
    if version >= 8:
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            OffsetFetchResponse.OffsetFetchResponseGroup(group_id=group.group_id, error_code=error, topics=[])
            for group in request.groups
        ])
    if version >= 2:
        return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[])
    failed = {tp: OffsetAndMetadata(offset=-1) for tp in _partitions(request.topics) or []}
    return OffsetFetchResponse(topics=_topics(
        failed, OffsetFetchResponse.OffsetFetchResponseTopic, OffsetFetchResponse.OffsetFetchResponsePartition, error,
    ))
