"""ZooKeeperClient against a real ZooKeeper: async operations, multi, watches and session states
on the loop thread, chroot creation, the connection timeout; and ZooKeeperServer itself."""

import asyncio
import threading
import time
from pathlib import Path

import pytest

from pybroker.zookeeper.client import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    KazooState,
    MultiOpError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SetDataOp,
    ZooKeeperClient,
    ZooKeeperConnectionError,
    split_chroot,
)
from pybroker.zookeeper.server import ZooKeeperInstall, ZooKeeperNotInstalledError
from tests.conftest import free_port
from tests.zookeeper import ZooKeeperProcess, chroot_for, connect, expire_session, wait_for


@pytest.fixture
def connect_string(zookeeper, request):
    return chroot_for(zookeeper, request.node.name)


def test_operations(connect_string):
    async def run():
        zk = await connect(connect_string)
        try:
            path, stat = await zk.create("/a", b"one")
            assert path == "/a" and stat.version == 0 and stat.ephemeralOwner == 0
            assert await zk.get("/a") == (b"one", stat)
            stat = await zk.set("/a", b"two", version=0)
            assert stat.version == 1
            with pytest.raises(BadVersionError):
                await zk.set("/a", b"three", version=0)
            assert (await zk.exists("/a")).version == 1
            assert await zk.exists("/missing") is None
            with pytest.raises(NoNodeError):
                await zk.get("/missing")
            with pytest.raises(NodeExistsError):
                await zk.create("/a")
            with pytest.raises(NoNodeError):
                await zk.create("/x/y")
            await zk.create("/x/y/z", b"", makepath=True)
            assert (await zk.get("/x/y/z"))[0] == b""
            created, _ = await zk.create("/x/seq_", sequence=True)
            assert created == "/x/seq_0000000001"  # the parent's cversion already counted y
            eph, stat = await zk.create("/eph", ephemeral=True)
            assert stat.ephemeralOwner == zk.session_id
            assert sorted(await zk.get_children("/x")) == ["seq_0000000001", "y"]
            with pytest.raises(NotEmptyError):
                await zk.delete("/x")
            with pytest.raises(BadVersionError):
                await zk.delete("/a", version=0)
            await zk.delete("/a", version=1)
            await zk.delete("/x", recursive=True)
            assert await zk.exists("/x") is None
            await zk.ensure_path("/p/q/r")
            await zk.ensure_path("/p/q/r")
            assert await zk.get_children("/p/q") == ["r"]
        finally:
            await zk.close()

    asyncio.run(run())


def test_multi_applies_all_or_nothing_and_names_the_failing_op(connect_string):
    async def run():
        zk = await connect(connect_string)
        try:
            await zk.create("/m", b"v0")
            with pytest.raises(MultiOpError) as failed:
                await zk.multi([CreateOp("/m/new"), SetDataOp("/m", b"v1", 5), CreateOp("/m/other")])
            assert failed.value.index == 1 and isinstance(failed.value.error, BadVersionError)
            assert await zk.get_children("/m") == []  # the create before it was rolled back
            with pytest.raises(MultiOpError) as failed:
                await zk.multi([CreateOp("/m"), DeleteOp("/m")])
            assert failed.value.index == 0 and isinstance(failed.value.error, NodeExistsError)
            with pytest.raises(MultiOpError) as failed:
                await zk.multi([CheckOp("/m", 0), CreateOp("/m/a"), CheckOp("/m", 7)])
            assert failed.value.index == 2 and isinstance(failed.value.error, BadVersionError)
            assert "op 2" in str(failed.value)

            results = await zk.multi([
                CheckOp("/m", 0),
                CreateOp("/m/a", b"x"),
                CreateOp("/m/s_", sequence=True),
                CreateOp("/m/e", ephemeral=True),
                SetDataOp("/m", b"v1", 0),
                DeleteOp("/m/a"),
            ])
            assert results[0] is True and results[1] == "/m/a" and results[2].startswith("/m/s_")
            assert results[4].version == 1 and results[5] is True
            assert sorted(await zk.get_children("/m")) == ["e", results[2].rsplit("/", 1)[1]]
            assert (await zk.exists("/m/e")).ephemeralOwner == zk.session_id
            assert await zk.multi([]) == []
        finally:
            await zk.close()

    asyncio.run(run())


