"""DescribeCluster (60): cluster id, controller and brokers."""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)
ENDPOINT_TYPE_BROKERS = 1
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    if ctx.api_version >= 1 and request.endpoint_type != ENDPOINT_TYPE_BROKERS:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            endpoint_type=request.endpoint_type, cluster_id=broker.cluster_id, controller_id=-1, brokers=[],
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
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def error_response(request: DescribeClusterRequest, version: int, error: ErrorCode) -> DescribeClusterResponse:
    """Kafka's getErrorResponse: ``error`` and nothing described."""
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=error, error_message=None, endpoint_type=ENDPOINT_TYPE_BROKERS,
        cluster_id="", controller_id=-1, brokers=[], cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
