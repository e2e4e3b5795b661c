"""Kafka's purgatory: requests that wait for a condition, with a deadline.

Owns the generic delayed-operation mechanism used by delayed produce (acks=all waiting for the
high watermark), delayed fetch (long poll until ``min_bytes`` or ``max_wait_ms``) and delayed
delete-records (waiting for the low watermark), and by the group coordinator's join, sync and
session deadlines. An operation is watched under one or more keys
(e.g. a topic partition); whoever changes the state behind a key calls ``check_and_complete(key)``;
an operation completes exactly once, either because ``try_complete`` found its condition true or
because its deadline passed (then ``on_complete`` runs, followed by ``on_expiration``).

A purgatory may be told that its operations become ready **in key order** (delayed produce: the
appends behind one partition's waiting operations were made in the order they were watched, and
each waits for the high watermark to reach its own end): a scan of a key then stops at the first
operation that is still ``blocked_on`` it, so a high watermark that moves under many waiting
acks=all produces costs the operations it completes, not all of them.

Everything runs on the event loop thread. Deadlines are event-loop timers (a heap), or the timers
of the ``Scheduler`` a purgatory is given (as Kafka's purgatories are given their ``Timer``): a test
that injects ``tests/mock_time.MockScheduler`` decides when they fall due.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable

from pybroker.scheduler import Scheduler, Timer


class DelayedOperation:
    """A request waiting in a purgatory. Subclasses implement ``try_complete`` and ``on_complete``."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(delay_ms, 0)
        self._completed = False
        self._timer: Timer | None = None
        self._keys: tuple[Hashable, ...] = ()
        self._purgatory: Purgatory | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    def try_complete(self) -> bool:
        """Check the condition; if it holds, call ``force_complete()`` and return its result."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Produce the result (runs exactly once)."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the deadline, not the condition, completed it."""

    def blocked_on(self, key: Hashable) -> bool:
        """Whether this incomplete operation still waits on ``key`` in a way that holds every
        operation watched under ``key`` after it (consulted by purgatories in key order)."""
        return False

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self._completed:
            return False
        self._completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer = None
        if self.force_complete():
            self.on_expiration()


class Purgatory:
    """Operations of one kind, watched by key, completed by events or by their deadlines."""

    def __init__(self, name: str, scheduler: Scheduler | None = None, in_key_order: bool = False) -> None:
        self.name = name
        self.scheduler = scheduler  # None: deadlines are event-loop timers
        self.in_key_order = in_key_order
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}

    def __len__(self) -> int:
        """Operations currently waiting (each counted once)."""
        return len({op for ops in self._watchers.values() for op in ops})

    def watched(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    def watched_total(self) -> int:
        """Watched entries over every key (Kafka's PurgatorySize: an operation counts once per key)."""
        return sum(len(ops) for ops in self._watchers.values())

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if possible, else watch it under ``keys`` until its deadline.

        Returns True if it completed immediately.
        """
        if operation.try_complete():
            return True
        self.watch(operation, keys)
        return False

    def watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """Watch ``operation`` under ``keys`` until its deadline, without checking it first: for a
        caller that has just found it incomplete (all of this runs on one thread, so nothing can
        have changed in between)."""
        operation._keys = tuple(keys)
        operation._purgatory = self
        for key in operation._keys:
            self._watchers.setdefault(key, {})[operation] = None
        if self.scheduler is None:
            operation._timer = asyncio.get_running_loop().call_later(operation.delay_ms / 1000, operation._expire)
        else:
            operation._timer = self.scheduler.call_later(operation.delay_ms, operation._expire)

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching ``key``, in the order they were watched (in key order:
        up to the first still blocked on it); returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if op.is_completed:
                continue
            if op.try_complete():
                completed += 1
            elif self.in_key_order and op.blocked_on(key):
                break
        return completed

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in operation._keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.pop(operation, None)
                if not ops:
                    del self._watchers[key]

    def shutdown(self) -> None:
        """Complete everything still waiting (as if expired), e.g. at broker shutdown."""
        for op in {op for ops in self._watchers.values() for op in ops}:
            op._expire()
