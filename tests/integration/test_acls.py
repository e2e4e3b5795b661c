"""ACLs end to end: CreateAcls / DescribeAcls / DeleteAcls through real clients' admin APIs
(confluent-kafka, kafka-python), the project's admin client and ``pybroker acls``; SECURITY_DISABLED
without an authorizer; ACLs surviving a restart; malformed requests closing the connection; and
on a 3-broker ZooKeeper cluster, a change through one broker seen by every other within a second.

PLAINTEXT connections are ``User:ANONYMOUS``, made a super user here so the admin calls pass."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import (
    AclBinding as CkAclBinding,
)
from confluent_kafka.admin import (
    AclBindingFilter as CkAclBindingFilter,
)
from confluent_kafka.admin import (
    AclOperation as CkAclOperation,
)
from confluent_kafka.admin import (
    AclPermissionType as CkAclPermissionType,
)
from confluent_kafka.admin import (
    AdminClient,
)
from confluent_kafka.admin import (
    ResourcePatternType as CkPatternType,
)
from confluent_kafka.admin import (
    ResourceType as CkResourceType,
)

from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import CreateAclsRequest, DescribeAclsRequest
from pybroker.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from pybroker.security.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.conftest import REPO, broker_connection, wait_until
from tests.integration.cluster import start_cluster
from tests.zookeeper import chroot_for

AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def _ck_binding(topic: str, principal: str = "User:alice", pattern: CkPatternType = CkPatternType.LITERAL,
                operation: CkAclOperation = CkAclOperation.READ) -> CkAclBinding:
    return CkAclBinding(CkResourceType.TOPIC, topic, pattern, principal, "*", operation, CkAclPermissionType.ALLOW)


def _ck_filter(name: str | None = None, pattern: CkPatternType = CkPatternType.ANY) -> CkAclBindingFilter:
    return CkAclBindingFilter(CkResourceType.ANY, name, pattern, None, None, CkAclOperation.ANY,
                              CkAclPermissionType.ANY)


def _described(admin: AdminClient, name: str | None = None) -> set[tuple[str, str, str, str]]:
    bindings = admin.describe_acls(_ck_filter(name), request_timeout=10).result()
    return {(b.name, b.resource_pattern_type.name, b.principal, b.operation.name) for b in bindings}


def test_confluent_kafka_create_describe_delete(start_broker):
    broker = start_broker(**AUTHORIZER)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_acls([
        _ck_binding("orders"),
        _ck_binding("ord", principal="User:bob", pattern=CkPatternType.PREFIXED, operation=CkAclOperation.WRITE),
    ], request_timeout=10)
    for future in futures.values():
        assert future.result() is None
    assert _described(admin) == {("orders", "LITERAL", "User:alice", "READ"), ("ord", "PREFIXED", "User:bob", "WRITE")}
    # MATCH: every ACL that applies to the name orders-eu (the prefix ord, not the literal orders).
    match = admin.describe_acls(_ck_filter("orders-eu", CkPatternType.MATCH), request_timeout=10).result()
    assert {(b.name, b.resource_pattern_type.name) for b in match} == {("ord", "PREFIXED")}
    # A CLUSTER binding must be named kafka-cluster.
    bad = CkAclBinding(CkResourceType.BROKER, "other", CkPatternType.LITERAL, "User:alice", "*",
                       CkAclOperation.ALTER, CkAclPermissionType.ALLOW)
    with pytest.raises(Exception, match="kafka-cluster"):
        admin.create_acls([bad], request_timeout=10)[bad].result()

    deleted = admin.delete_acls([_ck_filter("orders", CkPatternType.LITERAL)], request_timeout=10)
    (result,) = [f.result() for f in deleted.values()]
    assert [(b.name, b.principal) for b in result] == [("orders", "User:alice")]
    assert _described(admin) == {("ord", "PREFIXED", "User:bob", "WRITE")}


def test_kafka_python_admin_acls(start_broker):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    broker = start_broker(**AUTHORIZER)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        acl = ACL("User:carol", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.GROUP, "g1", ACLResourcePatternType.LITERAL))
        created = admin.create_acls([acl])
        assert created["succeeded"] == [acl] and not created["failed"]
        any_filter = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))
        listed, error = admin.describe_acls(any_filter)
        assert [(a.principal, a.resource_pattern.resource_name) for a in listed] == [("User:carol", "g1")]
        results = admin.delete_acls([any_filter])
        (_, deleted, error), = results
        assert error.errno == 0
        assert [(a.principal, a.resource_pattern.resource_name) for a in deleted] == [("User:carol", "g1")]
        listed, _ = admin.describe_acls(any_filter)
        assert listed == []
    finally:
        admin.close()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(start_broker):
    broker = start_broker()

    async def main() -> None:
        async with Admin(broker.bootstrap) as admin:
            with pytest.raises(AdminError) as raised:
                await admin.describe_acls()
            assert raised.value.error == ErrorCode.SECURITY_DISABLED
            assert raised.value.message == "No Authorizer is configured on the broker"
            binding = AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                                 AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW))
            with pytest.raises(AdminError) as raised:
                await admin.create_acls([binding])
            assert raised.value.error == ErrorCode.SECURITY_DISABLED
            assert raised.value.message == "No Authorizer is configured."

    asyncio.run(main())


def test_an_unknown_authorizer_stops_the_start(tmp_path):
    from tests.conftest import BrokerProcess

    broker = BrokerProcess(tmp_path / "b", **{"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(RuntimeError, match="com.example.MyAuthorizer is not supported"):
        broker.start(timeout=20)


def test_acls_survive_a_restart_and_unauthorized_principals_are_refused(start_broker):
    # No super user: ANONYMOUS gets DESCRIBE and ALTER on the cluster by ACL... which it must
    # create first, so start with it as super user, then drop that.
    broker = start_broker(**AUTHORIZER)
    cluster_alter = AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                               AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALTER, AclPermissionType.ALLOW))
    topic_read = AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                            AccessControlEntry("User:x", "*", AclOperation.READ, AclPermissionType.ALLOW))

    async def create() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_acls([cluster_alter, topic_read])

    asyncio.run(create())
    broker.stop()
    broker.overrides["super.users"] = ""
    broker.start()

    async def after_restart() -> None:
        async with Admin(broker.bootstrap) as admin:
            # ALTER implies DESCRIBE: the list is allowed, and both bindings came back.
            assert set(await admin.describe_acls()) == {cluster_alter, topic_read}
            await admin.delete_acls([AclBindingFilter(cluster_alter.pattern.to_filter(), cluster_alter.entry.to_filter())])
            with pytest.raises(AdminError) as raised:
                await admin.describe_acls()
            assert raised.value.error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    asyncio.run(after_restart())


def test_malformed_acl_requests_close_the_connection(start_broker):
    broker = start_broker(**AUTHORIZER)

    async def main() -> None:
        connection = await broker_connection(broker.bootstrap)
        try:
            # An UNKNOWN operation (0) cannot be parsed by Kafka: closed.
            request = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=2, resource_name="t", resource_pattern_type=4, principal="User:a", host="*",
                operation=0, permission_type=3)])
            with pytest.raises((KafkaClientError, ConnectionError, asyncio.IncompleteReadError)):
                await connection.send(ApiKey.CREATE_ACLS, request, timeout=10)
        finally:
            await connection.close()
        connection = await broker_connection(broker.bootstrap)
        try:
            unknown = DescribeAclsRequest(resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
                                          principal_filter=None, host_filter=None, operation=1, permission_type=1)
            with pytest.raises((KafkaClientError, ConnectionError, asyncio.IncompleteReadError)):
                await connection.send(ApiKey.DESCRIBE_ACLS, unknown, timeout=10)
        finally:
            await connection.close()

    asyncio.run(main())


def _acls_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pybroker", "acls", "--bootstrap-server", bootstrap, *args],
        cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )


def test_pybroker_acls_cli_round_trip(start_broker):
    broker = start_broker(**AUTHORIZER)
    added = _acls_cli(broker.bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--operation", "Describe", "--topic", "orders")
    assert added.returncode == 0, added.stderr
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: " in added.stdout
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: " in added.stdout

    listed = _acls_cli(broker.bootstrap, "--list", "--topic", "orders")
    assert listed.returncode == 0, listed.stderr
    assert "operation=DESCRIBE" in listed.stdout and "operation=READ" in listed.stdout

    refused = _acls_cli(broker.bootstrap, "--remove", "--topic", "orders")  # no --force, no terminal
    assert refused.returncode != 0
    assert "--force" in refused.stderr

    removed = _acls_cli(broker.bootstrap, "--remove", "--force", "--topic", "orders", "--allow-principal",
                        "User:alice", "--operation", "Read")
    assert removed.returncode == 0, removed.stderr
    listed = _acls_cli(broker.bootstrap, "--list", "--topic", "orders")
    assert "operation=DESCRIBE" in listed.stdout and "operation=READ" not in listed.stdout

    removed = _acls_cli(broker.bootstrap, "--remove", "--force", "--topic", "orders")
    assert removed.returncode == 0, removed.stderr
    assert _acls_cli(broker.bootstrap, "--list").stdout.strip() == ""


def test_cluster_acl_changes_reach_every_broker_within_a_second(zookeeper, tmp_path, request):
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **AUTHORIZER)
    try:
        admins = [AdminClient({"bootstrap.servers": b.bootstrap}) for b in cluster.brokers]
        binding = _ck_binding("shared", pattern=CkPatternType.PREFIXED)
        admins[0].create_acls([binding], request_timeout=10)[binding].result()
        started = time.monotonic()
        for admin in admins[1:]:
            wait_until(lambda admin=admin: _described(admin) == {("shared", "PREFIXED", "User:alice", "READ")},
                       timeout=5, interval=0.02, message="the ACL on another broker")
        assert time.monotonic() - started < 1.0

        deleted = admins[1].delete_acls([_ck_filter("shared")], request_timeout=10)
        assert [len(f.result()) for f in deleted.values()] == [1]
        started = time.monotonic()
        for admin in (admins[0], admins[2]):
            wait_until(lambda admin=admin: _described(admin) == set(), timeout=5, interval=0.02,
                       message="the ACL gone on another broker")
        assert time.monotonic() - started < 1.0

        # The layout is Kafka's.
        from tests.integration.cluster import zk_client

        zk = zk_client(cluster.connect)
        try:
            assert zk.exists("/kafka-acl/Topic") and zk.exists("/kafka-acl-extended/prefixed/Topic")
            assert not zk.exists("/kafka-acl-extended/prefixed/Topic/shared")
            changes = zk.get_children("/kafka-acl-extended-changes")
            assert changes and all(c.startswith("acl_changes_") for c in changes)
        finally:
            zk.stop()
            zk.close()
    finally:
        cluster.kill()


def test_unauthorized_principal_filter_with_entry_filters(start_broker):
    """Entry filters (principal, operation) narrow DescribeAcls and DeleteAcls."""
    broker = start_broker(**AUTHORIZER)
    read = AclBinding(ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
                      AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW))
    deny = AclBinding(ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
                      AccessControlEntry("User:b", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY))

    async def main() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_acls([read, deny, read])
            by_b = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, None, PatternType.ANY),
                                    AccessControlEntryFilter("User:b", None, AclOperation.ANY, AclPermissionType.ANY))
            assert await admin.describe_acls(by_b) == [deny]
            assert await admin.delete_acls([by_b, by_b]) == [[deny], []]
            assert await admin.describe_acls() == [read]

    asyncio.run(main())
