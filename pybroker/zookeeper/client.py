"""The asyncio face of one ZooKeeper session: a kazoo ``KazooClient`` that never blocks the loop.

Owns one kazoo client (its default ``SequentialThreadingHandler``: a connection thread, a watch
thread and a completion thread) and the hand-over of everything kazoo produces to the event
loop that called `ZooKeeperClient.connect`:

- Operations are kazoo's ``*_async`` calls, which only queue the request; the result is handed
  to an asyncio future through ``loop.call_soon_threadsafe`` by a ``rawlink`` callback on
  kazoo's completion thread. Only the recursive delete and `close` (which joins kazoo's
  threads) run in the default executor.
- ``watch=`` callbacks and state listeners are re-posted to the loop the same way, so they run
  on the loop thread, one at a time, in the order kazoo saw them. They must not block; real
  work (reads, elections) belongs in a task fed by them. After `close` none is delivered, and a
  loop already closed is not called at all.
- Errors are kazoo's exceptions, re-exported here (`NoNodeError`, `NodeExistsError`,
  `BadVersionError`, `NotEmptyError`, `ConnectionLoss`, `SessionExpiredError`, ...); nothing is
  retried. `multi` runs a ZooKeeper transaction and raises `MultiOpError` naming the failing op
  (kazoo's own ``commit()`` returns exception instances instead of raising).

Session states are kazoo's `KazooState`: CONNECTED; SUSPENDED (connection lost, the session and
its ephemerals may still be alive: do not assume ownership); LOST (the session expired or was
closed, its ephemerals are gone; kazoo reconnects with a new session by itself, and the owner
must re-register, as Kafka's ``RegisterBrokerAndReelect`` does). Unlike the Java client, kazoo
forgets every one-shot watch when the connection is lost: each pending watch fires once with an
event of type ``NONE`` (state CONNECTING), and whoever relied on it must read again and re-arm
once CONNECTED comes back.

The session handshake on a new connection is bounded by a third of the session timeout
(`HandshakeBoundedConnection`): a ZooKeeper server still loading its database can accept a
connection and never answer it, and waiting the whole session timeout there (kazoo's and the
Java client's bound) lets the session the server just restored expire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.protocol.connection import ConnectionHandler
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

__all__ = [
    "BadVersionError",
    "CheckOp",
    "ConnectionClosedError",
    "ConnectionLoss",
    "CreateOp",
    "DeleteOp",
    "EventType",
    "KazooException",
    "KazooState",
    "MultiOpError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionExpiredError",
    "SetDataOp",
    "WatchCallback",
    "WatchedEvent",
    "ZkOp",
    "ZnodeStat",
    "ZooKeeperClient",
    "ZooKeeperConnectionError",
    "ZookeeperError",
    "split_chroot",
]

log = logging.getLogger(__name__)

WatchCallback = Callable[[WatchedEvent], object]
StateListener = Callable[[str], object]


class ZooKeeperConnectionError(Exception):
    """No ZooKeeper session within the connection timeout (Kafka's ``zookeeper.connection.timeout.ms``)."""


@dataclass(frozen=True)
class CreateOp:
    """Create ``path`` (persistent unless ``ephemeral``; ``sequence`` appends a 10-digit counter)."""

    path: str
    value: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetDataOp:
    """Set ``path``'s data if its zkVersion is ``version`` (-1: any version)."""

    path: str
    value: bytes
    version: int


@dataclass(frozen=True)
class DeleteOp:
    """Delete ``path`` if its zkVersion is ``version`` (-1: any version)."""

    path: str
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    """Fail the transaction unless ``path``'s zkVersion is ``version``."""

    path: str
    version: int


ZkOp = CreateOp | SetDataOp | DeleteOp | CheckOp


class MultiOpError(Exception):
    """A `ZooKeeperClient.multi` was rolled back: op ``index`` failed with ``error``."""

    def __init__(self, ops: Sequence[ZkOp], results: list[Any], index: int, error: KazooException) -> None:
        super().__init__(f"ZooKeeper transaction failed at op {index} ({ops[index]}): {type(error).__name__}")
        self.ops = list(ops)
        self.results = results
        self.index = index
        self.error = error


def split_chroot(connect_string: str) -> tuple[str, str | None]:
    """``"h1:2181,h2:2181/kafka"`` -> ``("h1:2181,h2:2181", "/kafka")``; no chroot gives None."""
    hosts, slash, chroot = connect_string.partition("/")
    if not slash or not chroot.strip("/"):
        return hosts, None
    return hosts, "/" + chroot.strip("/")


class _OnLoop:
    """A kazoo callback that re-posts its call to the client's loop; equal for the same target,
    so that kazoo (which keeps watchers and listeners in sets) registers a callback once."""

    __slots__ = ("client", "target")

    def __init__(self, client: ZooKeeperClient, target: Callable[..., object]) -> None:
        self.client = client
        self.target = target

    def __call__(self, *args: object) -> None:
        self.client._post(self.target, args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OnLoop) and other.client is self.client and other.target == self.target

    def __hash__(self) -> int:
        return hash(self.target)


class ZooKeeperClient:
    """One ZooKeeper session, used from one event loop. Create it with `connect`."""

    def __init__(self, zk: KazooClient, loop: asyncio.AbstractEventLoop, connect_string: str) -> None:
        self._zk = zk
        self._loop = loop
        self.connect_string = connect_string
        self._closed = False
        self._connected_waiters: set[asyncio.Future[None]] = set()
        self.add_state_listener(self._wake_connected_waiters)

    @classmethod
    async def connect(
        cls,
        connect_string: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
    ) -> ZooKeeperClient:
        """A connected session; a chroot suffix (``host:port/kafka``) is created first if missing.

        ``session_timeout_ms`` is a proposal the server clamps to its minimum and maximum.
        Raises `ZooKeeperConnectionError` if no session is established in ``connection_timeout_ms``.
        """
        hosts, chroot = split_chroot(connect_string)
        if chroot is not None:
            # As Kafka does: a chroot-less session makes sure the chroot exists.
            root = await cls._start(hosts, session_timeout_ms, connection_timeout_ms, connect_string)
            try:
                await root.ensure_path(chroot)
            finally:
                await root.close()
        return await cls._start(connect_string, session_timeout_ms, connection_timeout_ms, connect_string)

    @classmethod
    async def _start(
        cls, hosts: str, session_timeout_ms: int, connection_timeout_ms: int, shown_address: str
    ) -> ZooKeeperClient:
        loop = asyncio.get_running_loop()
        zk = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            # Reconnect forever, at most a second apart (kazoo's default backs off to an hour).
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
        )
        zk._connection = HandshakeBoundedConnection(  # replaces kazoo's own, not yet started
            zk, zk._conn_retry.copy(), logger=zk.logger, handshake_timeout_s=session_timeout_ms / 3000
        )
        client = cls(zk, loop, hosts)
        try:
            zk.start_async()  # only starts kazoo's threads; they make the connection
            await asyncio.wait_for(client.wait_until_connected(), connection_timeout_ms / 1000)
        except TimeoutError:
            await client.close()
            raise ZooKeeperConnectionError(
                f"Timed out waiting for a ZooKeeper session with {shown_address} "
                f"after {connection_timeout_ms} ms (zookeeper.connection.timeout.ms)"
            ) from None
        except BaseException:
            await client.close()
            raise
        return client

    # -- session ------------------------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        """The current session's id (a znode's ``ephemeralOwner``); None while not connected."""
        client_id = self._zk.client_id
        return client_id[0] if client_id else None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` while connected (another client could resume the session)."""
        return self._zk.client_id

    @property
    def state(self) -> str:
        """CONNECTED, SUSPENDED or LOST (`KazooState`)."""
        return self._zk.state

    @property
    def connected(self) -> bool:
        return self._zk.connected

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_until_connected(self) -> None:
        """Return once the client is connected (at once if it is); `ConnectionClosedError`
        if it is or gets closed meanwhile."""
        while not self._zk.connected:
            if self._closed:
                raise ConnectionClosedError("the ZooKeeper client is closed")
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._connected_waiters.add(waiter)
            try:
                await waiter
            finally:
                self._connected_waiters.discard(waiter)

    def _wake_connected_waiters(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            for waiter in self._connected_waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def add_state_listener(self, callback: StateListener) -> None:
        """Call ``callback(state)`` on the loop at each `KazooState` change."""
        self._zk.add_listener(_OnLoop(self, callback))

    def remove_state_listener(self, callback: StateListener) -> None:
        self._zk.remove_listener(_OnLoop(self, callback))

    async def close(self) -> None:
        """End the session (its ephemerals are deleted at once) and free kazoo's threads and
        sockets; no callback is delivered afterwards."""
        if self._closed:
            return
        self._closed = True
        for waiter in self._connected_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionClosedError("the ZooKeeper client is closed"))
        await self._loop.run_in_executor(None, self._stop_kazoo)

    def _stop_kazoo(self) -> None:
        try:
            self._zk.stop()
        finally:
            self._zk.close()

    # -- hand-over to the loop ------------------------------------------------------------------

    def _post(self, target: Callable[..., object], args: tuple[object, ...]) -> None:
        """From a kazoo thread: run ``target(*args)`` on the loop."""
        if self._closed:
            return
        try:
            self._loop.call_soon_threadsafe(self._run_callback, target, args)
        except RuntimeError:  # the loop is closed: nobody is left to tell
            pass

    def _run_callback(self, target: Callable[..., object], args: tuple[object, ...]) -> None:
        if self._closed:
            return
        try:
            target(*args)
        except Exception:
            log.exception("ZooKeeper callback %r failed", target)

    def _watcher(self, watch: WatchCallback | None) -> _OnLoop | None:
        return _OnLoop(self, watch) if watch is not None else None

    def _wait(self, async_result: Any) -> asyncio.Future[Any]:
        """An asyncio future settled, on the loop, with a kazoo ``IAsyncResult``'s outcome."""
        future: asyncio.Future[Any] = self._loop.create_future()

        def settle(value: object, error: BaseException | None) -> None:
            if future.done():  # the awaiting task was cancelled
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def on_complete(result: Any) -> None:  # on kazoo's completion thread (or right here)
            try:
                value, error = result.get(block=False), None
            except Exception as e:
                value, error = None, e
            try:
                self._loop.call_soon_threadsafe(settle, value, error)
            except RuntimeError:
                pass  # the loop is closed

        async_result.rawlink(on_complete)
        return future

    # -- operations ---------------------------------------------------------------------------

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        """The data (b"" for a znode created without data) and stat; `NoNodeError` if missing."""
        data, stat = await self._wait(self._zk.get_async(path, watch=self._watcher(watch)))
        return data or b"", stat

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """The children's names (not paths); `NoNodeError` if ``path`` is missing."""
        return list(await self._wait(self._zk.get_children_async(path, watch=self._watcher(watch))))

    async def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        """The stat, or None; the watch is set either way (it fires on creation too)."""
        return await self._wait(self._zk.exists_async(path, watch=self._watcher(watch)))

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> tuple[str, ZnodeStat]:
        """The created path (with its sequence suffix) and stat; `NodeExistsError`, or
        `NoNodeError` for a missing parent unless ``makepath``."""
        result = self._zk.create_async(
            path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath, include_data=True
        )
        created, stat = await self._wait(result)
        return created, stat

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        """Set the data if the zkVersion is ``version`` (-1: any); `BadVersionError` otherwise."""
        return await self._wait(self._zk.set_async(path, value, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete the znode (`NotEmptyError` if it has children). ``recursive`` deletes its
        children first, ignoring ``version``; it is not atomic and runs in the default executor."""
        if recursive:
            await self._loop.run_in_executor(None, lambda: self._zk.delete(path, recursive=True))
        else:
            await self._wait(self._zk.delete_async(path, version))

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing ancestors, with empty data."""
        await self._wait(self._zk.ensure_path_async(path))

    async def multi(self, ops: Sequence[ZkOp]) -> list[Any]:
        """Run ``ops`` as one ZooKeeper transaction: all apply or none does.

        Returns one result per op: the created path for `CreateOp`, the new `ZnodeStat` for
        `SetDataOp`, True for `DeleteOp` and `CheckOp`. Raises `MultiOpError` when it was rolled
        back, and kazoo's connection errors when it may not have reached the server.
        """
        if not ops:
            return []
        transaction = self._zk.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                transaction.create(op.path, op.value, ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetDataOp):
                transaction.set_data(op.path, op.value, op.version)
            elif isinstance(op, DeleteOp):
                transaction.delete(op.path, op.version)
            elif isinstance(op, CheckOp):
                transaction.check(op.path, op.version)
            else:
                raise TypeError(f"not a ZooKeeper op: {op!r}")
        results = list(await self._wait(transaction.commit_async()))
        errors = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
        if errors:
            # The failing op carries its own error; the others say they were rolled back
            # (the ops before it) or not tried (the ops after it).
            index, error = next(
                ((i, r) for i, r in errors if not isinstance(r, RolledBackError | RuntimeInconsistency)),
                errors[0],
            )
            raise MultiOpError(ops, results, index, error)
        return results


class HandshakeBoundedConnection(ConnectionHandler):
    """kazoo's connection handler, with the session handshake (ConnectRequest and its answer)
    given at most ``handshake_timeout_s`` before the connection is dropped and retried.

    ZooKeeper 3.8 binds its port before it loads its database; a connection accepted then is
    refused with an exception whose clean-up fails (a NullPointerException in ``removeCnxn``), so
    the socket stays open and unanswered. kazoo would wait ``timeout / len(hosts)`` for the answer
    and reconnect only after the session restored from the server's snapshot has expired."""

    def __init__(self, client: KazooClient, retry_sleeper: KazooRetry, *, logger: logging.Logger,
                 handshake_timeout_s: float) -> None:
        super().__init__(client, retry_sleeper, logger=logger)
        self.handshake_timeout_s = handshake_timeout_s

    def _invoke(self, timeout: float, request: Any, xid: int | None = None) -> Any:
        return super()._invoke(min(timeout, self.handshake_timeout_s), request, xid)
