"""The asyncio scheduler behind the broker's background tasks, and the mock one tests use instead.

Kafka's scheduler rules: a failing run is logged and the next run still comes; cancelling stops
future runs but lets a run under way finish (a checkpoint being written is never cut off), and
shutdown waits for it. The mock runs actions only when a test moves its clock.
"""

from __future__ import annotations

import asyncio
import logging

from pybroker.scheduler import AsyncioScheduler
from tests.mock_time import MockScheduler, MockTime


def test_a_failing_run_is_logged_and_the_next_run_still_comes(caplog):
    async def scenario() -> int:
        scheduler = AsyncioScheduler()
        runs = 0
        third = asyncio.Event()

        def action() -> None:
            nonlocal runs
            runs += 1
            if runs == 3:
                third.set()
            if runs == 1:
                raise RuntimeError("first run fails")

        task = scheduler.schedule("flaky", action, delay_ms=0, period_ms=0)
        await asyncio.wait_for(third.wait(), 10)
        task.cancel()
        await task.wait()
        await scheduler.shutdown()
        return runs

    with caplog.at_level(logging.ERROR):
        runs = asyncio.run(scenario())
    assert runs >= 3
    assert [r.getMessage() for r in caplog.records] == ["Uncaught exception in scheduled task 'flaky'"]


def test_cancel_lets_the_run_under_way_finish_and_stops_the_next(caplog):
    async def scenario() -> list[str]:
        scheduler = AsyncioScheduler()
        events: list[str] = []
        started, release = asyncio.Event(), asyncio.Event()

        async def checkpoint() -> None:
            events.append("start")
            started.set()
            await release.wait()
            events.append("end")

        scheduler.schedule("kafka-recovery-point-checkpoint", checkpoint, delay_ms=0, period_ms=0)
        await asyncio.wait_for(started.wait(), 10)
        stopping = asyncio.ensure_future(scheduler.shutdown())
        await asyncio.sleep(0)
        assert not stopping.done()  # shutdown waits for the run under way...
        release.set()
        await asyncio.wait_for(stopping, 10)
        return events

    assert asyncio.run(scenario()) == ["start", "end"]  # ...which ends, and no run follows


def test_one_shot_runs_once_and_a_cancelled_one_never():
    async def scenario() -> list[str]:
        scheduler = AsyncioScheduler()
        ran: list[str] = []
        once = scheduler.schedule("once", lambda: ran.append("once"), delay_ms=0)
        never = scheduler.schedule("never", lambda: ran.append("never"), delay_ms=60_000)
        never.cancel()
        await once.wait()
        await never.wait()
        await scheduler.shutdown()
        return ran

    assert asyncio.run(scenario()) == ["once"]


def test_mock_scheduler_runs_what_falls_due_in_order_at_a_fixed_rate():
    async def scenario() -> list[tuple[str, int]]:
        time = MockTime()
        scheduler = MockScheduler(time)
        ran: list[tuple[str, int]] = []
        scheduler.schedule("every-100", lambda: ran.append(("every-100", time.milliseconds())), 100, 100)
        scheduler.schedule("once-250", lambda: ran.append(("once-250", time.milliseconds())), 250)
        assert await scheduler.advance(99) == 0
        assert await scheduler.advance(201) == 4  # due at 100, 200, 250 and 300
        return ran

    now = MockTime().milliseconds() + 300  # every run of one tick sees the clock where it stopped
    assert asyncio.run(scenario()) == [("every-100", now), ("every-100", now), ("once-250", now), ("every-100", now)]
