"""Kafka's ACL vocabulary, as its admin API and its stores speak it: resource patterns, access
control entries, bindings and their filters with Kafka's match rules and ``toString`` forms, the
ACLs of one pattern at a stored version, and the PascalCase names of operations, permissions and
resource types (Kafka's ``common/acl`` and ``SecurityUtils``). No decision here: that is
`pybroker.security.acl_authorizer`'s; both it and `pybroker.security.acl_store` import this.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from pybroker.security.authorizer import (
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


# --- Kafka's text names (SecurityUtils: PascalCase; parsing also takes the upper-case form) -------


E = TypeVar("E", bound=Enum)


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _names(enum_type: type[E]) -> dict[str, E]:
    table: dict[str, E] = {}
    for member in enum_type:
        pascal = _pascal(member.name)
        table[pascal] = member
        table[pascal.upper()] = member
    return table


_OPERATIONS = _names(AclOperation)
_PERMISSIONS = _names(AclPermissionType)
_RESOURCE_TYPES = _names(ResourceType)


def operation_name(operation: AclOperation) -> str:
    """``Read``, ``DescribeConfigs``, ``All`` …"""
    return _pascal(operation.name)


def permission_type_name(permission: AclPermissionType) -> str:
    return _pascal(permission.name)


def resource_type_name(resource_type: ResourceType) -> str:
    """``Topic``, ``TransactionalId`` … (the ZooKeeper path segment)."""
    return _pascal(resource_type.name)


def _lookup(table: dict[str, E], name: str, unknown: E) -> E:
    value = table.get(name)
    if value is None:
        value = table.get(name.upper())
    return unknown if value is None else value


def parse_operation(name: str) -> AclOperation:
    """Kafka's ``SecurityUtils.operation``: ``Read`` or ``READ`` (``IdempotentWrite`` or
    ``IDEMPOTENTWRITE``); anything else is UNKNOWN."""
    return _lookup(_OPERATIONS, name, AclOperation.UNKNOWN)


def parse_permission_type(name: str) -> AclPermissionType:
    return _lookup(_PERMISSIONS, name, AclPermissionType.UNKNOWN)


def parse_resource_type(name: str) -> ResourceType:
    return _lookup(_RESOURCE_TYPES, name, ResourceType.UNKNOWN)


# --- bindings and filters --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource type, a name and how the name matches (LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, patternType={self.pattern_type.name})"

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``: resource type ANY, a null name and pattern types ANY
    (LITERAL or PREFIXED with an equal name) and MATCH (every pattern that applies to the name)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, patternType={self.pattern_type.name})"

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    @property
    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``User:alice``), from where (a host or ``*``), which operation, ALLOW or DENY."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """None principal or host, operation ANY and permission ANY match anything."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        principal = "<any>" if self.principal is None else self.principal
        host = "<any>" if self.host is None else self.host
        return (f"(principal={principal}, host={host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN


ANY_ENTRY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown


ANY_BINDING = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), ANY_ENTRY)


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """A pattern's ACL entries and the stored version they were read at (-1: nothing stored)."""

    acls: frozenset[AccessControlEntry]
    version: int = -1

    @property
    def exists(self) -> bool:
        return self.version >= 0


NO_ACLS = VersionedAcls(frozenset(), -1)
