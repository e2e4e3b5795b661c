"""CoalescingFileWriter: one writer per file, bursts folded into one save, waiters independent."""

from __future__ import annotations

import asyncio
import threading

from pybroker.log import file_sync
from pybroker.log.file_sync import CoalescingFileWriter


def test_a_burst_of_requests_is_saved_by_one_or_two_writes_never_at_once(tmp_path, monkeypatch):
    writes: list[str] = []
    writing = threading.Lock()
    overlapped = []

    def write(path: str, text: str) -> None:
        if not writing.acquire(blocking=False):
            overlapped.append(text)
            return
        try:
            writes.append(text)
        finally:
            writing.release()

    monkeypatch.setattr(file_sync, "write_atomically", write)
    state = {"n": 0}

    async def run() -> None:
        writer = CoalescingFileWriter(str(tmp_path / "f"), lambda: str(state["n"]))
        saves = []
        for n in range(1, 21):
            state["n"] = n
            saves.append(writer.request())
        await asyncio.gather(*(asyncio.shield(s) for s in saves))
        await writer.close()

    asyncio.run(run())
    assert overlapped == [] and 1 <= len(writes) <= 2 and writes[-1] == "20"


def test_a_cancelled_waiter_leaves_the_save_to_the_others(tmp_path, monkeypatch):
    """A save's future is shared by the requests it covers; a waiter cancelled meanwhile (a
    periodic checkpoint at shutdown) must not cancel it for the rest, nor break the writer."""
    release = threading.Event()

    def slow_write(path: str, text: str) -> None:
        assert release.wait(10)

    monkeypatch.setattr(file_sync, "write_atomically", slow_write)

    async def run() -> None:
        writer = CoalescingFileWriter(str(tmp_path / "f"), lambda: "x")
        first = writer.request()
        await asyncio.sleep(0)  # the write is under way
        second = writer.request()  # covered by the next save
        waiter = asyncio.ensure_future(asyncio.shield(second))
        other = asyncio.ensure_future(asyncio.shield(second))
        await asyncio.sleep(0)
        waiter.cancel()
        release.set()
        await asyncio.shield(first)
        await other  # still completes
        await writer.close()
        assert second.done() and not second.cancelled()

    asyncio.run(run())
