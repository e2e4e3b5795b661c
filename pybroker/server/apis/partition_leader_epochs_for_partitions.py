"""PartitionLeaderEpochsForPartitions (30002, KIP-253): the epoch boundaries the controller recorded.

Answered from this broker's metadata cache (UpdateMetadata carries each partition's
``leaderEpochAfterCreation`` and ``leaderEpochBeforeDeletion``): per partition asked about, both
maps as (partition, leader epoch) lists, empty when the partition has none; a partition the
cache does not know is UNKNOWN_TOPIC_OR_PARTITION.

Authorized as OffsetForLeaderEpoch (pybroker's choice; Kafka has no such API): CLUSTER_ACTION on
the cluster, else DESCRIBE per topic; a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    PartitionLeaderEpochsForPartitionsRequest,
    PartitionLeaderEpochsForPartitionsResponse,
)
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.offset_for_leader_epoch import denied_topics
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER), (AclOperation.DESCRIBE, ResourceType.TOPIC)})

R = PartitionLeaderEpochsForPartitionsResponse


def _epochs(epochs: dict[int, int]) -> list[R.PartitionLeaderEpoch]:
    return [R.PartitionLeaderEpoch(partition_index=p, leader_epoch=e) for p, e in sorted(epochs.items())]


def handle(ctx: RequestContext, request: PartitionLeaderEpochsForPartitionsRequest) -> R:
    cache = ctx.services.metadata_cache
    denied = denied_topics(ctx, [t.name for t in request.topics])
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            if topic.name in denied:
                partitions.append(R.ResponsePartition(partition_index=index,
                                                      error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            state = cache.partition(TopicPartition(topic.name, index))
            if state is None:
                partitions.append(R.ResponsePartition(partition_index=index,
                                                      error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            partitions.append(R.ResponsePartition(
                partition_index=index, error_code=ErrorCode.NONE,
                leader_epochs_after_creation=_epochs(state.leader_epochs_after_creation),
                leader_epochs_before_deletion=_epochs(state.leader_epochs_before_deletion),
            ))
        topics.append(R.ResponseTopic(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


def error_response(request: PartitionLeaderEpochsForPartitionsRequest, version: int, error: ErrorCode) -> R:
    return R(throttle_time_ms=0, topics=[
        R.ResponseTopic(name=topic.name, partitions=[
            R.ResponsePartition(partition_index=index, error_code=error) for index in topic.partition_indexes
        ]) for topic in request.topics
    ])
