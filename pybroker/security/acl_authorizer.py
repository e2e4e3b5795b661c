"""Kafka's ACL authorizer: the decision every request asks, over the ACLs of `pybroker.security.acl`.

Owns `AclAuthorizer`, Kafka's ``AclAuthorizer`` (ZooKeeper mode; KRaft's ``StandardAuthorizer`` decides
the same way): super users, LITERAL / wildcard ``*`` / PREFIXED patterns, ``User:*``, hosts as
Java's address strings, DENY before ALLOW, DESCRIBE implied by READ/WRITE/DELETE/ALTER and
DESCRIBE_CONFIGS by ALTER_CONFIGS (for ALLOW only), ``allow.everyone.if.no.acl.found`` when a
resource has no ACL at all, and KIP-679's ``authorize_by_resource_type``.

The decision reads only an in-memory cache: LITERAL ACLs by (resource type, name), PREFIXED ones
by resource type and name with the set of prefix lengths present (so a check costs one dict
lookup per distinct prefix length), and Kafka's ``resourceCache`` (the names per ACL entry,
resource type and pattern type) for KIP-679. The cache is filled and kept current by an
`AclStore` (`pybroker.security.acl_store`: ZooKeeper in cluster mode, a file for the single
broker). Changes go through `create_acls` / `delete_acls`, which write the store conditionally,
with Kafka's retry rule (up to 10 retries, 100-150 ms apart, re-reading the stored ACLs), update
this broker's cache and notify the other brokers. Writes and change processing are serialized
by one lock (Kafka's ``lock synchronized``); the decision never waits for it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pybroker.common.errors import ErrorCode
from pybroker.security.acl import (
    ANY_BINDING,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
    VersionedAcls,
)
from pybroker.security.authorizer import (
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pybroker.security.principal import KafkaPrincipal, PrincipalFormatError

if TYPE_CHECKING:
    from pybroker.security.acl_store import AclStore

__all__ = [
    "ACL_AUTHORIZER_CLASS_NAMES", "AclAuthorizer", "AclError", "parse_super_users",
]

log = logging.getLogger(__name__)

#: ``authorizer.class.name`` values that select this authorizer (ZooKeeper mode and KRaft).
ACL_AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})

MAX_UPDATE_RETRIES = 10  # Kafka's maxUpdateRetries
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_JITTER_MS = 50

_OP = AclOperation
#: ALLOW ACLs of these operations also allow the key (Kafka's implied operations).
_ALLOWED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _OP.DESCRIBE: frozenset({_OP.DESCRIBE, _OP.READ, _OP.WRITE, _OP.DELETE, _OP.ALTER, _OP.ALL}),
    _OP.DESCRIBE_CONFIGS: frozenset({_OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS, _OP.ALL}),
}


def parse_super_users(value: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users`` as Kafka reads it: ``;``-separated ``Type:name``, each trimmed; a bad
    entry raises `PrincipalFormatError` (Java's ``split`` drops trailing empty entries)."""
    text = (value or "").strip()
    if not text:
        return frozenset()
    parts = text.split(";")
    while parts and parts[-1] == "":
        parts.pop()
    return frozenset(KafkaPrincipal.parse(part.strip()) for part in parts)




@dataclass(frozen=True, slots=True)
class AclError:
    """A failed creation or deletion: Kafka's error code and message (None: the default text)."""

    code: ErrorCode
    message: str | None = None


class AclUpdateFailed(Exception):
    """The store refused ``MAX_UPDATE_RETRIES`` conditional writes in a row."""


# --- the authorizer --------------------------------------------------------------------------------


