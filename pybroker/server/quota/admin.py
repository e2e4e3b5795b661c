"""DescribeClientQuotas and AlterClientQuotas semantics (Kafka's ``ZkAdminManager``
``describeClientQuotas`` / ``alterClientQuotas``), over the store's ``clients`` and ``users``
entity configs, read from the store itself (ZooKeeper in a cluster).

Describe takes filter components (entity type, match type: exact name, default, any) and
``strict``; it answers every entity that has quota keys and matches: a component's type must be
present (with the name, the default, or any name), and with ``strict`` an entity may have no
other type. IP entities (``connection_creation_rate``) are not supported by pybroker: a filter
on ``ip`` describes nothing, an alteration of one is refused.

Alter validates each entry (entity shape, keys, values: Kafka's messages) and, unless
``validate_only``, replaces the entity's config map read-modify-write, keeping keys that are not
quotas (a user's SCRAM credentials). Alterations on one broker are serialized.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pybroker.common.errors import ErrorCode
from pybroker.controller.store import ControllerStore
from pybroker.server.quota.entities import (
    CLIENT_ID,
    IP,
    QUOTA_KEYS,
    USER,
    InvalidQuotaError,
    QuotaEntity,
    quota_values,
    validate_quota_value,
)

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2

_lock = asyncio.Lock()


class QuotaRequestError(Exception):
    """The whole request is refused: ``error`` with Kafka's message (None: Kafka sends none)."""

    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True)
class QuotaOp:
    key: str
    value: float
    remove: bool


async def describe_client_quotas(
    store: ControllerStore, components: Sequence[FilterComponent], strict: bool,
) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    """Every matching entity (the admin API's names: None for a default) with its quota values.

    Kafka first turns every component into a filter: an unknown match type (its
    IllegalArgumentException) or an exact match without a name (a NullPointerException) is an
    UNKNOWN_SERVER_ERROR without a message, whatever the other components."""
    for component in components:
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY) or (
                component.match_type == MATCH_EXACT and component.match is None):
            raise QuotaRequestError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    by_type: dict[str, FilterComponent] = {}
    for component in components:
        entity_type = component.entity_type
        if entity_type in (USER, CLIENT_ID, IP):
            if entity_type in by_type:
                what = "client" if entity_type == CLIENT_ID else entity_type
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Duplicate {what} filter component entity type")
            by_type[entity_type] = component
        elif entity_type == "":
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        else:
            raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{entity_type}' not supported")
    if IP in by_type:
        if USER in by_type or CLIENT_ID in by_type:
            raise QuotaRequestError(
                ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component "
                "should not be used with user or clientId filter component.")
        return []  # pybroker keeps no IP quotas
    entities: dict[QuotaEntity, Mapping[str, str]] = {}
    for entity_type in ("users", "clients"):
        for name, config in (await store.read_entity_configs(entity_type, None)).items():
            entity = QuotaEntity.from_store(entity_type, name)
            if entity is not None:
                entities[entity] = config
    results = []
    for entity, entity_config in sorted(entities.items(), key=lambda item: item[0].store_path()):
        values = quota_values(entity_config)
        if not values:
            continue
        names = entity.names()
        if all(_matches(by_type.get(t), t in names, names.get(t), strict) for t in (USER, CLIENT_ID)):
            results.append((names, values))
    return results


def _matches(component: FilterComponent | None, has_type: bool, name: str | None, strict: bool) -> bool:
    """ZkAdminManager's ``matches``: an exact name, the default (a null name), or any name of the
    component's type; without a component, the entity must lack the type only when strict."""
    if component is None:
        return not has_type or not strict
    if component.match_type == MATCH_EXACT:
        return has_type and name == component.match
    if component.match_type == MATCH_DEFAULT:
        return has_type and name is None
    return has_type


def _entity(components: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """Kafka's ``parseAndSanitizeQuotaEntity`` and the entity checks of ``alterEntityQuotas``."""
    if not components:
        raise InvalidQuotaError("Invalid empty client quota entity")
    named: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidQuotaError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise InvalidQuotaError(f"Empty {entity_type} not supported")
        if entity_type in named:
            raise InvalidQuotaError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        named[entity_type] = name
    if IP in named:
        if USER in named or CLIENT_ID in named:
            raise InvalidQuotaError("Invalid quota entity combination, IP entity should not be used with "
                                    "user/client ID entity.")
        raise InvalidQuotaError("IP quotas are not supported by pybroker")
    return QuotaEntity.from_names(named)


async def alter_client_quotas(
    store: ControllerStore, entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[QuotaOp]]],
    validate_only: bool,
) -> list[tuple[ErrorCode, str | None]]:
    """(error, message) per entry, in order (Kafka's ``alterClientQuotas``)."""
    results: list[tuple[ErrorCode, str | None]] = []
    async with _lock:
        for components, ops in entries:
            try:
                entity = _entity(components)
                entity_type, name = entity.store_path()
                config = dict((await store.read_entity_configs(entity_type, [name])).get(name, {}))
                seen: set[str] = set()
                for op in ops:
                    if op.key in seen:
                        raise InvalidQuotaError(f"Duplicate quota key {op.key} not updating quota for this entity")
                    seen.add(op.key)
                    if op.remove:
                        config.pop(op.key, None)
                    else:
                        config[op.key] = validate_quota_value(op.key, op.value)
                if not validate_only:
                    await store.set_entity_configs(entity_type, name, config)
                results.append((ErrorCode.NONE, None))
            except InvalidQuotaError as e:
                results.append((ErrorCode.INVALID_REQUEST, str(e)))
    return results


__all__ = ["QUOTA_KEYS", "FilterComponent", "QuotaOp", "QuotaRequestError", "alter_client_quotas",
           "describe_client_quotas"]
