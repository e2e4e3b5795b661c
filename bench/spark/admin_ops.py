"""Topic set-up, DeleteRecords and retention-sweep latencies, with pybroker's own admin client.

* ``create_topics``: CreateTopics for the run's topics (works against pybroker and Tansu).
* ``DeleteRecordsLoop``: a driver thread that, every ``interval`` seconds while the load runs,
  moves each partition's log start offset up to ``high watermark - keep`` with one DeleteRecords
  request, and records the round trip of each request (ms).
* ``retention_sweep``: after the load, one DeleteRecords at offset -1 (the high watermark) over
  every partition; reports the round trip and the time until ListOffsets(earliest) equals the
  high watermark everywhere.

A broker without DeleteRecords (Tansu 0.6 drops the connection) gives an ``error`` entry instead
of latencies; the loop stops at its first failure.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from bench.spark.stats import summarize_latencies

ADMIN_TIMEOUT_S = 10.0


def _tps(partitions: list[tuple[str, int]]) -> list[Any]:
    from pybroker.types import TopicPartition

    return [TopicPartition(t, p) for t, p in partitions]


def _admin(bootstrap: str) -> Any:
    from pybroker.client.admin import Admin

    return Admin(bootstrap, client_id="bench-admin", request_timeout=ADMIN_TIMEOUT_S)


def create_topics(
    bootstrap: str,
    topics: list[str],
    partitions: int,
    configs: dict[str, str] | None = None,
    replication_factor: int = 1,
) -> float:
    """Create ``topics`` with ``partitions`` each; return the seconds it took."""

    async def go() -> None:
        async with _admin(bootstrap) as admin:
            await admin.create_topics(
                topics,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs=configs,
            )

    t0 = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - t0


def list_offsets(
    bootstrap: str, partitions: list[tuple[str, int]], spec: str
) -> dict[tuple[str, int], int]:
    """ListOffsets ``spec`` (earliest|latest) of each partition."""

    async def go() -> dict[tuple[str, int], int]:
        async with _admin(bootstrap) as admin:
            res = await admin.list_offsets(_tps(partitions), spec)
            return {(tp.topic, tp.partition): o.offset for tp, o in res.items()}

    return asyncio.run(go())


class DeleteRecordsLoop(threading.Thread):
    """Periodic DeleteRecords to ``high watermark - keep`` on every partition."""

    def __init__(
        self, bootstrap: str, partitions: list[tuple[str, int]], interval: float, keep: int
    ) -> None:
        super().__init__(name="delete-records", daemon=True)
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.interval = interval
        self.keep = keep
        self.calls: list[list[float]] = []  # [t, round trip ms, partitions moved]
        self.error: str | None = None
        self._stop_event = threading.Event()
        self.t0 = time.monotonic()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=60)

    def run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        tps = _tps(self.partitions)
        try:
            async with _admin(self.bootstrap) as admin:
                while not self._stop_event.is_set():
                    latest = await admin.list_offsets(tps, "latest")
                    offsets = {
                        tp: o.offset - self.keep for tp, o in latest.items() if o.offset > self.keep
                    }
                    if offsets:
                        t = time.monotonic()
                        res = await admin.delete_records(
                            offsets, timeout_ms=int(ADMIN_TIMEOUT_S * 1000)
                        )
                        ms = (time.monotonic() - t) * 1000
                        failed = [f"{tp}: {r}" for tp, r in res.items() if isinstance(r, Exception)]
                        if failed:
                            self.error = "; ".join(failed[:3])
                            return
                        self.calls.append([round(t - self.t0, 3), ms, len(offsets)])
                    await asyncio.get_running_loop().run_in_executor(
                        None, self._stop_event.wait, self.interval
                    )
        except Exception as exc:  # e.g. Tansu does not answer DeleteRecords
            self.error = describe(exc)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interval_s": self.interval,
            "keep": self.keep,
            "requests": len(self.calls),
            "calls": self.calls,
            "error": self.error,
        }
        out["latency_ms"] = summarize_latencies([c[1] for c in self.calls])
        return out


def retention_sweep(
    bootstrap: str, partitions: list[tuple[str, int]], visible_timeout: float = 30.0
) -> dict[str, Any]:
    """One DeleteRecords(-1) over every partition; its round trip, and until earliest == latest."""

    async def go() -> dict[str, Any]:
        tps = _tps(partitions)
        async with _admin(bootstrap) as admin:
            latest = await admin.list_offsets(tps, "latest")
            t0 = time.monotonic()
            res = await admin.delete_records(
                {tp: -1 for tp in tps}, timeout_ms=int(ADMIN_TIMEOUT_S * 1000)
            )
            rtt = (time.monotonic() - t0) * 1000
            failed = [f"{tp}: {r}" for tp, r in res.items() if isinstance(r, Exception)]
            if failed:
                return {"error": "; ".join(failed[:3]), "partitions": len(tps)}
            visible_ms = None
            while time.monotonic() - t0 < visible_timeout:
                earliest = await admin.list_offsets(tps, "earliest")
                if all(earliest[tp].offset >= latest[tp].offset for tp in tps):
                    visible_ms = (time.monotonic() - t0) * 1000
                    break
            return {
                "partitions": len(tps),
                "records_before": sum(o.offset for o in latest.values()),
                "delete_records_ms": rtt,
                "start_offsets_visible_ms": visible_ms,
                "error": None,
            }

    try:
        return asyncio.run(go())
    except Exception as exc:
        return {"error": describe(exc), "partitions": len(partitions)}


def describe(exc: BaseException) -> str:
    """``Type: message``, saying what an empty TimeoutError means."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"TimeoutError: no answer within {ADMIN_TIMEOUT_S:g} s"
    return f"{type(exc).__name__}: {exc}"
