"""AlterPartitionReassignments (45): an administrator moves partitions' replicas (KIP-455).

As in Kafka's ZooKeeper mode (``KafkaApis.handleAlterPartitionReassignmentsRequest`` →
``KafkaController.alterPartitionReassignments``): needs ALTER on the cluster; the request is
handed to this broker's controller, which starts each reassignment on its event queue
(`pybroker.controller.reassignment`) and answers once they are started; any broker but the
active controller answers NOT_CONTROLLER at the top level (clients send it to the controller
Metadata names). A null replica list cancels the partition's reassignment. Per-partition errors
and messages are Kafka's (INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
UNKNOWN_TOPIC_OR_PARTITION). A partition named twice counts once (the last one), as in Kafka's
map of the request.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.acl_apis import not_authorized_message
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.CLUSTER)})

_Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_Partition = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, not_authorized_message(
            "AlterPartitionReassignments", ctx.principal, ctx.connection.client_address))
    reassignments: dict[TopicPartition, list[int] | None] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            replicas = partition.replicas
            reassignments[TopicPartition(topic.name, partition.partition_index)] = (
                None if replicas is None else list(replicas))
    answer = await ctx.services.controller.alter_partition_reassignments(reassignments)
    if answer.error != ErrorCode.NONE:
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=answer.error,
                                                   error_message=answer.message, responses=[])
    by_topic: dict[str, list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]] = {}
    for tp, (code, message) in answer.results.items():
        by_topic.setdefault(tp.topic, []).append(
            _Partition(partition_index=tp.partition, error_code=code, error_message=message))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
        responses=[_Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()],
    )


def error_response(
    request: AlterPartitionReassignmentsRequest, version: int, error: ErrorCode
) -> AlterPartitionReassignmentsResponse:
    """Kafka's getErrorResponse: ``error`` at the top level and for every partition asked about."""
    return _error_response(request, error, None)


def _error_response(
    request: AlterPartitionReassignmentsRequest, error: ErrorCode, message: str | None
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=error, error_message=message,
        responses=[
            _Topic(name=topic.name, partitions=[
                _Partition(partition_index=p.partition_index, error_code=error, error_message=message)
                for p in topic.partitions
            ])
            for topic in request.topics
        ],
    )
