"""AlterClientQuotas (49): set or remove client quotas (KIP-546).

As Kafka's ``KafkaApis.handleAlterClientQuotasRequest`` in ZooKeeper mode: ALTER_CONFIGS on the
cluster, else CLUSTER_AUTHORIZATION_FAILED for every entry; any broker writes the change to the
store, which tells every broker. The semantics are `pybroker.server.quota.admin`'s.
"""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import AlterClientQuotasRequest, AlterClientQuotasResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.quota.admin import QuotaOp, alter_client_quotas
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = (0, 1)
AUTHORIZES = frozenset({(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)})

_Entry = AlterClientQuotasResponse.EntryData
_Entity = AlterClientQuotasResponse.EntityData


async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    entries = [
        ([(e.entity_type, e.entity_name) for e in entry.entity],
         [QuotaOp(op.key, op.value, op.remove) for op in entry.ops])
        for entry in request.entries
    ]
    results = await alter_client_quotas(ctx.broker.store, entries, request.validate_only)
    return _response(request, results)


def _response(request: AlterClientQuotasRequest, results: list[tuple[ErrorCode, str | None]]) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        _Entry(error_code=error, error_message=message,
               entity=[_Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry, (error, message) in zip(request.entries, results, strict=True)
    ])


def error_response(request: AlterClientQuotasRequest, version: int, error: ErrorCode) -> AlterClientQuotasResponse:
    """Kafka's getErrorResponse: ``error`` for every entry."""
    return _response(request, [(error, None)] * len(request.entries))
