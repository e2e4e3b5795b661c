"""Where ACLs are kept: the `AclStore` seam, Kafka's ZooKeeper layout, and the single broker's file.

Owns the persistence of ACL bindings for `pybroker.security.acl_authorizer.AclAuthorizer`, which
keeps the decision cache and the update logic; a store only reads, writes conditionally on a
version, and tells of changes.

- `ZooKeeperAclStore` (cluster mode) is Kafka's ZooKeeper layout, byte for byte, so that Kafka's
  tools read a pybroker cluster's ACLs and the other way round: one znode per resource pattern,
  ``/kafka-acl/<Type>/<name>`` for LITERAL and ``/kafka-acl-extended/prefixed/<Type>/<name>`` for
  PREFIXED (``Type`` PascalCase, the name raw), JSON version 1 (``{"version":1,"acls":[{"principal":
  "User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``); the znode's zkVersion
  is the version writes are conditional on. Changes are announced with persistent-sequential
  notifications, ``/kafka-acl-changes/acl_changes_<seq>`` holding ``TOPIC:name`` and
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` holding ``{"version":1,"resourceType":"TOPIC",
  "name":"ord","patternType":"PREFIXED"}``. One `ZkChangeListener` per change path follows them as
  Kafka's ``ZkNodeChangeNotificationListener`` does: list the children, sorted, and process each
  above the cursor (-1 at start: every existing one is replayed), again at each child change and
  each reconnection (kazoo forgets watches when the connection drops); after each pass delete the
  notifications created more than 15 minutes ago (by the injected clock). The store has its own
  ZooKeeper session, as Kafka's authorizer has its own ``KafkaZkClient``; kazoo's threads only post
  to the event loop (`pybroker.zookeeper.client`), so no ZooKeeper call blocks it.
- `LocalAclStore` (the single broker) keeps every pattern in ``acls.json`` beside the metadata
  store's file in the first log directory, rewritten atomically in a worker thread; a write
  returns once it is on disk. Its only writer is this broker, so versions never conflict.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn, Protocol

from pybroker.log.file_sync import CoalescingFileWriter
from pybroker.scheduler import SYSTEM_TIME, Time
from pybroker.security.acl import (
    AccessControlEntry,
    ResourcePattern,
    VersionedAcls,
    operation_name,
    parse_operation,
    parse_permission_type,
    parse_resource_type,
    permission_type_name,
    resource_type_name,
)
from pybroker.security.authorizer import PatternType, ResourceType
from pybroker.security.principal import KafkaPrincipal

__all__ = [
    "ACL_CHANGE_PREFIX", "AclStore", "CHANGE_EXPIRATION_MS", "EXTENDED_ACL_CHANGES_PATH", "LITERAL_ACL_CHANGES_PATH",
    "LocalAclStore", "ZkChangeListener", "ZooKeeperAclStore", "decode_acls", "decode_extended_change",
    "decode_literal_change", "encode_acls", "encode_extended_change", "encode_literal_change", "resource_path",
]

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs
ACLS_FILE = "acls.json"

#: The concrete resource types, each with a directory under every ACL path.
RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))

OnChange = Callable[[ResourcePattern], Awaitable[None]]


class AclStore(Protocol):
    async def start(self, on_change: OnChange) -> None:
        """Create what must exist and start following other writers' changes: ``on_change`` is
        awaited for each pattern that changed (its ACLs must be re-read)."""
        ...

    async def load_all(self) -> list[tuple[ResourcePattern, VersionedAcls]]:
        """Every stored pattern with its ACLs."""
        ...

    async def read(self, pattern: ResourcePattern) -> VersionedAcls:
        """The pattern's ACLs and version (no ACLs, version -1, when nothing is stored)."""
        ...

    async def create(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry]) -> int | None:
        """Store the pattern's first ACLs: the new version, or None if it exists already."""
        ...

    async def set(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry], version: int) -> int | None:
        """Replace the ACLs if still at ``version``: the new version, or None on a conflict."""
        ...

    async def delete(self, pattern: ResourcePattern, version: int) -> bool:
        """Remove the pattern if still at ``version`` (or gone); False on a conflict. A negative
        ``version`` (nothing was stored) is a success without a write."""
        ...

    async def notify_change(self, pattern: ResourcePattern) -> None:
        """Tell the other brokers that the pattern's ACLs changed."""
        ...

    async def close(self) -> None:
        ...


