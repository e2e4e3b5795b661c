"""OffsetFetch (9): a group's committed offsets (v8: several groups in one request).

A partition without a committed offset answers offset -1 and empty metadata; a null topic list
(v2+) asks for every offset the group has. With RequireStable (v7+, KIP-447), a partition whose
offset commit is pending (in flight, or in an open transaction) answers offset -1 and
UNSTABLE_OFFSET_COMMIT, so the consumer retries until the transaction ends; without it the
committed offset is returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from pybroker.server.group.records import OffsetAndMetadata
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = (1, 8)


def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    coordinator = ctx.broker.group_coordinator
    require_stable = ctx.api_version >= 7 and request.require_stable
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, offsets = coordinator.handle_fetch_offsets(group.group_id, _partitions(group.topics), require_stable)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=error,
                topics=_topics(offsets, OffsetFetchResponse.OffsetFetchResponseTopics,
                               OffsetFetchResponse.OffsetFetchResponsePartitions),
            ))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    requested = _partitions(request.topics)
    error, offsets = coordinator.handle_fetch_offsets(request.group_id, requested, require_stable)
    if error != ErrorCode.NONE:
        if ctx.api_version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[])
        # v1 has no top-level error: every requested partition carries it.
        failed = {tp: OffsetAndMetadata(offset=-1) for tp in requested or []}
        return OffsetFetchResponse(topics=_topics(
            failed, OffsetFetchResponse.OffsetFetchResponseTopic, OffsetFetchResponse.OffsetFetchResponsePartition,
            error,
        ))
    return OffsetFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=_topics(
        offsets, OffsetFetchResponse.OffsetFetchResponseTopic, OffsetFetchResponse.OffsetFetchResponsePartition,
    ))


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
