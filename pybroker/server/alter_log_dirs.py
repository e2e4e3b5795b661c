"""Moving a replica between log dirs (KIP-113): Kafka's ``ReplicaAlterLogDirsThread``.

Owns the copy of a partition's current log into its future log (``LogManager.future_logs``, in
the destination dir) and the swap once the copy has caught up. One asyncio task per moving
partition, on the event loop: each step reconciles the future log with the current one as a
follower does with its leader (a current log that was truncated, diverged, or moved its log
start offset past the copy cuts the future log the same way), reads whole batches of the current
log (the bytes in a worker thread, one region per step, up to ``replica.fetch.max.bytes``) and
appends them with ``Log.append_as_follower`` (one native call per record set). A
``replica.alter.log.dirs.io.max.bytes.per.second`` token bucket on the injected clock limits the
copy. When the future log's end meets the current log's: ``LogManager.finish_future_log`` closes,
renames and reopens it off the loop, the appends made meanwhile are copied, and
``LogManager.replace_current_with_future_log`` swaps it in within the same step (no append can
come between), so producers and consumers carry on against the new log.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Awaitable, Callable

from pybroker.log.leader_epoch import UNDEFINED_EPOCH
from pybroker.log.log import (
    Log,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
)
from pybroker.log.log_manager import LogManager
from pybroker.replication.truncation import diverging_epoch
from pybroker.scheduler import SystemTime, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

DEFAULT_COPY_MAX_BYTES = 1024 * 1024  # replica.fetch.max.bytes


class Throttle:
    """A token bucket of ``rate`` bytes per second on the injected clock (inf: never waits)."""

    def __init__(self, rate: float, time: Time, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.rate = rate
        self.time = time
        self._sleep = sleep
        self._available = 0.0
        self._last_ms = time.monotonic_ms()

    def delay_ms(self, amount: int) -> float:
        """Take ``amount`` bytes; how long to wait before using them (0: at once)."""
        if math.isinf(self.rate) or self.rate <= 0:
            return 0.0
        now = self.time.monotonic_ms()
        self._available = min(self.rate, self._available + (now - self._last_ms) * self.rate / 1000)
        self._last_ms = now
        self._available -= amount
        return 0.0 if self._available >= 0 else -self._available * 1000 / self.rate

    async def acquire(self, amount: int) -> None:
        delay = self.delay_ms(amount)
        if delay > 0:
            await self._sleep(delay / 1000)


def reconcile(current: Log, future: Log) -> None:
    """Cut the future log where it no longer matches the current one, as a follower's log is cut
    to its leader's: past the current log's end, or diverged from it (its latest epoch ends
    earlier in the current log), or wholly when the current log's start is past its end; then
    take the current log start offset."""
    if current.log_start_offset > future.log_end_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
        return
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
    latest = future.leader_epoch_cache.latest_epoch
    if latest != UNDEFINED_EPOCH and future.log_end_offset > future.log_start_offset:
        try:
            diverged = diverging_epoch(current.leader_epoch_cache, current.log_start_offset,
                                       current.log_end_offset, latest, future.log_end_offset)
        except OffsetOutOfRangeError:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return
        if diverged is not None:
            future.truncate_to(min(diverged[1], future.log_end_offset))
    if current.log_start_offset > future.log_start_offset:
        future.maybe_increment_log_start_offset(current.log_start_offset, "current log start offset moved")


def copy_now(current: Log, future: Log, max_bytes: int) -> int:
    """Copy synchronously until the future log has everything the current log has (the last
    step before the swap, on the event loop); returns the bytes copied."""
    copied = 0
    while True:
        reconcile(current, future)
        if future.log_end_offset >= current.log_end_offset:
            return copied
        data = current.read(future.log_end_offset, max_bytes, current.log_end_offset, True)
        if not data:
            return copied
        future.append_as_follower(memoryview(data))
        copied += len(data)


def catch_up_epochs(current: Log, future: Log) -> None:
    """Epochs the current log's leader assigned but wrote nothing in yet (no batch carries them)."""
    latest = future.leader_epoch_cache.latest_epoch
    for epoch, start in current.leader_epoch_cache.entries:
        if epoch > latest and start <= future.log_end_offset:
            future.assign_leader_epoch(epoch, start)