class ClosedAclStore:
    """The store an ACL authorizer holds before its broker opens the real one, and after it is
    closed: every call but ``close`` fails."""

    async def start(self, on_change: OnChange) -> None:
        _not_open()

    async def load_all(self) -> list[tuple[ResourcePattern, VersionedAcls]]:
        _not_open()

    async def read(self, pattern: ResourcePattern) -> VersionedAcls:
        _not_open()

    async def create(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry]) -> int | None:
        _not_open()

    async def set(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry], version: int) -> int | None:
        _not_open()

    async def delete(self, pattern: ResourcePattern, version: int) -> bool:
        _not_open()

    async def notify_change(self, pattern: ResourcePattern) -> None:
        _not_open()

    async def close(self) -> None:
        pass


def _not_open() -> NoReturn:
    raise RuntimeError("the ACL store is not open (Broker.start() opens it)")


# --- Kafka's JSON -------------------------------------------------------------------------------


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _entry_json(ace: AccessControlEntry) -> dict[str, str]:
    return {"principal": ace.principal, "permissionType": permission_type_name(ace.permission_type),
            "operation": operation_name(ace.operation), "host": ace.host}


def _sorted(acls: Iterable[AccessControlEntry]) -> list[AccessControlEntry]:
    return sorted(acls, key=lambda a: (a.principal, a.host, int(a.operation), int(a.permission_type)))


def encode_acls(acls: Iterable[AccessControlEntry]) -> bytes:
    """A resource znode's data (Kafka's ``ResourceZNode.encode``, JSON version 1)."""
    return _compact({"version": 1, "acls": [_entry_json(a) for a in _sorted(acls)]})


def _entry_from_json(item: dict[str, Any]) -> AccessControlEntry:
    principal = str(item["principal"])
    KafkaPrincipal.parse(principal)
    return AccessControlEntry(principal, str(item["host"]), parse_operation(str(item["operation"])),
                              parse_permission_type(str(item["permissionType"])))


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """Kafka's ``AclEntry.fromBytes``: empty data is no ACLs; the version must be 1."""
    if not data:
        return frozenset()
    body = json.loads(data)
    if not isinstance(body, dict) or body.get("version") != 1:
        raise ValueError(f"unsupported ACL znode data: {data[:200]!r}")
    return frozenset(_entry_from_json(item) for item in body.get("acls") or [])


def resource_path(pattern: ResourcePattern) -> str:
    """``/kafka-acl/Topic/orders`` or ``/kafka-acl-extended/prefixed/Topic/ord``."""
    return f"{_type_root(pattern.pattern_type)}/{resource_type_name(pattern.resource_type)}/{pattern.name}"


def _type_root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def _enum_from_string(enum_type: Any, text: str) -> Any:
    """Java's ``fromString``: the upper-cased enum name, else UNKNOWN."""
    return enum_type.__members__.get(text.upper(), enum_type.UNKNOWN)


def encode_literal_change(pattern: ResourcePattern) -> bytes:
    """``TOPIC:orders`` (the resource type's enum name, then the name)."""
    return f"{pattern.resource_type.name}:{pattern.name}".encode()


def decode_literal_change(data: bytes) -> ResourcePattern:
    text = data.decode()
    resource_type, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
    return ResourcePattern(_enum_from_string(ResourceType, resource_type), name, PatternType.LITERAL)


def encode_extended_change(pattern: ResourcePattern) -> bytes:
    return _compact({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                     "patternType": pattern.pattern_type.name})


