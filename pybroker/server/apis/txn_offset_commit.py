"""TxnOffsetCommit (28): a transactional producer commits a group's offsets in its transaction.

Partitions of unknown topics or unknown partitions get UNKNOWN_TOPIC_OR_PARTITION; the rest go to
the group coordinator, which writes them as a transactional batch of the producer, pending until
the transaction's marker (KIP-98), and checks v3's member id, group instance id and generation
(KIP-447). As Kafka, v0-v1 answer COORDINATOR_NOT_AVAILABLE instead of
COORDINATOR_LOAD_IN_PROGRESS, which producers before 2.0 do not expect.

Authorization, as Kafka's ``handleTxnOffsetCommitRequest``: WRITE on the transactional id (else
every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else
GROUP_AUTHORIZATION_FAILED), then READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its
partitions, before the unknown-topic check).
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import answer, denied_topics, offset_commits
from pybroker.server.replica_manager import now_ms
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = (0, 3)
AUTHORIZES = frozenset({
    (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    (AclOperation.READ, ResourceType.GROUP),
    (AclOperation.READ, ResourceType.TOPIC),
})


def handle(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse | asyncio.Future[TxnOffsetCommitResponse]:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    cache = ctx.services.metadata_cache
    now = now_ms()
    commits = offset_commits(cache, request.topics, version >= 2, now,
                             denied=denied_topics(ctx, AclOperation.READ, (t.name for t in request.topics)))
    offsets = commits.offsets

    def build(results: dict[TopicPartition, ErrorCode]) -> TxnOffsetCommitResponse:
        return _response(commits.order, commits.merged(results), version)

    if not offsets:
        return build({})
    return answer(
        ctx,
        lambda respond: ctx.services.group_coordinator.handle_txn_commit_offsets(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            request.member_id if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            request.generation_id if version >= 3 else -1,
            offsets,
            respond,
        ),
        build,
    )


def _response(
    order: list[TopicPartition], errors: dict[TopicPartition, ErrorCode], version: int
) -> TxnOffsetCommitResponse:
    by_topic: dict[str, list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]] = {}
    for tp in order:
        error = errors[tp]
        if version < 2 and error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
            partition_index=tp.partition, error_code=error,
        ))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=name, partitions=partitions)
        for name, partitions in by_topic.items()
    ])


def error_response(request: TxnOffsetCommitRequest, version: int, error: ErrorCode) -> TxnOffsetCommitResponse:
    """Kafka's getErrorResponse: ``error`` on every partition."""
    order = [TopicPartition(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions]
    return _response(order, dict.fromkeys(order, error), version)
