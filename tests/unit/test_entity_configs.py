"""Entity configs in both stores: brokers (dynamic broker configs, per broker and ``<default>``),
clients and users (quotas, with a user's clients nested as Kafka nests them). The ZooKeeper store
writes Kafka's znodes and ``<type>/<name>`` notifications and every other broker's listener hears
of the change; a store connecting later reads them all; the local store keeps them in its file
and still reads the users of a file written before entity configs existed."""

from __future__ import annotations

import asyncio
import json

import pytest

from pybroker.controller.local_store import LocalStore
from pybroker.controller.store import StoreListener
from pybroker.controller.zk_store import ZooKeeperStore
from tests.zookeeper import SESSION_TIMEOUT_MS, chroot_for, wait_for


class Heard:
    def __init__(self):
        self.entities: list[tuple[str, str, dict[str, str]]] = []
        self.users: list[tuple[str, dict[str, str]]] = []
        self.listener = StoreListener(
            on_entity_configs_changed=lambda t, n, c: self.entities.append((t, n, dict(c))),
            on_user_configs_changed=lambda u, c: self.users.append((u, dict(c))),
        )


def test_the_local_store_keeps_entity_configs_in_its_file(tmp_path):
    async def scenario():
        heard = Heard()
        store = LocalStore(str(tmp_path), "cluster", heard.listener)
        await store.set_entity_configs("brokers", "<default>", {"log.retention.ms": "1000"})
        await store.set_entity_configs("users", "alice", {"producer_byte_rate": "1024"})
        await store.set_entity_configs("users", "alice/clients/app", {"consumer_byte_rate": "2048"})
        await store.set_entity_configs("clients", "app", {"request_percentage": "50"})
        await store.close()
        assert heard.entities == [
            ("brokers", "<default>", {"log.retention.ms": "1000"}),
            ("users", "alice", {"producer_byte_rate": "1024"}),
            ("users", "alice/clients/app", {"consumer_byte_rate": "2048"}),
            ("clients", "app", {"request_percentage": "50"}),
        ]
        assert heard.users == [("alice", {"producer_byte_rate": "1024"})]  # plain users only
        again = LocalStore(str(tmp_path), "cluster")
        assert again.entity_configs("users") == {
            "alice": {"producer_byte_rate": "1024"}, "alice/clients/app": {"consumer_byte_rate": "2048"}}
        assert await again.read_entity_configs("brokers", ["<default>", "1"]) == {
            "<default>": {"log.retention.ms": "1000"}, "1": {}}
        assert again.user_configs() == {"alice": {"producer_byte_rate": "1024"}}
        await again.set_entity_configs("clients", "app", {})
        await again.close()
        assert "clients" not in json.loads((tmp_path / "cluster-metadata.json").read_text())["entity_configs"]

    asyncio.run(scenario())


def test_the_local_store_reads_the_users_of_an_older_file(tmp_path):
    (tmp_path / "cluster-metadata.json").write_text(json.dumps({
        "version": 1, "cluster_id": "cluster", "users": {"bob smith": {"SCRAM-SHA-256": "x"}}, "topics": []}))
    store = LocalStore(str(tmp_path), "cluster")
    assert store.user_configs() == {"bob smith": {"SCRAM-SHA-256": "x"}}
    assert store.entity_configs("users") == {"bob%20smith": {"SCRAM-SHA-256": "x"}}


@pytest.fixture
def connect_string(zookeeper, request):
    return chroot_for(zookeeper, request.node.name)


def test_zookeeper_entity_configs_reach_every_broker(connect_string):
    async def scenario():
        first, second = Heard(), Heard()
        a = await ZooKeeperStore.connect(connect_string, SESSION_TIMEOUT_MS, 10000, 1, "c", first.listener)
        b = await ZooKeeperStore.connect(connect_string, SESSION_TIMEOUT_MS, 10000, 2, "c", second.listener)
        late = None
        try:
            await a.set_entity_configs("brokers", "2", {"log.cleaner.threads": "2"})
            await a.set_entity_configs("users", "alice", {"producer_byte_rate": "1024"})
            await a.set_entity_configs("users", "<default>/clients/<default>", {"consumer_byte_rate": "10"})
            data, _ = await a.zk.get("/config/users/<default>/clients/<default>")
            assert json.loads(data) == {"version": 1, "config": {"consumer_byte_rate": "10"}}
            changes = sorted(await a.zk.get_children("/config/changes"))
            assert [json.loads((await a.zk.get(f"/config/changes/{c}"))[0]) for c in changes] == [
                {"version": 2, "entity_path": "brokers/2"},
                {"version": 2, "entity_path": "users/alice"},
                {"version": 2, "entity_path": "users/<default>/clients/<default>"},
            ]
            await wait_for(lambda: len(second.entities) == 3)
            assert second.entities == first.entities
            assert second.users == [("alice", {"producer_byte_rate": "1024"})]
            assert b.entity_configs("users") == {
                "alice": {"producer_byte_rate": "1024"}, "<default>/clients/<default>": {"consumer_byte_rate": "10"}}
            await a.set_entity_configs("brokers", "2", {})
            await wait_for(lambda: ("brokers", "2", {}) in second.entities)
            assert b.entity_configs("brokers") == {}
            # A broker connecting later reads them all.
            third = Heard()
            late = await ZooKeeperStore.connect(connect_string, SESSION_TIMEOUT_MS, 10000, 3, "c", third.listener)
            assert sorted(third.entities) == [
                ("users", "<default>/clients/<default>", {"consumer_byte_rate": "10"}),
                ("users", "alice", {"producer_byte_rate": "1024"}),
            ]
            assert await late.read_entity_configs("users") == {
                "alice": {"producer_byte_rate": "1024"}, "<default>": {},
                "<default>/clients/<default>": {"consumer_byte_rate": "10"}}
        finally:
            for store in (a, b, late):
                if store is not None:
                    await store.close()

    asyncio.run(scenario())