def decode_extended_change(data: bytes) -> ResourcePattern:
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError(f"Failed to parse ACL change event: {data[:200]!r}")
    if int(body.get("version", 0)) > 1:
        raise ValueError(f"Acl change event received for unsupported version: {body.get('version')}")
    pattern_type = _enum_from_string(PatternType, str(body["patternType"]))
    if pattern_type in (PatternType.ANY, PatternType.MATCH):
        raise ValueError(f"patternType must not be {pattern_type.name}")
    return ResourcePattern(_enum_from_string(ResourceType, str(body["resourceType"])), str(body["name"]), pattern_type)


# --- ZooKeeper ----------------------------------------------------------------------------------


def _change_sequence(child: str) -> int | None:
    if not child.startswith(ACL_CHANGE_PREFIX):
        return None
    try:
        return int(child[len(ACL_CHANGE_PREFIX):])
    except ValueError:
        return None


class ZkChangeListener:
    """Kafka's ``ZkNodeChangeNotificationListener`` for one change path: each notification above
    the cursor is handed to ``handler`` (its data), in sequence order, once; old ones are purged."""

    def __init__(
        self, zk: Any, path: str, handler: Callable[[bytes], Awaitable[None]], time: Time = SYSTEM_TIME,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.zk = zk
        self.path = path
        self.handler = handler
        self.time = time
        self.expiration_ms = expiration_ms
        self.last_executed_change = -1
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False

    def start(self) -> None:
        from pybroker.zookeeper.client import KazooState

        def on_state(state: str) -> None:
            if state == KazooState.CONNECTED:  # a new session, or the same after a drop: re-arm
                self.schedule()

        self._on_state = on_state
        self.zk.add_state_listener(on_state)
        self.schedule()

    def close(self) -> None:
        self._closed = True
        if hasattr(self, "_on_state"):
            self.zk.remove_state_listener(self._on_state)
        if self._task is not None:
            self._task.cancel()

    async def idle(self) -> None:
        """Wait until no pass is running (tests)."""
        while self._task is not None:
            await asyncio.shield(self._task)

    def _watch(self, event: Any) -> None:
        from pybroker.zookeeper.client import EventType

        if event.type != EventType.NONE:
            self.schedule()

    def schedule(self) -> None:
        """Run a pass, or one more after the running one."""
        if self._closed:
            return
        if self._task is not None:
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"acl-changes-{self.path}")

    async def _run(self) -> None:
        from pybroker.zookeeper.client import ConnectionClosedError, SessionExpiredError

        try:
            while not self._closed:
                self._again = False
                try:
                    await self.process()
                except (SessionExpiredError, ConnectionClosedError) as e:
                    log.debug("ACL change pass on %s interrupted: %r", self.path, e)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    if self._closed:
                        return
                    log.exception("Error while processing notification change for path = %s", self.path)
                if not self._again:
                    return
        finally:
            self._task = None

    async def _retry(self, operation: Callable[[], Awaitable[Any]]) -> Any:
        from pybroker.zookeeper.client import ConnectionLoss, SessionExpiredError

        while True:
            try:
                return await operation()
            except (ConnectionLoss, SessionExpiredError):
                await self.zk.wait_until_connected()

    async def process(self) -> None:
        """One pass: the children (watch re-armed), those above the cursor in order, then the purge."""
        from pybroker.zookeeper.client import NoNodeError

        children = await self._retry(lambda: self.zk.get_children(self.path, self._watch))
        now = self.time.milliseconds()
        numbered = sorted((s, c) for c in children if (s := _change_sequence(c)) is not None)
        for sequence, child in numbered:
            if sequence <= self.last_executed_change:
                continue
            try:
                data, _ = await self._retry(functools.partial(self.zk.get, f"{self.path}/{child}"))
            except NoNodeError:
                data = None
            if data:
                try:
                    await self.handler(data)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("error processing change notification %r from %s/%s", data[:200], self.path, child)
            self.last_executed_change = sequence
        await self._purge(numbered, now)

    async def _purge(self, numbered: list[tuple[int, str]], now: int) -> None:
        """Delete every notification created more than ``expiration_ms`` before ``now``; they are
        created in sequence order, so the scan stops at the first young enough to stay."""
        from pybroker.zookeeper.client import NoNodeError

        for _, child in numbered:
            path = f"{self.path}/{child}"
            stat = await self._retry(functools.partial(self.zk.exists, path))
            if stat is None:
                continue
            if now - stat.ctime <= self.expiration_ms:
                return
            log.debug("Purging change notification %s", path)
            try:
                await self._retry(functools.partial(self.zk.delete, path))
            except NoNodeError:
                pass