def test_watches_and_state_changes_run_on_the_loop_thread(connect_string):
    async def run():
        loop_thread = threading.get_ident()
        zk = await connect(connect_string)
        watcher = await connect(connect_string)
        seen: list[tuple[str, object, int]] = []
        try:
            def record(kind):
                return lambda arg: seen.append((kind, arg, threading.get_ident()))

            await zk.create("/w", b"0")
            assert await zk.exists("/w2", watch=record("exists")) is None
            await zk.get("/w", watch=record("data"))
            await zk.get_children("/w", watch=record("children"))
            await watcher.set("/w", b"1")
            await watcher.create("/w/child")
            await watcher.create("/w2")
            await wait_for(lambda: len(seen) == 3, message="three watch events")
            events = {kind: (event.type, event.path) for kind, event, _ in seen}
            assert events == {
                "exists": (EventType.CREATED, "/w2"),
                "data": (EventType.CHANGED, "/w"),
                "children": (EventType.CHILD, "/w"),
            }
            assert {thread for _, _, thread in seen} == {loop_thread}

            # Session expiry: SUSPENDED, LOST, then CONNECTED with a new session, on the loop;
            # a pending one-shot watch fires once with a NONE event (kazoo drops watches).
            seen.clear()
            zk.add_state_listener(record("state"))
            await zk.get("/w", watch=record("data"))
            old_session = zk.session_id
            new_session = await expire_session(zk)
            assert new_session != old_session
            await wait_for(lambda: [a for k, a, _ in seen if k == "state"][-1:] == [KazooState.CONNECTED])
            states = [arg for kind, arg, _ in seen if kind == "state"]
            assert states[0] == KazooState.SUSPENDED and KazooState.LOST in states
            assert [arg.type for kind, arg, _ in seen if kind == "data"] == [EventType.NONE]
            assert {thread for _, _, thread in seen} == {loop_thread}
            assert await zk.exists("/w") is not None  # the new session works
        finally:
            await watcher.close()
            await zk.close()

    asyncio.run(run())


def test_close_ends_the_session_at_once_and_stops_callbacks(connect_string):
    async def run():
        zk = await connect(connect_string)
        observer = await connect(connect_string)
        states: list[str] = []
        try:
            await zk.create("/eph", ephemeral=True)
            zk.add_state_listener(states.append)
            gone = asyncio.Event()
            await observer.exists("/eph", watch=lambda event: gone.set())
            await zk.close()
            await asyncio.wait_for(gone.wait(), 5)  # not after a session timeout
            assert await observer.exists("/eph") is None
            assert zk.closed and states == []  # LOST after close is not delivered
            await zk.close()  # idempotent
        finally:
            await observer.close()

    asyncio.run(run())


def test_a_chroot_is_created_when_missing(zookeeper):
    async def run():
        zk = await connect(zookeeper.connect_string + "/chroot/deep")
        root = await connect(zookeeper.connect_string)
        try:
            await zk.create("/inside", b"x")
            assert await zk.get_children("/") == ["inside"]
            assert (await root.get("/chroot/deep/inside"))[0] == b"x"
        finally:
            await zk.close()
            await root.close()

    asyncio.run(run())
    assert split_chroot("h1:1,h2:2/a/b/") == ("h1:1,h2:2", "/a/b")
    assert split_chroot("h:1") == ("h:1", None) and split_chroot("h:1/") == ("h:1", None)


def test_connection_timeout_is_one_clear_line():
    port = free_port()  # nothing listens there

    async def run():
        start = time.monotonic()
        with pytest.raises(ZooKeeperConnectionError) as failed:
            await ZooKeeperClient.connect(f"127.0.0.1:{port}", 4000, connection_timeout_ms=300)
        return failed.value, time.monotonic() - start

    error, elapsed = asyncio.run(run())
    message = str(error)
    assert f"127.0.0.1:{port}" in message and "300 ms" in message and "zookeeper.connection.timeout.ms" in message
    assert "\n" not in message
    assert elapsed < 5


def test_missing_install_says_how_to_install(tmp_path):
    with pytest.raises(ZooKeeperNotInstalledError) as failed:
        ZooKeeperInstall.find(jar=tmp_path / "zookeeper.jar")
    message = str(failed.value)
    assert "apt-get install" in message and "zookeeper" in message and "\n" not in message


def test_server_restart_keeps_znodes(tmp_path: Path):
    server = ZooKeeperProcess(tmp_path / "zk")
    try:
        server.start()
        first_pid = server.pid
        config = server.config_path.read_text()
        for line in ("clientPortAddress=127.0.0.1", "admin.enableServer=false", "maxClientCnxns=0",
                     "4lw.commands.whitelist=ruok,srvr,mntr,stat", "minSessionTimeout=1000", "forceSync=no"):
            assert line in config.splitlines()

        async def write():
            zk = await connect(server.connect_string)
            try:
                await zk.create("/kept/node", b"data", makepath=True)
            finally:
                await zk.close()

        asyncio.run(write())
        assert server.stop() is not None and not server.alive
        server.start()
        assert server.pid != first_pid
        assert "Mode: standalone" in server.four_letter_word("srvr")

        async def read():
            zk = await connect(server.connect_string)
            try:
                return (await zk.get("/kept/node"))[0]
            finally:
                await zk.close()

        assert asyncio.run(read()) == b"data"
        assert "INFO" in server.log()  # slf4j-simple makes it log
    finally:
        server.stop()
