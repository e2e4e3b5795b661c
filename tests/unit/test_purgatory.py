"""The purgatory: completion by event or by deadline, exactly once."""

import asyncio

from pybroker.server.purgatory import DelayedOperation, Purgatory
from tests.mock_time import MockScheduler, MockTime


class WaitFor(DelayedOperation):
    def __init__(self, delay_ms, state, target):
        super().__init__(delay_ms)
        self.state, self.target = state, target
        self.completions, self.expired = 0, False

    def try_complete(self):
        return self.state["value"] >= self.target and self.force_complete()

    def on_complete(self):
        self.completions += 1

    def on_expiration(self):
        self.expired = True


def test_completes_on_event_once():
    async def run():
        purgatory = Purgatory("test")
        state = {"value": 0}
        op = WaitFor(10_000, state, 2)
        assert not purgatory.try_complete_else_watch(op, ["a", "b"])
        assert purgatory.watched("a") == 1 and len(purgatory) == 1
        state["value"] = 1
        assert purgatory.check_and_complete("a") == 0
        state["value"] = 2
        assert purgatory.check_and_complete("b") == 1
        assert purgatory.check_and_complete("a") == 0
        assert op.completions == 1 and not op.expired and len(purgatory) == 0

    asyncio.run(run())


def test_completes_immediately_when_satisfied():
    async def run():
        op = WaitFor(10_000, {"value": 5}, 2)
        assert Purgatory("t").try_complete_else_watch(op, ["a"])
        assert op.completions == 1

    asyncio.run(run())


def test_expires_at_deadline():
    async def run():
        purgatory = Purgatory("t")
        op = WaitFor(20, {"value": 0}, 1)
        purgatory.try_complete_else_watch(op, ["a"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not op.is_completed and loop.time() < deadline:
            await asyncio.sleep(0.005)
        assert op.completions == 1 and op.expired and purgatory.watched("a") == 0

    asyncio.run(run())


def test_deadlines_on_an_injected_scheduler_follow_its_clock():
    async def run():
        scheduler = MockScheduler(MockTime())
        purgatory = Purgatory("t", scheduler)
        expiring, completed = WaitFor(1000, {"value": 0}, 1), WaitFor(1000, {"value": 0}, 1)
        purgatory.try_complete_else_watch(expiring, ["a"])
        purgatory.try_complete_else_watch(completed, ["b"])
        await scheduler.advance(999)
        assert not expiring.is_completed
        completed.state["value"] = 1
        assert purgatory.check_and_complete("b") == 1  # its deadline is cancelled
        await scheduler.advance(1)
        assert expiring.expired and not completed.expired
        assert expiring.completions == completed.completions == 1 and len(purgatory) == 0
        assert scheduler.tasks("timer") == []  # no deadline left behind

    asyncio.run(run())


class Counted(WaitFor):
    """Counts its checks; blocked on every key while its target is not reached."""

    def __init__(self, delay_ms, state, target):
        super().__init__(delay_ms, state, target)
        self.checks = 0

    def try_complete(self):
        self.checks += 1
        return super().try_complete()

    def blocked_on(self, key):
        return self.state["value"] < self.target


def test_in_key_order_a_scan_stops_at_the_first_blocked_operation():
    async def run():
        purgatory = Purgatory("produce", in_key_order=True)
        state = {"value": 0}
        ops = [Counted(10_000, state, target) for target in range(1, 101)]
        for op in ops:
            purgatory.watch(op, ["tp"])
        state["value"] = 3
        assert purgatory.check_and_complete("tp") == 3
        assert [op.checks for op in ops[:5]] == [1, 1, 1, 1, 0]  # 1..3 done, 4 blocked, 5.. not looked at
        assert sum(op.checks for op in ops) == 4
        state["value"] = 100
        assert purgatory.check_and_complete("tp") == 97
        assert len(purgatory) == 0

    asyncio.run(run())


def test_without_key_order_every_operation_is_checked():
    async def run():
        purgatory = Purgatory("any")
        state = {"value": 0}
        ops = [Counted(10_000, state, target) for target in (5, 1)]
        for op in ops:
            purgatory.watch(op, ["k"])
        state["value"] = 1
        assert purgatory.check_and_complete("k") == 1  # the second, behind a blocked first
        assert ops[1].completions == 1 and ops[0].completions == 0
        purgatory.shutdown()

    asyncio.run(run())
