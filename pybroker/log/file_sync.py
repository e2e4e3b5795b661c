"""Durability of small metadata files without fsyncs on the event loop, coalesced.

Owns the two shapes of background durability the log manager, the cleaner and the metadata and
ACL files of a single broker use:

* `CoalescingFileWriter`: one file rewritten atomically, by this one writer (the log dirs' offset
  checkpoints, ``cleaner-offset-checkpoint``, ``cluster-metadata.json``, the ACL file). A change
  asks for a save and may await it; changes made while a save is under way are all covered by
  the next one, so a burst of changes costs one or two writes, not one per change. The text is
  rendered on the event loop (a consistent snapshot) and written and fsynced in a worker thread.
* `BackgroundPasses`: work on many items in a worker thread, all items pending at that moment in
  one pass. Files and directories written without fsync (a new partition's
  ``partition.metadata`` and the directory entries that name it) are fsynced that way
  (`fsync_paths`: one ``syncfs`` when there are many), so creating 10,000 partitions costs
  10,000 cheap writes on the creating path and the fsyncs happen behind it; leader-epoch
  checkpoints are written that way too.

Outside a running event loop (tools and unit tests that use these classes directly) both write
and fsync synchronously.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from pybroker import _native
from pybroker.log.checkpoint import write_atomically

log = logging.getLogger(__name__)

SYNCFS_THRESHOLD = 64

T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _observed(future: asyncio.Future[None]) -> asyncio.Future[None]:
    """A future whose failure nobody has to retrieve (the writer logs it itself)."""
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return future


class CoalescingFileWriter:
    """Rewrites ``path`` atomically with ``render()``'s text, in the background, coalescing.
    The file's one writer: its saves never overlap (`pybroker.log.checkpoint`)."""

    def __init__(self, path: str, render: Callable[[], str], *, log_errors: bool = True) -> None:
        self.path = path
        self._render = render
        #: False when every caller handles the save's error itself (e.g. a failed log dir).
        self._log_errors = log_errors
        self._next: asyncio.Future[None] | None = None  # the save that will cover new changes
        self._task: asyncio.Task[None] | None = None

    def request(self) -> asyncio.Future[None] | None:
        """Schedule a save covering every change made so far; returns a future done when it is
        on disk (its exception is the write's ``OSError``), or None when written synchronously
        (no running loop). The future is shared by every request the save covers: await it
        through ``asyncio.shield``, so that a waiter's cancellation leaves it to the others."""
        loop = _running_loop()
        if loop is None:
            write_atomically(self.path, self._render())
            return None
        if self._next is None:
            self._next = _observed(loop.create_future())
        if self._task is None:
            self._task = loop.create_task(self._run())
        return self._next

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._next is not None:
                saving, self._next = self._next, None
                try:
                    text = self._render()  # may refuse (e.g. the file's log dir went offline)
                    await loop.run_in_executor(None, write_atomically, self.path, text)
                except Exception as e:
                    if self._log_errors:
                        log.error("Could not save %s: %s", self.path, e)
                    if not saving.done():
                        saving.set_exception(e)
                else:
                    if not saving.done():  # cancelled by a waiter that was cancelled itself
                        saving.set_result(None)
        finally:
            self._task = None

    async def close(self) -> None:
        """Wait for the saves requested so far."""
        while self._task is not None:
            await asyncio.shield(self._task)


def fsync_paths(paths: Iterable[str]) -> None:
    """fsync each file or directory; one that is gone already (deleted meanwhile) is skipped.
    More than `SYNCFS_THRESHOLD` paths are made durable by one ``syncfs`` per filesystem instead
    (one journal commit rather than one per file: creating 10,000 partitions leaves 30,000)."""
    paths = list(paths)
    if len(paths) > SYNCFS_THRESHOLD:
        by_device: dict[int, str] = {}
        for path in paths:
            try:
                by_device.setdefault(os.stat(path).st_dev, path)
            except FileNotFoundError:
                continue
        for path in by_device.values():
            _native.sync_filesystem(path)
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class BackgroundPasses(Generic[T, P, R]):
    """Work on items behind the event loop, coalesced: a pass takes every item requested so far,
    ``prepare``s them on the loop (a consistent snapshot) and hands that to ``work`` in a worker
    thread; items requested meanwhile go in the next pass. The log manager runs two: fsyncing
    new partitions' files (`fsync_paths`), and writing leader-epoch checkpoints."""

    def __init__(self, name: str, prepare: Callable[[list[T]], P], work: Callable[[P], R],
                 on_done: Callable[[R], None] | None = None) -> None:
        self.name = name
        self._prepare = prepare
        self._work = work
        #: Given what a pass's ``work`` returned, on the event loop (e.g. the failures it met).
        self._on_done = on_done
        self._pending: dict[T, None] = {}  # ordered: files before the directories naming them
        self._in_pass: frozenset[T] = frozenset()
        self._task: asyncio.Task[None] | None = None

    def request(self, items: Iterable[T], *, start: bool = True) -> None:
        """Queue ``items``; with ``start=False`` they wait for the next `start` (or another
        request). Outside a running loop the work is done at once."""
        if _running_loop() is None:
            self._done(self._work(self._prepare(list(items))))
            return
        self._pending.update(dict.fromkeys(items))
        if start:
            self.start()

    def _done(self, result: R) -> None:
        if self._on_done is not None:
            try:
                self._on_done(result)
            except Exception:
                log.exception("%s: handling the pass's outcome failed", self.name)

    def start(self) -> None:
        if self._task is None and self._pending:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = list(self._pending), {}
                self._in_pass = frozenset(batch)
                try:
                    result = await loop.run_in_executor(None, self._work, self._prepare(batch))
                except OSError as e:
                    log.error("%s failed: %s", self.name, e)
                else:
                    self._done(result)
        finally:
            self._in_pass = frozenset()
            self._task = None

    async def settle(self, item: T) -> None:
        """Wait until ``item`` is neither queued nor in a pass under way."""
        self.start()
        while self._task is not None and (item in self._pending or item in self._in_pass):
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Run what is queued and wait until every pass is done."""
        self.start()
        while self._task is not None:
            await asyncio.shield(self._task)
