"""Time and background tasks, both injectable (Kafka's ``Time`` and ``KafkaScheduler``).

Owns the broker's notion of now, `Time` (wall-clock milliseconds for timestamps and retention,
monotonic milliseconds for intervals), and its timed background work, `Scheduler`: run an action
after a delay, once or every period (Kafka's kafka-log-retention, the checkpoint writers, the
removal of ``.deleted`` files, offset expiry). A run that fails is logged and does not stop the
next one. It also sets one-shot timers (``call_later``) for deadlines that are mostly cancelled
before they fire, such as the group coordinator's purgatories'. Components take a `Time` and a
`Scheduler` instead of calling ``time.time()``, ``asyncio.sleep`` or ``loop.call_later``, so that
tests can drive them with a mock clock (``tests/mock_time.py``) and never sleep.

`AsyncioScheduler` runs everything on the event loop that calls ``schedule``; an action may be a
plain function or return an awaitable. Periodic runs keep a fixed rate (Kafka's
``scheduleAtFixedRate``): one that overruns its period delays the next, never overlaps it. Cancelling stops
future runs but lets a run under way finish, as Kafka's scheduler does, so a checkpoint being
written is never cut off; ``shutdown()`` cancels everything and waits for those runs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)

Action = Callable[[], Awaitable[object] | object]


class Time(Protocol):
    def milliseconds(self) -> int:
        """Wall-clock time in ms since the epoch (record timestamps, retention.ms)."""
        ...

    def monotonic_ms(self) -> float:
        """A clock for measuring intervals, in ms; never goes back."""
        ...


class SystemTime:
    """The real clocks."""

    def milliseconds(self) -> int:
        return int(time.time() * 1000)

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000


SYSTEM_TIME = SystemTime()


class ScheduledTask(Protocol):
    def cancel(self) -> None:
        """No further runs; a run under way finishes (as Kafka's scheduler lets it)."""
        ...

    async def wait(self) -> None:
        """Until no run is under way and none will come (after ``cancel``, or a one-shot's run)."""
        ...


class Timer(Protocol):
    def cancel(self) -> None:
        """The callback will not run (if it has not yet)."""
        ...


class Scheduler(Protocol):
    def schedule(self, name: str, action: Action, delay_ms: float, period_ms: float | None = None) -> ScheduledTask:
        """Run ``action`` after ``delay_ms``, then every ``period_ms`` (None: once)."""
        ...

    def call_later(self, delay_ms: float, callback: Callable[[], object]) -> Timer:
        """Call ``callback`` (plain, quick) once after ``delay_ms``: a deadline, such as a
        purgatory's, that is set and cancelled far more often than it fires."""
        ...

    async def shutdown(self) -> None:
        """Cancel everything scheduled and wait for the runs under way to end."""
        ...


class AsyncioScheduler:
    """A `Scheduler` on the running event loop: one asyncio task per scheduled action."""

    def __init__(self) -> None:
        self._scheduled: set[_AsyncioTask] = set()

    def schedule(self, name: str, action: Action, delay_ms: float, period_ms: float | None = None) -> _AsyncioTask:
        scheduled = _AsyncioTask(name, action, delay_ms, period_ms, self._scheduled.discard)
        self._scheduled.add(scheduled)
        return scheduled

    def call_later(self, delay_ms: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)

    async def shutdown(self) -> None:
        scheduled = list(self._scheduled)
        for task in scheduled:
            task.cancel()
        await asyncio.gather(*(task.wait() for task in scheduled))


class _AsyncioTask:
    __slots__ = ("name", "_task", "_running", "_cancelled")

    def __init__(
        self, name: str, action: Action, delay_ms: float, period_ms: float | None,
        on_done: Callable[[_AsyncioTask], None],
    ) -> None:
        self.name = name
        self._running = False
        self._cancelled = False
        self._task = asyncio.get_running_loop().create_task(self._run(action, delay_ms, period_ms), name=name)
        self._task.add_done_callback(lambda _: on_done(self))

    async def _run(self, action: Action, delay_ms: float, period_ms: float | None) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + max(delay_ms, 0) / 1000
        while True:
            await asyncio.sleep(max(due - loop.time(), 0))
            self._running = True
            try:
                await run_action(self.name, action)
            finally:
                self._running = False
            if period_ms is None or self._cancelled:
                return
            due = max(due + period_ms / 1000, loop.time())

    def cancel(self) -> None:
        self._cancelled = True
        if not self._running:
            self._task.cancel()

    async def wait(self) -> None:
        await asyncio.gather(self._task, return_exceptions=True)


async def run_action(name: str, action: Action) -> None:
    """One run of a scheduled action; an exception is logged, never raised (Kafka's scheduler
    logs it the same way, and the next run still comes)."""
    try:
        result = action()
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("Uncaught exception in scheduled task '%s'", name)
