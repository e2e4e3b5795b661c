"""Throughput over time and the progress line.

``OffsetSampler`` is a driver thread that asks the broker for the high watermark of every
partition of the run's topics (ListOffsets latest, pybroker's own admin client) every
``interval`` seconds; the sum over partitions gives acked records over time, for any broker and
any client. Caveat: Tansu 0.6 answers the last batch's base offset + 1 (not the log end), so its
samples lag by up to one producer batch per partition; the run totals come from the producers.

``Progress`` prints one stderr line (``\\r``-updated on a terminal, every 5 s otherwise): records
done / total, rate, ETA.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, TextIO

from bench.spark.stats import fmt_int


class Progress:
    """A one-line progress indicator on stderr."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        duration_s: float | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.duration_s = duration_s
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self._last_print = 0.0
        self._shown = False

    def update(self, done: int, rate: float | None) -> None:
        """Show ``done`` records at ``rate`` records/s."""
        now = time.monotonic()
        if not self.tty and now - self._last_print < 5.0:
            return
        self._last_print = now
        elapsed = now - self.t0
        parts = [f"[{self.label}] {fmt_int(done)}"]
        if self.total:
            pct = min(100.0, 100.0 * done / self.total)
            parts[0] += f"/{fmt_int(self.total)} rec ({pct:.0f}%)"
        else:
            parts[0] += " rec"
        if rate is not None:
            parts.append(f"{fmt_int(rate)} rec/s")
        eta = None
        if self.total and rate:
            eta = max(0.0, (self.total - done) / rate)
        elif self.duration_s:
            eta = max(0.0, self.duration_s - elapsed)
        parts.append(f"{elapsed:.0f} s" + (f", ETA {eta:.0f} s" if eta is not None else ""))
        line = "  ".join(parts)
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the line (terminal only)."""
        if self.tty and self._shown:
            self.stream.write("\n")
            self.stream.flush()


class OffsetSampler(threading.Thread):
    """Samples the sum of high watermarks of ``partitions`` every ``interval`` seconds."""

    def __init__(
        self,
        bootstrap: str,
        partitions: list[tuple[str, int]],
        interval: float = 0.5,
        progress: Progress | None = None,
    ) -> None:
        super().__init__(name="offset-sampler", daemon=True)
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.interval = interval
        self.progress = progress
        self.samples: list[list[float]] = []  # [seconds since start, records]
        self.errors: list[str] = []
        self.t0 = time.monotonic()
        self.base = 0
        self._stop_event = threading.Event()
        self._ready = threading.Event()

    def start_and_wait(self, timeout: float = 30.0) -> None:
        """Start and wait for the first sample (the baseline)."""
        self.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"offset sampler: no first sample after {timeout:.0f} s")
        if self.errors and not self.samples:
            raise RuntimeError("offset sampler: " + self.errors[0])

    def stop(self) -> None:
        """Take a last sample and end the thread."""
        self._stop_event.set()
        self.join(timeout=30)

    @property
    def latest(self) -> int:
        return int(self.samples[-1][1]) if self.samples else 0

    def run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        from pybroker.client.admin import Admin
        from pybroker.types import TopicPartition

        tps = [TopicPartition(t, p) for t, p in self.partitions]
        try:
            admin = Admin(self.bootstrap, client_id="bench-sampler", request_timeout=10.0)
            await admin.connect()
        except Exception as exc:
            self.errors.append(f"connect: {exc!r}")
            self._ready.set()
            return
        try:
            first = True
            while True:
                stopping = self._stop_event.is_set()
                t = time.monotonic() - self.t0
                try:
                    offsets = await admin.list_offsets(tps, "latest")
                    total = sum(o.offset for o in offsets.values())
                    if first:
                        self.base, first = total, False
                    self.samples.append([round(t, 3), total - self.base])
                except Exception as exc:
                    if len(self.errors) < 20:
                        self.errors.append(f"{t:.1f}s: {exc!r}")
                self._ready.set()
                if self.progress and len(self.samples) >= 2:
                    (ta, na), (tb, nb) = self.samples[-2], self.samples[-1]
                    self.progress.update(int(nb), (nb - na) / (tb - ta) if tb > ta else None)
                if stopping:
                    return
                # timed wait between samples; returns early when stop() is called
                await asyncio.get_running_loop().run_in_executor(
                    None, self._stop_event.wait, self.interval
                )
        finally:
            await admin.close()


def sampler_summary(sampler: OffsetSampler) -> dict[str, Any]:
    """Samples and errors for the results."""
    return {
        "interval_s": sampler.interval,
        "samples": sampler.samples,
        "errors": sampler.errors,
    }
