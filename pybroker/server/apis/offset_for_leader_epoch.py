"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, for truncation decisions.

CLUSTER_ACTION on the cluster (a follower) answers every topic; otherwise (KIP-320, a consumer)
each topic needs DESCRIBE, and a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED,
after the authorized topics, as in Kafka's ``handleOffsetForLeaderEpochRequest``.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = (0, 4)
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER), (AclOperation.DESCRIBE, ResourceType.TOPIC)})

_Result = OffsetForLeaderEpochResponse.EpochEndOffset


def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    denied = denied_topics(ctx, [t.topic for t in request.topics])
    topics = []
    unauthorized = []
    for topic in request.topics:
        if topic.topic in denied:
            unauthorized.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic, partitions=[
                _Result(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition, leader_epoch=-1,
                        end_offset=-1)
                for p in topic.partitions
            ]))
            continue
        results = [_end_offset(ctx, TopicPartition(topic.topic, p.partition), p) for p in topic.partitions]
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics + unauthorized)


def denied_topics(ctx: RequestContext, names: list[str]) -> set[str]:
    """The topics refused: none with CLUSTER_ACTION on the cluster (asked first), else those
    without DESCRIBE. A handler calling this declares both pairs."""
    if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return set()
    return {name for name in dict.fromkeys(names) if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)}


def _end_offset(ctx: RequestContext, tp: TopicPartition, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition) -> _Result:
    def error(code: ErrorCode) -> _Result:
        return _Result(error_code=code, partition=tp.partition, leader_epoch=-1, end_offset=-1)

    partition = ctx.services.replica_manager.get_partition(tp)
    if partition is None:
        return error(ctx.services.replica_manager.missing_partition_error(tp))
    try:
        epoch, end_offset = partition.last_offset_for_leader_epoch(
            p.current_leader_epoch, p.leader_epoch
        )
    except KafkaError as e:
        return error(e.code)
    return _Result(error_code=ErrorCode.NONE, partition=tp.partition, leader_epoch=epoch, end_offset=end_offset)


def error_response(
    request: OffsetForLeaderEpochRequest, version: int, error: ErrorCode
) -> OffsetForLeaderEpochResponse:
    """Kafka's getErrorResponse: ``error`` and unknown epoch and offset on every partition."""
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic, partitions=[
            _Result(error_code=error, partition=p.partition, leader_epoch=-1, end_offset=-1) for p in topic.partitions
        ])
        for topic in request.topics
    ])
