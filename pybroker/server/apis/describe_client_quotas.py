"""DescribeClientQuotas (48): the client quotas matching a filter (KIP-546).

As Kafka's ``KafkaApis.handleDescribeClientQuotasRequest``: DESCRIBE_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED; any broker answers, reading the store itself. A bad filter is
answered with its error and message at the top level and null entries (an unknown match type,
or an exact match without a name: UNKNOWN_SERVER_ERROR without a message, as Kafka's request
parsing fails); a success has an empty message. The semantics are
`pybroker.server.quota.admin`'s. An entity's values come in the order of the Scala
``mutable.HashMap`` ZooKeeper-mode Kafka iterates (its clients keep that order for keys that
share a bucket of their own maps: kafka-configs prints ``request_percentage=50.0,
producer_byte_rate=100.0``).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.jvm_collections import java_string_hash, scala_hash_map_order
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.quota.admin import FilterComponent, QuotaRequestError
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
VERSIONS = (0, 1)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)})

_Entry = DescribeClientQuotasResponse.EntryData
_Entity = DescribeClientQuotasResponse.EntityData
_Value = DescribeClientQuotasResponse.ValueData


async def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = await ctx.services.admin_manager.describe_client_quotas(components, request.strict)
    except QuotaRequestError as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=e.error, error_message=e.message,
                                            entries=None)
    # Kafka's generated response starts with an empty message, and success sets none.
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
        entries=[
            _Entry(entity=[_Entity(entity_type=t, entity_name=n) for t, n in names.items()],
                   values=[_Value(key=k, value=values[k]) for k in scala_hash_map_order(values, java_string_hash)])
            for names, values in found
        ],
    )


def error_response(request: DescribeClientQuotasRequest, version: int, error: ErrorCode) -> DescribeClientQuotasResponse:
    """Kafka's getErrorResponse: the error at the top level, no entries (null)."""
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error, error_message=None, entries=None)
