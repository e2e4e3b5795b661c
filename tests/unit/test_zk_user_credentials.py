"""SCRAM credentials through the ZooKeeper store, against a real ZooKeeper: an alter on one
broker's store writes ``/config/users/<sanitized>`` and a ``users/<sanitized>`` notification in
Kafka's JSON, and every other broker's credential cache follows within a second (deletions too);
a store connecting later loads every user; quota-only notifications are ignored; after a session
expiry the users are read again."""

from __future__ import annotations

import asyncio
import json

import pytest

from pybroker.controller.store import StoreListener
from pybroker.controller.zk_store import ZooKeeperStore
from pybroker.security.credential_cache import CredentialCache
from pybroker.security.scram import ScramCredential, ScramMechanism
from pybroker.server.user_scram_credentials import (
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from tests.unit.test_scram_credentials import SHA256, SHA512, Del, Up
from tests.zookeeper import SESSION_TIMEOUT_MS, chroot_for, expire_session, wait_for


@pytest.fixture
def connect_string(zookeeper, request):
    return chroot_for(zookeeper, request.node.name)


class Node:
    """A store with the broker's credential cache behind its listener."""

    def __init__(self):
        self.cache = CredentialCache(m.mechanism_name for m in ScramMechanism)
        self.listener = StoreListener(on_user_configs_changed=self.cache.update_user)
        self.store: ZooKeeperStore | None = None

    async def open(self, connect_string, broker_id):
        self.store = await ZooKeeperStore.connect(
            connect_string, SESSION_TIMEOUT_MS, 10000, broker_id, "cluster-A", self.listener)
        return self

    def get(self, mechanism, user):
        return self.cache.get(mechanism, user)


async def raw(store, path):
    data, _ = await store.zk.get(path)
    return json.loads(data)


def run_nodes(connect_string, count, scenario):
    async def go():
        nodes = []
        try:
            for i in range(count):
                nodes.append(await Node().open(connect_string, i + 1))
            return await scenario(*nodes)
        finally:
            for node in nodes:
                await node.store.close()

    asyncio.run(go())


def test_an_alter_reaches_every_brokers_credential_cache_within_a_second(connect_string):
    async def scenario(a, b):
        results = await alter_user_scram_credentials(
            a.store, [Up("alice smith", SHA256, 8192), Up("alice smith", SHA512, 4096)], [])
        assert [(r.user, r.error) for r in results] == [("alice smith", 0)]
        stored = await raw(a.store, "/config/users/alice%20smith")
        assert stored["version"] == 1 and sorted(stored["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
        credential = ScramCredential.parse(stored["config"]["SCRAM-SHA-256"])
        assert credential.iterations == 8192
        changes = await a.store.zk.get_children("/config/changes")
        assert [await raw(a.store, f"/config/changes/{c}") for c in sorted(changes)] == [
            {"version": 2, "entity_path": "users/alice%20smith"}]
        # Read-your-writes on the writer; the other broker by the notification.
        assert a.get(ScramMechanism.SCRAM_SHA_256, "alice smith") == credential
        loop = asyncio.get_running_loop()
        started = loop.time()
        await wait_for(lambda: b.get(ScramMechanism.SCRAM_SHA_256, "alice smith") == credential, timeout=1.0,
                       message="broker 2's cache has the credential")
        assert loop.time() - started < 1.0
        assert b.get(ScramMechanism.SCRAM_SHA_512, "alice smith") is not None

        # Describe on any broker reads ZooKeeper.
        described = await describe_user_scram_credentials(b.store, None)
        assert [(r.user, r.credentials) for r in described] == [("alice smith", [(1, 8192), (2, 4096)])]

        # A deletion removes it everywhere.
        await alter_user_scram_credentials(a.store, [], [Del("alice smith", SHA256)])
        await wait_for(lambda: b.get(ScramMechanism.SCRAM_SHA_256, "alice smith") is None, timeout=1.0)
        assert b.get(ScramMechanism.SCRAM_SHA_512, "alice smith") is not None

        # A quota notification (users/<u>/clients/<c>) and the default user change nothing.
        await a.store.client.create_config_change_notification("users/alice%20smith/clients/c1")
        await a.store.client.create_config_change_notification("users/<default>")
        await alter_user_scram_credentials(a.store, [Up("bob")], [])
        await wait_for(lambda: b.get(ScramMechanism.SCRAM_SHA_256, "bob") is not None, timeout=1.0)
        assert b.get(ScramMechanism.SCRAM_SHA_512, "alice smith") is not None

        # A broker connecting later loads every user at start.
        late = await Node().open(connect_string, 3)
        try:
            assert late.get(ScramMechanism.SCRAM_SHA_256, "bob") is not None
            assert late.get(ScramMechanism.SCRAM_SHA_512, "alice smith") is not None
            assert late.get(ScramMechanism.SCRAM_SHA_256, "alice smith") is None
            assert set(late.store.user_configs()) == {"bob", "alice smith"}
        finally:
            await late.store.close()

    run_nodes(connect_string, 2, scenario)


def test_users_written_by_kafkas_tools_are_read_and_desanitized(connect_string):
    async def scenario(a, b):
        credential = "salt=c2FsdA==,stored_key=AAAA,server_key=AAAA,iterations=4096"
        await a.store.client.change_user_config("CN=x,O=y~", {"SCRAM-SHA-256": credential})
        assert await a.store.zk.exists("/config/users/CN%3Dx%2CO%3Dy%7E") is not None
        await wait_for(lambda: b.get(ScramMechanism.SCRAM_SHA_256, "CN=x,O=y~") is not None, timeout=1.0)

    run_nodes(connect_string, 2, scenario)


def test_after_a_session_expiry_every_user_is_read_again(connect_string):
    async def scenario(a, b):
        await alter_user_scram_credentials(a.store, [Up("carol")], [])
        await wait_for(lambda: b.get(ScramMechanism.SCRAM_SHA_256, "carol") is not None, timeout=1.0)
        # Forget it behind the store's back, then expire b's session: the re-sync reads it again.
        b.cache.update_user("carol", {})
        await expire_session(b.store.zk)
        await wait_for(lambda: b.get(ScramMechanism.SCRAM_SHA_256, "carol") is not None, timeout=10.0,
                       message="b reads every user after its new session")

    run_nodes(connect_string, 2, scenario)