class ZooKeeperAclStore:
    """`AclStore` over Kafka's ACL znodes. ``zk`` is a connected `ZooKeeperClient` the store
    owns (closed with it)."""

    def __init__(self, zk: Any, time: Time = SYSTEM_TIME) -> None:
        self.zk = zk
        self.time = time
        self._listeners: list[ZkChangeListener] = []

    @classmethod
    async def connect(
        cls, connect_string: str, session_timeout_ms: int, connection_timeout_ms: int, time: Time = SYSTEM_TIME,
    ) -> ZooKeeperAclStore:
        from pybroker.zookeeper.client import ZooKeeperClient

        return cls(await ZooKeeperClient.connect(connect_string, session_timeout_ms, connection_timeout_ms), time)

    async def _retry(self, operation: Callable[[], Awaitable[Any]]) -> Any:
        from pybroker.zookeeper.client import ConnectionLoss, SessionExpiredError

        while True:
            try:
                return await operation()
            except (ConnectionLoss, SessionExpiredError):
                await self.zk.wait_until_connected()

    async def _ensure(self, path: str) -> None:
        await self._retry(lambda: self.zk.ensure_path(path))

    async def start(self, on_change: OnChange) -> None:
        """Kafka's ``createAclPaths``, then one change listener per change path."""
        paths = [f"{_type_root(p)}/{resource_type_name(t)}" for p in (PatternType.LITERAL, PatternType.PREFIXED)
                 for t in RESOURCE_TYPES]
        await asyncio.gather(*(self._ensure(p) for p in (*paths, LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH)))

        async def literal(data: bytes) -> None:
            await on_change(decode_literal_change(data))

        async def extended(data: bytes) -> None:
            await on_change(decode_extended_change(data))

        self._listeners = [ZkChangeListener(self.zk, LITERAL_ACL_CHANGES_PATH, literal, self.time),
                           ZkChangeListener(self.zk, EXTENDED_ACL_CHANGES_PATH, extended, self.time)]
        for listener in self._listeners:
            listener.start()

    async def load_all(self) -> list[tuple[ResourcePattern, VersionedAcls]]:
        """Kafka's ``loadAllAcls``: every ``<root>/<Type>/<name>``; unknown types are skipped."""
        from pybroker.zookeeper.client import NoNodeError

        out: list[tuple[ResourcePattern, VersionedAcls]] = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = _type_root(pattern_type)
            try:
                type_names = await self._retry(functools.partial(self.zk.get_children, root))
            except NoNodeError:
                continue
            for type_name in sorted(type_names):
                resource_type = parse_resource_type(type_name)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    log.warning("Ignoring unknown ResourceType: %s", type_name)
                    continue
                try:
                    names = await self._retry(functools.partial(self.zk.get_children, f"{root}/{type_name}"))
                except NoNodeError:
                    continue
                patterns = [ResourcePattern(resource_type, name, pattern_type) for name in sorted(names)]
                for pattern, versioned in zip(patterns, await asyncio.gather(*(self.read(p) for p in patterns)),
                                              strict=True):
                    if versioned.acls:
                        out.append((pattern, versioned))
        return out

    async def read(self, pattern: ResourcePattern) -> VersionedAcls:
        from pybroker.zookeeper.client import NoNodeError

        try:
            data, stat = await self._retry(lambda: self.zk.get(resource_path(pattern)))
        except NoNodeError:
            return VersionedAcls(frozenset(), -1)
        try:
            return VersionedAcls(decode_acls(data), stat.version)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("Ignoring the unreadable ACLs of %s (%s): %s", pattern, resource_path(pattern), e)
            return VersionedAcls(frozenset(), stat.version)

    async def create(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry]) -> int | None:
        from pybroker.zookeeper.client import NodeExistsError

        try:
            await self._retry(lambda: self.zk.create(resource_path(pattern), encode_acls(acls)))
        except NodeExistsError:
            return None
        return 0

    async def set(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry], version: int) -> int | None:
        from pybroker.zookeeper.client import BadVersionError, NoNodeError

        try:
            stat = await self._retry(lambda: self.zk.set(resource_path(pattern), encode_acls(acls), version))
        except (BadVersionError, NoNodeError):
            return None
        return int(stat.version)

    async def delete(self, pattern: ResourcePattern, version: int) -> bool:
        from pybroker.zookeeper.client import BadVersionError, NoNodeError

        if version < 0:
            return True
        try:
            await self._retry(lambda: self.zk.delete(resource_path(pattern), version))
        except NoNodeError:
            return True
        except BadVersionError:
            return False
        return True

    async def notify_change(self, pattern: ResourcePattern) -> None:
        if pattern.pattern_type == PatternType.LITERAL:
            path, data = LITERAL_ACL_CHANGES_PATH, encode_literal_change(pattern)
        else:
            path, data = EXTENDED_ACL_CHANGES_PATH, encode_extended_change(pattern)
        await self._retry(lambda: self.zk.create(f"{path}/{ACL_CHANGE_PREFIX}", data, sequence=True))

    async def close(self) -> None:
        for listener in self._listeners:
            listener.close()
        await self.zk.close()


