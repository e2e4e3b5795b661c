"""The ACL authorizer: Kafka's decision matrix, KIP-679's authorize_by_resource_type, the filters'
match rules, create/delete semantics with the conditional-write retry, the ZooKeeper JSON and
notification formats, the change listener (replay, cursor, purge by an injected clock), and the
local store surviving a reopen."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.security.acl import (
    ANY_BINDING,
    ANY_ENTRY,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
    VersionedAcls,
    operation_name,
    parse_operation,
)
from pybroker.security.acl_authorizer import AclAuthorizer, parse_super_users
from pybroker.security.acl_store import (
    LocalAclStore,
    ZkChangeListener,
    decode_acls,
    decode_extended_change,
    decode_literal_change,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
    resource_path,
)
from pybroker.security.authorizer import AclOperation as Op
from pybroker.security.authorizer import AclPermissionType as Perm
from pybroker.security.authorizer import PatternType as PT
from pybroker.security.authorizer import ResourceType as RT
from pybroker.security.principal import KafkaPrincipal, PrincipalFormatError
from tests.mock_time import MockTime

ALICE = KafkaPrincipal.user("alice")
BOB = KafkaPrincipal.user("bob")
HOST = "10.0.0.1"

LIT, PRE = PT.LITERAL, PT.PREFIXED
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def ace(principal: str = "User:alice", op: Op = Op.READ, perm: Perm = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def pattern(name: str, pattern_type: PT = LIT, resource_type: RT = RT.TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, pattern_type)


class MemoryStore:
    """An `AclStore` in memory that can be made to refuse writes (another writer won)."""

    def __init__(self) -> None:
        self.data: dict[ResourcePattern, VersionedAcls] = {}
        self.conflicts = 0  # how many next writes fail as if another writer changed the node
        self.notified: list[ResourcePattern] = []

    async def start(self, on_change):  # noqa: ANN001, ANN201
        self.on_change = on_change

    async def load_all(self):  # noqa: ANN201
        return list(self.data.items())

    async def read(self, p: ResourcePattern) -> VersionedAcls:
        return self.data.get(p, VersionedAcls(frozenset(), -1))

    def _conflict(self) -> bool:
        if self.conflicts:
            self.conflicts -= 1
            return True
        return False

    async def create(self, p, acls):  # noqa: ANN001, ANN201
        if self._conflict() or p in self.data:
            return None
        self.data[p] = VersionedAcls(acls, 0)
        return 0

    async def set(self, p, acls, version):  # noqa: ANN001, ANN201
        current = self.data.get(p)
        if self._conflict() or current is None or current.version != version:
            return None
        self.data[p] = VersionedAcls(acls, version + 1)
        return version + 1

    async def delete(self, p, version):  # noqa: ANN001, ANN201
        if version < 0:
            return True
        if self._conflict():
            return False
        self.data.pop(p, None)
        return True

    async def notify_change(self, p):  # noqa: ANN001, ANN201
        self.notified.append(p)

    async def close(self) -> None:
        pass


async def _no_sleep(_: float) -> None:
    pass


def authorizer_with(bindings: list[tuple[ResourcePattern, AccessControlEntry]], **kwargs: object) -> AclAuthorizer:
    store = MemoryStore()
    authorizer = AclAuthorizer(store, sleep=_no_sleep, **kwargs)  # type: ignore[arg-type]

    async def setup() -> None:
        await authorizer.start()
        results = await authorizer.create_acls([AclBinding(p, e) for p, e in bindings])
        assert results == [None] * len(bindings)

    asyncio.run(setup())
    return authorizer


# --- the decision ---------------------------------------------------------------------------------


def test_literal_allow_and_default_deny():
    auth = authorizer_with([(pattern("orders"), ace())])
    assert auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert not auth.authorize(BOB, HOST, Op.READ, RT.TOPIC, "orders")  # ACLs exist, none for bob
    assert not auth.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders")
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")  # no ACL at all: allow.everyone false
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.GROUP, "orders")  # types do not mix


def test_allow_everyone_if_no_acl_found_only_where_there_is_no_acl():
    auth = authorizer_with([(pattern("orders"), ace())], allow_everyone_if_no_acl_found=True)
    assert auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "other")
    assert not auth.authorize(BOB, HOST, Op.READ, RT.TOPIC, "orders")


def test_prefixed_and_wildcard_resources():
    auth = authorizer_with([
        (pattern("ord", PRE), ace()),
        (pattern("*"), ace("User:bob", Op.WRITE)),
    ])
    assert auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "ord")  # an equal name is a prefix
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "or")
    assert auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "anything")
    assert auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "*")
    # a PREFIXED "*" is a prefix, not a wildcard
    auth2 = authorizer_with([(pattern("*", PRE), ace())])
    assert not auth2.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert auth2.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "*x")


def test_wildcard_principal_and_host():
    auth = authorizer_with([(pattern("t"), ace("User:*", host="10.0.0.1"))])
    assert auth.authorize(BOB, "10.0.0.1", Op.READ, RT.TOPIC, "t")
    assert not auth.authorize(BOB, "10.0.0.2", Op.READ, RT.TOPIC, "t")
    # Kafka: an ACL for User:* applies to every principal, whatever its type
    assert auth.authorize(KafkaPrincipal("Group", "x"), "10.0.0.1", Op.READ, RT.TOPIC, "t")


def test_deny_wins_over_allow_at_any_level():
    auth = authorizer_with([
        (pattern("*"), ace("User:*", Op.ALL)),
        (pattern("secret", PRE), ace("User:bob", Op.READ, DENY)),
        (pattern("hidden"), ace("User:*", Op.ALL, DENY, host=HOST)),
    ])
    assert auth.authorize(BOB, HOST, Op.READ, RT.TOPIC, "public")
    assert not auth.authorize(BOB, HOST, Op.READ, RT.TOPIC, "secret-1")
    assert auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "secret-1")
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "hidden")
    assert auth.authorize(ALICE, "10.9.9.9", Op.DESCRIBE, RT.TOPIC, "hidden")


def test_implied_operations_for_allow_only():
    auth = authorizer_with([
        (pattern("t"), ace(op=Op.WRITE)),
        (pattern("t"), ace(op=Op.ALTER_CONFIGS)),
        (pattern("c"), ace(op=Op.CREATE)),
        (pattern("d"), ace(op=Op.ALL)),
        (pattern("d"), ace(op=Op.READ, perm=DENY)),
    ])
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "c")  # CREATE does not imply DESCRIBE
    # DENY READ does not deny DESCRIBE (implication is for ALLOW only); ALL allows it
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "d")
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "d")


def test_super_users():
    assert parse_super_users(" User:admin ; User:CN=broker,OU=k;") == {
        KafkaPrincipal.user("admin"), KafkaPrincipal.user("CN=broker,OU=k")}
    assert parse_super_users("") == frozenset()
    with pytest.raises(PrincipalFormatError):
        parse_super_users("admin")
    auth = authorizer_with([(pattern("t"), ace("User:admin", Op.ALL, DENY))], super_users=[KafkaPrincipal.user("admin")])
    assert auth.authorize(KafkaPrincipal.user("admin"), HOST, Op.READ, RT.TOPIC, "t")
    assert auth.authorize(KafkaPrincipal.user("admin"), HOST, Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")


# --- KIP-679 ---------------------------------------------------------------------------------------


def test_authorize_by_resource_type():
    def by_type(bindings: list[tuple[ResourcePattern, AccessControlEntry]], **kw: object) -> bool:
        return authorizer_with(bindings, **kw).authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)

    assert not by_type([])
    assert by_type([], allow_everyone_if_no_acl_found=True)
    assert by_type([(pattern("t"), ace(op=Op.WRITE))])
    assert by_type([(pattern("p", PRE), ace("User:*", Op.ALL))])
    assert not by_type([(pattern("t"), ace(op=Op.READ))])  # no implication here
    assert not by_type([(pattern("t"), ace(op=Op.WRITE)), (pattern("t"), ace(op=Op.WRITE, perm=DENY))])
    assert not by_type([(pattern("t"), ace(op=Op.WRITE)), (pattern("*"), ace(op=Op.WRITE, perm=DENY))],
                       allow_everyone_if_no_acl_found=True)
    assert not by_type([(pattern("tx"), ace(op=Op.WRITE)), (pattern("t", PRE), ace(op=Op.ALL, perm=DENY))])
    assert by_type([(pattern("ux"), ace(op=Op.WRITE)), (pattern("t", PRE), ace(op=Op.ALL, perm=DENY))])
    assert by_type([(pattern("*"), ace(op=Op.WRITE)), (pattern("t"), ace(op=Op.WRITE, perm=DENY))])
    assert not by_type([(pattern("ab", PRE), ace(op=Op.WRITE)), (pattern("a", PRE), ace(op=Op.WRITE, perm=DENY))])
    assert by_type([(pattern("a", PRE), ace(op=Op.WRITE)), (pattern("ab", PRE), ace(op=Op.WRITE, perm=DENY))])
    auth = authorizer_with([], super_users=[ALICE])
    assert auth.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ALICE, HOST, Op.ANY, RT.TOPIC)


# --- filters -------------------------------------------------------------------------------------


def test_resource_pattern_filter_rules():
    lit, pre, star = pattern("orders"), pattern("ord", PRE), pattern("*")
    assert ResourcePatternFilter(RT.TOPIC, "orders", LIT).matches(lit)
    assert not ResourcePatternFilter(RT.TOPIC, "orders", LIT).matches(star)
    assert ResourcePatternFilter(RT.TOPIC, "ord", PRE).matches(pre)
    assert not ResourcePatternFilter(RT.TOPIC, "ord", LIT).matches(pre)
    anyf = ResourcePatternFilter(RT.TOPIC, "ord", PT.ANY)
    assert anyf.matches(pre) and not anyf.matches(lit)
    match = ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH)
    assert match.matches(lit) and match.matches(pre) and match.matches(star)
    assert not match.matches(pattern("orders-eu", PRE)) and not match.matches(pattern("orders", resource_type=RT.GROUP))
    assert ResourcePatternFilter(RT.ANY, None, PT.ANY).matches(pattern("x", PRE, RT.GROUP))
    assert ResourcePatternFilter(RT.ANY, None, PT.MATCH).matches(lit)
    assert str(ResourcePatternFilter(RT.TOPIC, None, PT.ANY)) == "ResourcePattern(resourceType=TOPIC, name=<any>, patternType=ANY)"
    assert str(lit) == "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    assert str(ace()) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert ResourcePatternFilter(RT.TOPIC, "a", PT.ANY).matches_at_most_one
    assert not ResourcePatternFilter(RT.TOPIC, "a", PT.MATCH).matches_at_most_one


def test_entry_filter_rules():
    entry = ace("User:a", Op.READ, DENY, "h")
    assert ANY_ENTRY.matches(entry)
    assert AccessControlEntryFilter("User:a", None, Op.ANY, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter("User:b", None, Op.ANY, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, "x", Op.ANY, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, Op.WRITE, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, Op.ANY, ALLOW).matches(entry)
    assert entry.to_filter().matches(entry)


def test_names():
    assert operation_name(Op.DESCRIBE_CONFIGS) == "DescribeConfigs" and operation_name(Op.ALL) == "All"
    assert parse_operation("IdempotentWrite") == Op.IDEMPOTENT_WRITE
    assert parse_operation("IDEMPOTENTWRITE") == Op.IDEMPOTENT_WRITE
    assert parse_operation("read") == Op.READ
    assert parse_operation("Nope") == Op.UNKNOWN


# --- create / delete / describe -------------------------------------------------------------------


def test_create_is_idempotent_validates_and_notifies():
    store = MemoryStore()
    auth = AclAuthorizer(store, sleep=_no_sleep)

    async def main() -> None:
        await auth.start()
        b = AclBinding(pattern("t"), ace())
        assert await auth.create_acls([b, b]) == [None, None]
        assert store.notified == [pattern("t")]
        assert await auth.create_acls([b]) == [None]
        assert store.notified == [pattern("t")]  # nothing changed: no notification
        bad = await auth.create_acls([
            AclBinding(pattern("a/b"), ace()),
            AclBinding(pattern("u"), ace("nocolon")),
            AclBinding(pattern("u"), ace("User:fine")),
        ])
        assert bad[0] is not None and bad[0].code == ErrorCode.INVALID_REQUEST and bad[0].message == "Failed to create ACL"
        assert [r.code for r in bad[1:]] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2  # the whole pattern fails
        assert auth.acls() == [b]

    asyncio.run(main())


def test_conditional_write_retries_then_gives_up():
    store = MemoryStore()
    auth = AclAuthorizer(store, sleep=_no_sleep)

    async def main() -> None:
        await auth.start()
        store.conflicts = 3
        assert await auth.create_acls([AclBinding(pattern("t"), ace())]) == [None]
        assert store.data[pattern("t")].acls == {ace()}
        store.conflicts = 100
        (result,) = await auth.create_acls([AclBinding(pattern("t"), ace("User:bob"))])
        assert result is not None and result.code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert store.conflicts == 100 - 11  # the first try and 10 retries

    asyncio.run(main())


def test_delete_by_filters_first_filter_wins_and_uncached_patterns_are_reached():
    store = MemoryStore()
    auth = AclAuthorizer(store, sleep=_no_sleep)
    b1, b2 = AclBinding(pattern("t"), ace()), AclBinding(pattern("t", PRE), ace("User:bob", Op.WRITE))

    async def main() -> None:
        await auth.start()
        await auth.create_acls([b1, b2])
        # another broker's ACL, not in this cache yet
        other = pattern("x")
        store.data[other] = VersionedAcls(frozenset({ace("User:c")}), 0)
        everything = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, None, PT.ANY), ANY_ENTRY)
        literal_t = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "t", LIT), ANY_ENTRY)
        exact_x = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "x", PT.ANY), ANY_ENTRY)
        results = await auth.delete_acls([literal_t, everything, exact_x])
        # x is reached through exact_x, but "everything" (listed earlier) reports it
        assert [{b for b, _ in r} for r in results] == [{b1}, {b2, AclBinding(other, ace("User:c"))}, set()]
        assert all(error is None for r in results for _, error in r)
        assert auth.acls(ANY_BINDING) == [] and store.data == {}

    asyncio.run(main())


def test_describe_with_match_filter():
    auth = authorizer_with([(pattern("orders"), ace()), (pattern("ord", PRE), ace()), (pattern("x"), ace())])
    match = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH), ANY_ENTRY)
    assert {b.pattern for b in auth.acls(match)} == {pattern("orders"), pattern("ord", PRE)}


# --- ZooKeeper formats ----------------------------------------------------------------------------


def test_zk_json_round_trip_and_kafka_layout():
    acls = frozenset({ace("User:alice", Op.READ), ace("User:bob", Op.IDEMPOTENT_WRITE, DENY, "10.0.0.1")})
    data = encode_acls(acls)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "IdempotentWrite", "host": "10.0.0.1"},
    ]}
    assert b" " not in data.replace(b"User:", b"")  # compact
    assert decode_acls(data) == acls
    # Kafka's own bytes, keys in another order
    kafka = b'{"version":1,"acls":[{"host":"h","permissionType":"Allow","operation":"Describe","principal":"User:x"}]}'
    assert decode_acls(kafka) == {ace("User:x", Op.DESCRIBE, ALLOW, "h")}
    with pytest.raises(ValueError):
        decode_acls(b'{"version":2,"acls":[]}')
    assert resource_path(pattern("orders")) == "/kafka-acl/Topic/orders"
    assert resource_path(pattern("tx", PRE, RT.TRANSACTIONAL_ID)) == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    assert resource_path(pattern("kafka-cluster", resource_type=RT.CLUSTER)) == "/kafka-acl/Cluster/kafka-cluster"


def test_change_notification_formats():
    assert encode_literal_change(pattern("a:b")) == b"TOPIC:a:b"
    assert decode_literal_change(b"TOPIC:a:b") == pattern("a:b")
    assert decode_literal_change(b"transactional_id:x") == pattern("x", resource_type=RT.TRANSACTIONAL_ID)
    data = encode_extended_change(pattern("ord", PRE, RT.GROUP))
    assert json.loads(data) == {"version": 1, "resourceType": "GROUP", "name": "ord", "patternType": "PREFIXED"}
    assert decode_extended_change(data) == pattern("ord", PRE, RT.GROUP)
    with pytest.raises(ValueError):
        decode_extended_change(b'{"version":2,"resourceType":"GROUP","name":"o","patternType":"PREFIXED"}')


@dataclass
class _Stat:
    ctime: int


class FakeZk:
    """Enough of `ZooKeeperClient` for a `ZkChangeListener`."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.watches: list[object] = []

    def add_state_listener(self, callback: object) -> None:
        pass

    def remove_state_listener(self, callback: object) -> None:
        pass

    async def get_children(self, path: str, watch: object = None) -> list[str]:
        if watch is not None:
            self.watches.append(watch)
        return [p.rsplit("/", 1)[1] for p in self.nodes if p.startswith(path + "/")]

    async def get(self, path: str) -> tuple[bytes, _Stat]:
        data, ctime = self.nodes[path]
        return data, _Stat(ctime)

    async def exists(self, path: str) -> _Stat | None:
        return _Stat(self.nodes[path][1]) if path in self.nodes else None

    async def delete(self, path: str) -> None:
        del self.nodes[path]


