"""A clock and a scheduler that only move when a test says so (Kafka's MockTime and MockScheduler).

`MockTime` implements ``pybroker.scheduler.Time``; `MockScheduler` implements ``Scheduler`` over it:
scheduled actions run only inside ``tick()``, in the order they fall due, when the clock has
reached them. ``await scheduler.advance(ms)`` moves the clock and runs what fell due meanwhile,
so a test of a periodic task says exactly how many periods passed and never sleeps.
"""

from __future__ import annotations

import heapq
import itertools

from pybroker.scheduler import Action, run_action


class MockTime:
    """Wall clock and monotonic clock, both moved only by ``advance``."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: float = 0.0) -> None:
        self._wall_ms = wall_ms
        self._monotonic_ms = monotonic_ms

    def milliseconds(self) -> int:
        return self._wall_ms

    def monotonic_ms(self) -> float:
        return self._monotonic_ms

    def advance(self, ms: float) -> None:
        self._wall_ms += int(ms)
        self._monotonic_ms += ms


class MockTask:
    """One scheduled action; ``runs`` counts its runs so far."""

    def __init__(self, name: str, action: Action, due_ms: float, period_ms: float | None) -> None:
        self.name = name
        self.action = action
        self.due_ms = due_ms
        self.period_ms = period_ms
        self.cancelled = False
        self.runs = 0

    def cancel(self) -> None:
        self.cancelled = True

    async def wait(self) -> None:
        """Runs happen inside ``MockScheduler.tick``, which the test awaits: nothing is under way."""


class MockScheduler:
    """Runs scheduled actions at mock time, when the test ticks it."""

    def __init__(self, time: MockTime) -> None:
        self.time = time
        self._queue: list[tuple[float, int, MockTask]] = []
        self._order = itertools.count()

    def schedule(self, name: str, action: Action, delay_ms: float, period_ms: float | None = None) -> MockTask:
        task = MockTask(name, action, self.time.monotonic_ms() + max(delay_ms, 0), period_ms)
        heapq.heappush(self._queue, (task.due_ms, next(self._order), task))
        return task

    def call_later(self, delay_ms: float, callback: Action) -> MockTask:
        """A one-shot timer: a task like any other, run by ``tick`` when due."""
        return self.schedule("timer", callback, delay_ms)

    def tasks(self, name: str) -> list[MockTask]:
        """The scheduled (not cancelled) tasks called ``name``."""
        return [task for _, _, task in self._queue if task.name == name and not task.cancelled]

    async def tick(self) -> int:
        """Run every task due by now, earliest first (a periodic task as many times as its period
        fits); returns how many runs there were."""
        runs = 0
        while self._queue and self._queue[0][0] <= self.time.monotonic_ms():
            _, _, task = heapq.heappop(self._queue)
            if task.cancelled:
                continue
            await run_action(task.name, task.action)
            task.runs += 1
            runs += 1
            if task.period_ms is not None and not task.cancelled:
                task.due_ms += task.period_ms
                heapq.heappush(self._queue, (task.due_ms, next(self._order), task))
        return runs

    async def advance(self, ms: float) -> int:
        """Move the clock by ``ms`` and run what fell due."""
        self.time.advance(ms)
        return await self.tick()

    async def shutdown(self) -> None:
        for _, _, task in self._queue:
            task.cancel()
        self._queue.clear()
