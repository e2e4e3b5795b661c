"""AlterClientQuotas (49): set or remove client quotas (KIP-546).

As Kafka's ``KafkaApis.handleAlterClientQuotasRequest`` in ZooKeeper mode: ALTER_CONFIGS on the
cluster, else CLUSTER_AUTHORIZATION_FAILED for every entry; any broker writes the change to the
store, which tells every broker. The semantics are `pybroker.server.quota.admin`'s.

Kafka holds an entry's entity as a ``java.util.HashMap`` sized for the entity's parts: a type
given twice keeps its last name, and the parts are checked and answered in that map's order
(``client-id`` before ``user``). Its answer is a map keyed by entity: entries naming the same
entity get one result (the last one's, in the first one's place).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.jvm_collections import java_hash_map_order, java_string_hash
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AlterClientQuotasRequest, AlterClientQuotasResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.quota.admin import QuotaOp
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = (0, 1)
AUTHORIZES = frozenset({(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)})

_Entry = AlterClientQuotasResponse.EntryData
_Entity = AlterClientQuotasResponse.EntityData


async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    entities = [entity_as_kafka_holds_it([(e.entity_type, e.entity_name) for e in entry.entity])
                for entry in request.entries]
    entries = [(entity, [QuotaOp(op.key, op.value, op.remove) for op in entry.ops])
               for entity, entry in zip(entities, request.entries, strict=True)]
    results = await ctx.services.admin_manager.alter_client_quotas(entries, request.validate_only)
    by_entity: dict[frozenset[tuple[str, str | None]], tuple[list[tuple[str, str | None]], ErrorCode, str | None]] = {}
    for entity, (error, message) in zip(entities, results, strict=True):
        key = frozenset(entity)
        by_entity[key] = (by_entity.get(key, (entity,))[0], error, message)
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        _Entry(error_code=error, error_message=message,
               entity=[_Entity(entity_type=t, entity_name=n) for t, n in entity])
        for entity, error, message in by_entity.values()
    ])


def entity_as_kafka_holds_it(parts: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The (type, name) parts of an entity as the ``java.util.HashMap`` Kafka's request parsing
    puts them in, created for ``len(parts)`` entries: a repeated type keeps its first place and
    last name, and the parts come in that map's order."""
    named: dict[str, str | None] = {}
    for entity_type, name in parts:
        named[entity_type] = name
    return [(t, named[t]) for t in java_hash_map_order(named, java_string_hash, initial_capacity=len(parts))]


def error_response(request: AlterClientQuotasRequest, version: int, error: ErrorCode) -> AlterClientQuotasResponse:
    """Kafka's getErrorResponse: ``error`` with its default message for every entry, its entity as
    the request gives it."""
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        _Entry(error_code=error, error_message=error.message,
               entity=[_Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in request.entries
    ])
