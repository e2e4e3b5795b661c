"""ListPartitionReassignments (46): the partition reassignments under way (KIP-455).

As in Kafka's ZooKeeper mode (``KafkaApis.handleListPartitionReassignmentsRequest`` →
``KafkaController.listPartitionReassignments``): needs DESCRIBE on the cluster; answered by the
active controller from its context (NOT_CONTROLLER at the top level from any other broker). A
null topic list lists every reassignment; otherwise the partitions named that are being
reassigned, each with its replica set and the replicas being added and removed.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.acl_apis import not_authorized_message
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.CLUSTER)})

_Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[],
            error_message=not_authorized_message("ListPartitionReassignments", ctx.principal,
                                                 ctx.connection.client_address))
    partitions = None if request.topics is None else [
        TopicPartition(topic.name, index) for topic in request.topics for index in topic.partition_indexes
    ]
    answer = await ctx.services.controller.list_partition_reassignments(partitions)
    if answer.error != ErrorCode.NONE:
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=answer.error,
                                                  error_message=answer.message, topics=[])
    by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for tp, assignment in sorted(answer.reassignments.items()):
        by_topic.setdefault(tp.topic, []).append(_Partition(
            partition_index=tp.partition, replicas=list(assignment.replicas),
            adding_replicas=list(assignment.adding_replicas), removing_replicas=list(assignment.removing_replicas),
        ))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
        topics=[_Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()],
    )


def error_response(
    request: ListPartitionReassignmentsRequest, version: int, error: ErrorCode
) -> ListPartitionReassignmentsResponse:
    """Kafka's getErrorResponse: ``error`` at the top level, the partitions asked about listed
    without replicas."""
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=error, error_message=None,
        topics=[
            _Topic(name=topic.name, partitions=[_Partition(partition_index=index) for index in topic.partition_indexes])
            for topic in request.topics or []
        ],
    )