# --- the single broker's file -------------------------------------------------------------------


class LocalAclStore:
    """`AclStore` of the single broker: ``acls.json`` in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, ACLS_FILE)
        self._acls: dict[ResourcePattern, VersionedAcls] = {}
        self._writer = CoalescingFileWriter(self.path, self._render)
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                document = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            raise RuntimeError(f"{self.path} is damaged ({e}); restore it from a backup or move it away "
                               "to start without ACLs") from e
        for item in document.get("resources", []):
            pattern = ResourcePattern(parse_resource_type(item["resourceType"]), item["name"],
                                      _enum_from_string(PatternType, item["patternType"]))
            acls = frozenset(_entry_from_json(a) for a in item["acls"])
            if acls:
                self._acls[pattern] = VersionedAcls(acls, int(item.get("version", 0)))

    def _render(self) -> str:
        resources = [
            json.dumps({"resourceType": resource_type_name(p.resource_type), "name": p.name,
                        "patternType": p.pattern_type.name, "version": v.version,
                        "acls": [_entry_json(a) for a in _sorted(v.acls)]}, separators=(",", ":"))
            for p, v in sorted(self._acls.items(), key=lambda item: (item[0].resource_type, item[0].pattern_type,
                                                                      item[0].name))
        ]
        return '{"version": 1, "resources": [\n' + ",\n".join(resources) + "\n]}\n"

    async def _save(self) -> None:
        saved = self._writer.request()
        if saved is not None:
            await asyncio.shield(saved)  # shared with other changes' saves

    async def start(self, on_change: OnChange) -> None:
        pass  # the only writer is this broker

    async def load_all(self) -> list[tuple[ResourcePattern, VersionedAcls]]:
        return list(self._acls.items())

    async def read(self, pattern: ResourcePattern) -> VersionedAcls:
        return self._acls.get(pattern) or VersionedAcls(frozenset(), -1)

    async def create(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry]) -> int | None:
        if pattern in self._acls:
            return None
        self._acls[pattern] = VersionedAcls(acls, 0)
        await self._save()
        return 0

    async def set(self, pattern: ResourcePattern, acls: frozenset[AccessControlEntry], version: int) -> int | None:
        current = self._acls.get(pattern)
        if current is None or current.version != version:
            return None
        self._acls[pattern] = VersionedAcls(acls, version + 1)
        await self._save()
        return version + 1

    async def delete(self, pattern: ResourcePattern, version: int) -> bool:
        current = self._acls.get(pattern)
        if version < 0 or current is None:
            return True
        if current.version != version:
            return False
        del self._acls[pattern]
        await self._save()
        return True

    async def notify_change(self, pattern: ResourcePattern) -> None:
        pass

    async def close(self) -> None:
        await self._writer.close()
