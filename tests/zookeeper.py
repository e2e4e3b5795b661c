"""Test support for ZooKeeper: a test-tuned server process and session helpers.

`ZooKeeperProcess` is a `ZooKeeperServer` on a free loopback port with short ticks (250 ms) and
a low minimum session timeout (1 s), so that session-expiry tests take a second or less; the
``zookeeper`` fixture in conftest starts one per test module and stops it by its PID. Tests
that need ZooKeeper fail (they do not skip) when it is not installed: CI installs it.

Tests share the module's server by each working under its own chroot (`chroot_for`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient

from pybroker.zookeeper.client import ZooKeeperClient
from pybroker.zookeeper.server import ZooKeeperServer
from tests.conftest import free_port

SESSION_TIMEOUT_MS = 4000


class ZooKeeperProcess(ZooKeeperServer):
    """A ZooKeeper server for tests: free port, 250 ms ticks, sessions from 1 s to 30 s, no fsync."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        super().__init__(
            directory,
            port or free_port(),
            tick_time_ms=250,
            min_session_timeout_ms=1000,
            max_session_timeout_ms=30000,
            force_sync=False,
            heap_mb=128,
        )


def chroot_for(zookeeper: ZooKeeperServer, name: str) -> str:
    """A connect string with a chroot of its own for one test (its name, made path-safe)."""
    return f"{zookeeper.connect_string}/{re.sub(r'[^A-Za-z0-9_.-]', '-', name)}"


async def connect(connect_string: str, session_timeout_ms: int = SESSION_TIMEOUT_MS) -> ZooKeeperClient:
    return await ZooKeeperClient.connect(connect_string, session_timeout_ms, connection_timeout_ms=10000)


async def wait_for(condition: Callable[[], object], timeout: float = 10.0, message: str = "") -> object:
    """Poll ``condition`` on the loop until it is truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or condition}")
        await asyncio.sleep(0.01)
    return result


def _take_over_and_close(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Attach a second client to the session (the server drops the first connection), then
    close the session: when the first client reconnects, its session has expired."""
    other = KazooClient(hosts=hosts, client_id=client_id, timeout=SESSION_TIMEOUT_MS / 1000)
    other.start(timeout=10)
    try:
        other.stop()
    finally:
        other.close()


async def expire_session(client: ZooKeeperClient, timeout: float = 10.0) -> int:
    """Make ``client``'s session expire now (no waiting for the session timeout); returns once
    kazoo has connected a new session, whose id it returns."""
    old = client.session_id
    assert old is not None, "the client has no session to expire"
    hosts = client.connect_string.split("/", 1)[0]
    deadline = time.monotonic() + timeout
    while True:
        client_id = client.client_id
        if client_id is not None and client_id[0] != old:
            return client_id[0]
        if client_id is not None:
            # Still (or again: it may win the reconnection race) on the old session.
            await asyncio.to_thread(_take_over_and_close, hosts, client_id)
        if time.monotonic() > deadline:
            raise AssertionError(f"session 0x{old:x} did not expire within {timeout}s")
        await asyncio.sleep(0.01)
