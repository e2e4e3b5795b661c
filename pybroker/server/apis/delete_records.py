"""DeleteRecords (21): move partitions' log start offsets forward (KIP-107), v3 with KIP-1343.

Per partition, in Kafka's order: DELETE on the topic (29), known partition (3), then the replica
manager: internal topic (17), not hosted / not leader (6), cleanup.policy without delete (44),
offset out of range (1; -1 means the high watermark). v3's ``LeaderOnly`` answers once the leader
has moved its log start offset; otherwise the answer waits in the delete-records purgatory for the
low watermark (TimeoutMs, then REQUEST_TIMED_OUT). A partition named twice counts once.
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.replica_manager import DeleteRecordsResult
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.DELETE_RECORDS
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.DELETE, ResourceType.TOPIC)})


def handle(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse | asyncio.Future[DeleteRecordsResponse]:
    broker = ctx.services
    leader_only = ctx.api_version >= 3 and request.leader_only
    order: dict[TopicPartition, None] = {}
    failed: dict[TopicPartition, DeleteRecordsResult] = {}
    offsets: dict[TopicPartition, int] = {}
    for topic in request.topics:
        allowed = ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            order[tp] = None
            if not allowed:
                failed[tp] = DeleteRecordsResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif not broker.metadata_cache.contains(tp):
                failed[tp] = DeleteRecordsResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                offsets[tp] = p.offset

    def build(results: dict[TopicPartition, DeleteRecordsResult]) -> DeleteRecordsResponse:
        by_topic: dict[str, list[DeleteRecordsResponse.DeleteRecordsPartitionResult]] = {}
        for tp in order:
            result = failed.get(tp) or results[tp]
            by_topic.setdefault(tp.topic, []).append(DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=tp.partition, low_watermark=result.low_watermark,
                leader_log_start_offset=result.leader_log_start_offset, error_code=result.error,
            ))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=[
            DeleteRecordsResponse.DeleteRecordsTopicResult(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ])

    if not offsets:
        return build({})
    results = broker.replica_manager.delete_records(request.timeout_ms, offsets, leader_only)
    if isinstance(results, dict):
        return build(results)
    response: asyncio.Future[DeleteRecordsResponse] = asyncio.get_running_loop().create_future()
    results.add_done_callback(lambda done: None if response.done() else response.set_result(build(done.result())))
    return response


def error_response(request: DeleteRecordsRequest, version: int, error: ErrorCode) -> DeleteRecordsResponse:
    """Kafka's getErrorResponse: ``error`` and unknown watermarks on every partition."""
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name, partitions=[
            DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, leader_log_start_offset=-1, error_code=error,
            )
            for p in topic.partitions
        ])
        for topic in request.topics
    ])
