"""OffsetCommit (8): store a group's committed offsets in ``__consumer_offsets``.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the rest go to the coordinator,
which checks the member and generation (simple groups commit with generation -1). OffsetCommit
v2-v4's retention time becomes the commit's expire timestamp, as in Kafka.

Authorization (Kafka's ``handleOffsetCommitRequest``): READ on the group, else every partition
answers GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its partitions answer
TOPIC_AUTHORIZATION_FAILED (before the unknown-topic check) and the others are committed.
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import answer, denied_topics, offset_commits
from pybroker.server.replica_manager import now_ms
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = (2, 8)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC)})
DEFAULT_RETENTION_TIME = -1


def handle(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse | asyncio.Future[OffsetCommitResponse]:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    cache = ctx.services.metadata_cache
    now = now_ms()
    retention = request.retention_time_ms if version <= 4 else DEFAULT_RETENTION_TIME
    commits = offset_commits(
        cache, request.topics, version >= 6, now,
        now + retention if retention != DEFAULT_RETENTION_TIME else None,
        denied_topics(ctx, AclOperation.READ, (t.name for t in request.topics)),
    )
    offsets = commits.offsets

    def build(results: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponse:
        by_topic: dict[str, list[OffsetCommitResponse.OffsetCommitResponsePartition]] = {}
        for tp, error in commits.merged(results).items():
            by_topic.setdefault(tp.topic, []).append(OffsetCommitResponse.OffsetCommitResponsePartition(
                partition_index=tp.partition, error_code=error,
            ))
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ])

    if not offsets:
        return build({})
    return answer(
        ctx,
        lambda respond: ctx.services.group_coordinator.handle_commit_offsets(
            request.group_id,
            request.member_id,
            request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch,
            offsets,
            respond,
        ),
        build,
    )


def error_response(request: OffsetCommitRequest, version: int, error: ErrorCode) -> OffsetCommitResponse:
    """Kafka's getErrorResponse: ``error`` on every partition."""
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        OffsetCommitResponse.OffsetCommitResponseTopic(name=topic.name, partitions=[
            OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
            for p in topic.partitions
        ])
        for topic in request.topics
    ])