class ReplicaAlterLogDirsManager:
    """The running replica moves of this broker, one task each."""

    def __init__(
        self,
        log_manager: LogManager,
        current_log: Callable[[TopicPartition], Log | None],
        on_swapped: Callable[[TopicPartition, Log], None],
        *,
        time: Time | None = None,
        max_bytes_per_second: float = math.inf,
        copy_max_bytes: int = DEFAULT_COPY_MAX_BYTES,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.log_manager = log_manager
        self.current_log = current_log
        self.on_swapped = on_swapped
        self.time: Time = time or SystemTime()
        self.copy_max_bytes = copy_max_bytes
        self.throttle = Throttle(max_bytes_per_second, self.time, sleep)
        self._sleep = sleep
        self.tasks: dict[TopicPartition, asyncio.Task[None]] = {}

    def add_partition(self, tp: TopicPartition) -> None:
        """Start copying ``tp`` into its future log (no-op when a copy runs already)."""
        if tp not in self.tasks:
            task = asyncio.get_running_loop().create_task(self._move(tp), name=f"ReplicaAlterLogDirs-{tp}")
            self.tasks[tp] = task
            task.add_done_callback(functools.partial(self._moved, tp))

    def _moved(self, tp: TopicPartition, task: asyncio.Task[None]) -> None:
        if self.tasks.get(tp) is task:
            del self.tasks[tp]

    def remove_partitions(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            task = self.tasks.pop(tp, None)
            if task is not None:
                task.cancel()

    async def shutdown(self) -> None:
        tasks = list(self.tasks.values())
        self.tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _move(self, tp: TopicPartition) -> None:
        try:
            await self._copy_until_caught_up(tp)
        except asyncio.CancelledError:
            raise
        except OSError as e:
            log.error("Moving the replica of %s between log dirs failed: %s", tp, e)
        except Exception:
            log.exception("Moving the replica of %s between log dirs failed", tp)

    async def _copy_until_caught_up(self, tp: TopicPartition) -> None:
        loop = asyncio.get_running_loop()
        while True:
            current, future = self.current_log(tp), self.log_manager.get_future_log(tp)
            if current is None or future is None:
                return  # the partition (or its future log) went away: nothing to move
            reconcile(current, future)
            if future.log_end_offset >= current.log_end_offset:
                break
            start = future.log_end_offset
            region = current.read_region(start, self.copy_max_bytes, current.log_end_offset, True)
            if region is None:
                break
            try:
                data = await loop.run_in_executor(None, region.read)
            except OSError as e:
                current_dir = self.log_manager.dir_of(tp)
                if current_dir is not None and self.current_log(tp) is current:
                    self.log_manager.failure_channel.maybe_add_offline_log_dir(
                        current_dir, f"Exception while reading from {tp} in dir {current_dir}", e)
                return
            if (self.log_manager.get_future_log(tp) is not future or self.current_log(tp) is not current
                    or future.log_end_offset != start or not data):
                continue  # something moved while the bytes were read: reconcile and read again
            try:
                future.append_as_follower(memoryview(data))
            except (UnexpectedAppendOffsetError, OffsetsOutOfOrderError) as e:
                log.warning("Copy of %s into its future log restarts: %s", tp, e)
                await self._sleep(0.1)
                continue
            except OSError as e:
                future_dir = self.log_manager.future_dir_of(tp)
                if future_dir is not None:
                    self.log_manager.failure_channel.maybe_add_offline_log_dir(
                        future_dir, f"Error while appending to the future log of {tp}", e)
                return
            await self.throttle.acquire(len(data))
        await self._swap(tp)

    async def _swap(self, tp: TopicPartition) -> None:
        reopened = await self.log_manager.finish_future_log(tp)
        if reopened is None:
            return
        current = self.current_log(tp)
        if current is None or self.log_manager.get_future_log(tp) is not reopened:
            self.log_manager.remove_future_log(tp)
            return
        # Synchronous from here: what the current log got while the future one was reopened is
        # copied, and the future log becomes the current one, before any other append runs.
        copy_now(current, reopened, self.copy_max_bytes)
        catch_up_epochs(current, reopened)
        new_log = self.log_manager.replace_current_with_future_log(tp)
        self.on_swapped(tp, new_log)
