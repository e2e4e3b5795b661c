"""DescribeCluster (60): cluster id, controller and brokers.

The request itself is not authorized (as in Kafka); IncludeClusterAuthorizedOperations answers the
cluster's authorized-operations bitfield, 0 without DESCRIBE on the cluster.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from pybroker.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from pybroker.server.request_context import RequestContext, supported

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)
ENDPOINT_TYPE_BROKERS = 1
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
AUTHORIZES = supported(ResourceType.CLUSTER)  # DESCRIBE, and the bitfield's operations


def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.services
    if ctx.api_version >= 1 and request.endpoint_type != ENDPOINT_TYPE_BROKERS:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            endpoint_type=ENDPOINT_TYPE_BROKERS, cluster_id=broker.cluster_id, controller_id=-1, brokers=[],
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
    cache = broker.metadata_cache
    brokers = [
        DescribeClusterResponse.DescribeClusterBroker(broker_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
        for b in sorted(cache.live_brokers.values(), key=lambda b: b.broker_id)
        if (e := b.endpoint(ctx.listener_name)) is not None  # brokers on the request's listener
    ]
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=ENDPOINT_TYPE_BROKERS,
        cluster_id=broker.cluster_id, controller_id=cache.controller_id,
        brokers=brokers,
        cluster_authorized_operations=_cluster_operations(ctx, request),
    )


def _cluster_operations(ctx: RequestContext, request: DescribeClusterRequest) -> int:
    if not request.include_cluster_authorized_operations:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


def error_response(request: DescribeClusterRequest, version: int, error: ErrorCode) -> DescribeClusterResponse:
    """Kafka's getErrorResponse: ``error`` and nothing described."""
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=error, error_message=None, endpoint_type=ENDPOINT_TYPE_BROKERS,
        cluster_id="", controller_id=-1, brokers=[], cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
