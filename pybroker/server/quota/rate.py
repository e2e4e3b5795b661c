"""Kafka's windowed rate (``SampledStat`` + ``WindowedSum`` + ``Rate``/``SimpleRate``) and the
throttle time of a quota violation (``QuotaUtils.throttleTime``).

A `Rate` keeps ``samples`` samples of ``window_ms`` each: a value recorded at ``now`` goes into the
current sample, or starts the next one (reusing the oldest slot) once the current is
``window_ms`` old. Samples older than ``samples * window_ms`` are reset when measured. The rate is
the sum of the samples divided by the elapsed window: Kafka's ``Rate`` counts at least
``samples - 1`` full windows (so a fresh sensor does not report a huge rate after its first
record); ``SimpleRate`` (replication quotas) counts at least one window. Times are milliseconds
of the caller's clock (the broker uses ``Time.monotonic_ms``).
"""

from __future__ import annotations

import math


class Rate:
    """Units per second over the last ``samples`` windows of ``window_ms``."""

    __slots__ = ("samples", "window_ms", "simple", "_values", "_starts", "_current")

    def __init__(self, samples: int, window_ms: int, *, simple: bool = False) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        self.simple = simple
        self._values: list[float] = []
        self._starts: list[float] = []  # each sample's lastWindowMs
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self._values:
            self._values.append(0.0)
            self._starts.append(now_ms)
        elif now_ms - self._starts[self._current] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._values):
                self._values.append(0.0)
                self._starts.append(now_ms)
            else:
                self._values[self._current] = 0.0
                self._starts[self._current] = now_ms
        self._values[self._current] += value

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._values[i] = 0.0
                self._starts[i] = now_ms

    def total(self, now_ms: float) -> float:
        """The sum of the live samples (``WindowedSum``)."""
        self._purge(now_ms)
        return sum(self._values)

    def window_size(self, now_ms: float) -> float:
        """The elapsed time the rate divides by, in ms (``Rate.windowSize``/``SimpleRate``)."""
        self._purge(now_ms)
        if not self._values:
            self._values.append(0.0)
            self._starts.append(now_ms)
        elapsed = now_ms - min(self._starts)
        if self.simple:
            return max(elapsed, self.window_ms)
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: float) -> float:
        """Units per second."""
        total = self.total(now_ms)
        return total / (self.window_size(now_ms) / 1000.0)

    def last_record_ms(self) -> float:
        return max(self._starts) if self._starts else -math.inf


def throttle_time_ms(rate: Rate, bound: float, now_ms: float) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: how long, with nothing more recorded, until the
    observed rate O is back to the bound T over the window W: (O - T) / T * W; 0 within the bound."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    if bound <= 0:
        return int(rate.window_size(now_ms))
    return math.floor((observed - bound) / bound * rate.window_size(now_ms) + 0.5)  # Java's Math.round