class AclAuthorizer:
    """The `Authorizer` of ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``."""

    def __init__(
        self,
        store: AclStore,
        super_users: Iterable[KafkaPrincipal] = (),
        allow_everyone_if_no_acl_found: bool = False,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._sleep = sleep
        self._lock = asyncio.Lock()
        # Every stored pattern with ACLs (Kafka's aclCache).
        self._cache: dict[ResourcePattern, VersionedAcls] = {}
        # What the decision reads: LITERAL entries by (type, name); PREFIXED by type, then name,
        # with the distinct prefix lengths of each type in increasing order.
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        # Kafka's resourceCache (KIP-679): resource names per (entry, resource type, pattern type).
        self._names: dict[tuple[AccessControlEntry, ResourceType, PatternType], set[str]] = {}

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Kafka's ``configure``: the store's paths and change listeners first, then the whole
        cache loaded (changes noticed meanwhile are applied after it, re-read)."""
        async with self._lock:
            await self.store.start(self._on_change)
            for pattern, versioned in await self.store.load_all():
                self._update_cache(pattern, versioned)
        log.info("ACL authorizer loaded %d resource pattern(s) with ACLs", len(self._cache))

    async def close(self) -> None:
        await self.store.close()

    async def _on_change(self, pattern: ResourcePattern) -> None:
        """A change notification (this broker's or another's): re-read the pattern's ACLs."""
        async with self._lock:
            versioned = await self.store.read(pattern)
            log.debug("ACL change for %s: %d entries, version %d", pattern, len(versioned.acls), versioned.version)
            self._update_cache(pattern, versioned)

    # --- the decision ---------------------------------------------------------------------------

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        sets = []
        literal = self._literal
        found = literal.get((resource_type, name))
        if found:
            sets.append(found)
        if name != WILDCARD_RESOURCE:
            found = literal.get((resource_type, WILDCARD_RESOURCE))
            if found:
                sets.append(found)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            size = len(name)
            for length in self._prefix_lengths[resource_type]:
                if length > size:
                    break
                found = prefixed.get(name[:length])
                if found:
                    sets.append(found)
        if not sets:
            return self.allow_everyone_if_no_acl_found
        who = str(principal)
        deny, allow = AclPermissionType.DENY, AclPermissionType.ALLOW
        for entries in sets:
            for ace in entries:
                if (ace.permission_type == deny
                        and (ace.operation == operation or ace.operation == AclOperation.ALL)
                        and (ace.principal == who or ace.principal == WILDCARD_PRINCIPAL)
                        and (ace.host == host or ace.host == WILDCARD_HOST)):
                    return False
        allowed_by = _ALLOWED_BY.get(operation)
        for entries in sets:
            for ace in entries:
                if (ace.permission_type == allow
                        and (ace.operation == operation or ace.operation == AclOperation.ALL
                             or (allowed_by is not None and ace.operation in allowed_by))
                        and (ace.principal == who or ace.principal == WILDCARD_PRINCIPAL)
                        and (ace.host == host or ace.host == WILDCARD_HOST)):
                    return True
        return False

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """KIP-679 (``AclAuthorizer.authorizeByResourceType``): whether ``operation`` is allowed
        on at least one resource of ``resource_type``; implied operations do not count."""
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"Must specify a non-filter operation type: {operation.name}")
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"Must specify a non-filter resource type: {resource_type.name}")
        if principal in self.super_users:
            return True
        who = str(principal)
        deny_literals = self._matching_names(who, host, operation, AclPermissionType.DENY, resource_type, PatternType.LITERAL)
        if any(WILDCARD_RESOURCE in names for names in deny_literals):
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = self._matching_names(who, host, operation, AclPermissionType.DENY, resource_type, PatternType.PREFIXED)
        allow_literals = self._matching_names(who, host, operation, AclPermissionType.ALLOW, resource_type, PatternType.LITERAL)
        allow_prefixes = self._matching_names(who, host, operation, AclPermissionType.ALLOW, resource_type, PatternType.PREFIXED)
        if not deny_literals and not deny_prefixes:
            return bool(allow_literals or allow_prefixes)

        def dominated(name: str) -> bool:  # some DENY prefix is a prefix of ``name``
            return any(name[:i] in names for i in range(1, len(name) + 1) for names in deny_prefixes)

        if any(not dominated(prefix) for names in allow_prefixes for prefix in names):
            return True
        for names in allow_literals:
            for literal in names:
                if literal == WILDCARD_RESOURCE:
                    return True
                if not any(literal in denied for denied in deny_literals) and not dominated(literal):
                    return True
        return False

    def _matching_names(
        self, who: str, host: str, operation: AclOperation, permission: AclPermissionType,
        resource_type: ResourceType, pattern_type: PatternType,
    ) -> list[set[str]]:
        found = []
        for principal in {who, WILDCARD_PRINCIPAL}:
            for h in {host, WILDCARD_HOST}:
                for op in {operation, AclOperation.ALL}:
                    names = self._names.get((AccessControlEntry(principal, h, op, permission), resource_type, pattern_type))
                    if names:
                        found.append(names)
        return found

    # --- reading and changing ACLs --------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter = ANY_BINDING) -> list[AclBinding]:
        """Every cached binding the filter matches (DescribeAcls)."""
        out = []
        for pattern, versioned in self._cache.items():
            if not binding_filter.pattern_filter.matches(pattern):
                continue
            for ace in sorted(versioned.acls, key=_entry_order):
                if binding_filter.entry_filter.matches(ace):
                    out.append(AclBinding(pattern, ace))
        return out

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclError | None]:
        """Kafka's ``createAcls``: one result per binding (None: created, or there already)."""
        results: list[AclError | None] = [None] * len(bindings)
        groups: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            if binding.is_unknown or "/" in binding.pattern.name:
                results[i] = AclError(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
            else:
                groups.setdefault(binding.pattern, []).append(i)
        if not groups:
            return results
        async with self._lock:
            for pattern, indexes in groups.items():
                entries = frozenset(bindings[i].entry for i in indexes)
                try:
                    for entry in entries:
                        KafkaPrincipal.parse(entry.principal)  # Kafka's AclEntry: a bad principal fails the group
                    await self._update_resource_acls(pattern, functools.partial(_added, entries))
                except (PrincipalFormatError, AclUpdateFailed) as e:
                    log.info("Failed to create ACLs for %s: %s", pattern, e)
                    for i in indexes:
                        results[i] = AclError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
        return results

    async def delete_acls(
        self, filters: list[AclBindingFilter]
    ) -> list[list[tuple[AclBinding, AclError | None]]]:
        """Kafka's ``deleteAcls``: per filter, the bindings it deleted (a binding several filters
        match is reported under the first), each with None or the error its write failed with."""
        deleted: dict[AclBinding, int] = {}
        errors: dict[AclBinding, AclError] = {}
        async with self._lock:
            resources = dict.fromkeys(self._cache)
            for binding_filter in filters:
                pattern_filter = binding_filter.pattern_filter
                if pattern_filter.matches_at_most_one:
                    for pattern in _filter_to_resources(pattern_filter):
                        resources.setdefault(pattern)
            for pattern in resources:
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(pattern)]
                if not matching:
                    continue
                being_deleted: dict[AclBinding, int] = {}

                def remove(current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern,
                           matching: list[tuple[int, AclBindingFilter]] = matching,
                           being_deleted: dict[AclBinding, int] = being_deleted) -> frozenset[AccessControlEntry]:
                    removed = set()
                    for ace in current:
                        for index, binding_filter in matching:
                            if binding_filter.entry_filter.matches(ace):
                                being_deleted.setdefault(AclBinding(pattern, ace), index)
                                removed.add(ace)
                                break
                    return current - removed

                try:
                    await self._update_resource_acls(pattern, remove)
                except AclUpdateFailed as e:
                    log.info("Failed to delete ACLs of %s: %s", pattern, e)
                    for binding in being_deleted:
                        errors.setdefault(binding, AclError(ErrorCode.UNKNOWN_SERVER_ERROR, None))
                for binding, index in being_deleted.items():
                    deleted.setdefault(binding, index)
        results: list[list[tuple[AclBinding, AclError | None]]] = [[] for _ in filters]
        for binding, index in deleted.items():
            results[index].append((binding, errors.get(binding)))
        return results

    async def _update_resource_acls(
        self, pattern: ResourcePattern,
        new_acls: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> bool:
        """Kafka's ``updateResourceAcls``: write ``new_acls(current)`` conditionally on the stored
        version, re-reading and retrying on a conflict; on a change, update the cache and notify.
        Returns whether the ACLs changed. Call with the lock held."""
        store = self.store
        current = self._cache.get(pattern) or await store.read(pattern)
        retries = 0
        while True:
            wanted = frozenset(new_acls(current.acls))
            if wanted:
                if current.exists:
                    version = await store.set(pattern, wanted, current.version)
                else:
                    version = await store.create(pattern, wanted)
            else:
                version = 0 if await store.delete(pattern, current.version) else None
            if version is not None:
                written = VersionedAcls(wanted, version if wanted else -1)
                break
            if retries >= MAX_UPDATE_RETRIES:
                raise AclUpdateFailed(f"Failed to update ACLs for {pattern} after trying a maximum of "
                                      f"{MAX_UPDATE_RETRIES} times")
            retries += 1
            await self._sleep((RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS)) / 1000)
            current = await store.read(pattern)
        self._update_cache(pattern, written)
        if written.acls != current.acls:
            log.info("Updated ACLs for %s with new version %d", pattern, written.version)
            await store.notify_change(pattern)
            return True
        return False

    def _update_cache(self, pattern: ResourcePattern, versioned: VersionedAcls) -> None:
        old = self._cache.get(pattern)
        old_acls = old.acls if old is not None else frozenset()
        new_acls = versioned.acls
        key_type, key_pattern = pattern.resource_type, pattern.pattern_type
        for ace in new_acls - old_acls:
            self._names.setdefault((ace, key_type, key_pattern), set()).add(pattern.name)
        for ace in old_acls - new_acls:
            names = self._names.get((ace, key_type, key_pattern))
            if names is not None:
                names.discard(pattern.name)
                if not names:
                    del self._names[(ace, key_type, key_pattern)]
        if new_acls:
            self._cache[pattern] = versioned
        else:
            self._cache.pop(pattern, None)
        if key_pattern == PatternType.LITERAL:
            if new_acls:
                self._literal[(key_type, pattern.name)] = new_acls
            else:
                self._literal.pop((key_type, pattern.name), None)
        elif key_pattern == PatternType.PREFIXED:
            prefixed = self._prefixed.setdefault(key_type, {})
            if new_acls:
                prefixed[pattern.name] = new_acls
            else:
                prefixed.pop(pattern.name, None)
            if prefixed:
                self._prefix_lengths[key_type] = tuple(sorted({len(name) for name in prefixed}))
            else:
                del self._prefixed[key_type]
                self._prefix_lengths.pop(key_type, None)


def _entry_order(ace: AccessControlEntry) -> tuple[str, str, int, int]:
    return (ace.principal, ace.host, int(ace.operation), int(ace.permission_type))


def _filter_to_resources(pattern_filter: ResourcePatternFilter) -> list[ResourcePattern]:
    """The patterns a definite filter names (Kafka's ``filterToResources``)."""
    assert pattern_filter.name is not None
    if pattern_filter.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        return [ResourcePattern(pattern_filter.resource_type, pattern_filter.name, pattern_filter.pattern_type)]
    if pattern_filter.pattern_type == PatternType.ANY:
        return [ResourcePattern(pattern_filter.resource_type, pattern_filter.name, PatternType.LITERAL),
                ResourcePattern(pattern_filter.resource_type, pattern_filter.name, PatternType.PREFIXED)]
    return []


def _added(entries: frozenset[AccessControlEntry], current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
    return current | entries
