"""DescribeLogDirs (35): this broker's log dirs and the replicas in each (KIP-113).

As Kafka's ``KafkaApis.handleDescribeLogDirsRequest`` → ``ReplicaManager.describeLogDirs``:
needs DESCRIBE on the cluster, else the answer is empty with CLUSTER_AUTHORIZATION_FAILED at the
top level (v3+; v0-2 just get no dirs). Every configured dir is listed: an offline one with
KAFKA_STORAGE_ERROR and nothing else; an online one with the asked partitions (all for a null
topic list) it holds, current and future logs, each with its size in bytes, its offset lag and
whether it is a future log, and (v4) the volume's total and usable bytes.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.replica_manager import LogDirDescription
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
VERSIONS = (0, 4)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.CLUSTER)})

_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
_Partition = DescribeLogDirsResponse.DescribeLogDirsPartition


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    partitions = None if request.topics is None else {
        TopicPartition(topic.topic, index) for topic in request.topics for index in topic.partitions
    }
    described = ctx.services.replica_manager.describe_log_dirs(partitions)
    return DescribeLogDirsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, results=[_result(d) for d in described]
    )


def _result(described: LogDirDescription) -> DescribeLogDirsResponse.DescribeLogDirsResult:
    by_topic: dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]] = {}
    for replica in described.replicas:
        by_topic.setdefault(replica.topic_partition.topic, []).append(_Partition(
            partition_index=replica.topic_partition.partition, partition_size=replica.size,
            offset_lag=replica.offset_lag, is_future_key=replica.is_future,
        ))
    return _Result(
        error_code=described.error, log_dir=described.log_dir,
        topics=[_Topic(name=name, partitions=partitions) for name, partitions in sorted(by_topic.items())],
        total_bytes=described.total_bytes, usable_bytes=described.usable_bytes,
    )


def error_response(request: DescribeLogDirsRequest, version: int, error: ErrorCode) -> DescribeLogDirsResponse:
    """Kafka's getErrorResponse: no dirs, ``error`` at the top level (v3+)."""
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=error, results=[])
