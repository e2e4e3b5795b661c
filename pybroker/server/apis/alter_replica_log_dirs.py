"""AlterReplicaLogDirs (34): move replicas of this broker between its log dirs (KIP-113).

As Kafka's ``KafkaApis.handleAlterReplicaLogDirsRequest`` → ``ReplicaManager.alterReplicaLogDirs``:
needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition. Each
partition answers NONE once its move has started (or when it is in that dir already),
LOG_DIR_NOT_FOUND for a dir not in ``log.dirs``, KAFKA_STORAGE_ERROR for an offline dir or
partition, REPLICA_NOT_AVAILABLE for a partition not hosted here (the dir is remembered for
when it is created), UNKNOWN_TOPIC_OR_PARTITION for one that does not exist. The answer does not wait for the copy.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS
VERSIONS = (0, 2)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.CLUSTER)})


async def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    partition_dirs = {
        TopicPartition(topic.name, index): log_dir.path
        for log_dir in request.dirs for topic in log_dir.topics for index in topic.partitions
    }
    results = await ctx.services.replica_manager.alter_replica_log_dirs(partition_dirs)
    return _response(list(results.items()))


def _response(results: list[tuple[TopicPartition, ErrorCode]]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
    for tp, error in results:
        by_topic.setdefault(tp.topic, []).append(
            AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(partition_index=tp.partition, error_code=error)
        )
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
        for name, partitions in by_topic.items()
    ])


def error_response(request: AlterReplicaLogDirsRequest, version: int, error: ErrorCode) -> AlterReplicaLogDirsResponse:
    """Kafka's getErrorResponse: ``error`` for every partition of the request."""
    return _response([
        (TopicPartition(topic.name, index), error)
        for log_dir in request.dirs for topic in log_dir.topics for index in topic.partitions
    ])