def test_change_listener_replays_follows_the_cursor_and_purges():
    time = MockTime()
    zk = FakeZk()
    root = "/kafka-acl-changes"
    seen: list[bytes] = []

    async def handler(data: bytes) -> None:
        seen.append(data)

    async def main() -> None:
        now = time.milliseconds()
        zk.nodes[f"{root}/acl_changes_0000000002"] = (b"TOPIC:b", now - 16 * 60 * 1000)
        zk.nodes[f"{root}/acl_changes_0000000001"] = (b"TOPIC:a", now - 20 * 60 * 1000)
        listener = ZkChangeListener(zk, root, handler, time)
        listener.start()
        await listener.idle()
        assert seen == [b"TOPIC:a", b"TOPIC:b"]  # replayed at start, in sequence order
        assert zk.nodes == {}  # both older than 15 minutes: purged
        zk.nodes[f"{root}/acl_changes_0000000003"] = (b"TOPIC:c", time.milliseconds())
        listener._watch(SimpleNamespace(type="CHILD"))
        await listener.idle()
        listener.schedule()  # a pass with nothing new does nothing
        await listener.idle()
        assert seen == [b"TOPIC:a", b"TOPIC:b", b"TOPIC:c"]
        assert list(zk.nodes) == [f"{root}/acl_changes_0000000003"]  # young: kept
        time.advance(15 * 60 * 1000 + 1)
        listener.schedule()
        await listener.idle()
        assert zk.nodes == {} and seen[-1] == b"TOPIC:c"
        listener.close()

    asyncio.run(main())


def test_local_store_survives_a_reopen(tmp_path):
    async def write() -> None:
        auth = AclAuthorizer(LocalAclStore(str(tmp_path)))
        await auth.start()
        await auth.create_acls([AclBinding(pattern("t"), ace()), AclBinding(pattern("p", PRE, RT.GROUP), ace(op=Op.ALL))])
        await auth.delete_acls([AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "t", LIT), ANY_ENTRY)])
        await auth.create_acls([AclBinding(pattern("t"), ace("User:z"))])
        await auth.close()

    async def read() -> list[AclBinding]:
        auth = AclAuthorizer(LocalAclStore(str(tmp_path)))
        await auth.start()
        assert auth.authorize(KafkaPrincipal.user("z"), HOST, Op.DESCRIBE, RT.TOPIC, "t")
        assert auth.authorize(ALICE, HOST, Op.DELETE, RT.GROUP, "pq")
        return auth.acls()

    asyncio.run(write())
    assert set(asyncio.run(read())) == {AclBinding(pattern("t"), ace("User:z")),
                                        AclBinding(pattern("p", PRE, RT.GROUP), ace(op=Op.ALL))}
