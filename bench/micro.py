"""Micro-benchmark of the storage hot path and the codec, measured through Python.

Usage::

    python bench/micro.py [--repeat 7] [--mib 256] [--ops 20000] [--out bench/results]
    python bench/micro.py --repeat 1 --mib 8 --ops 2000 --out /tmp/micro   # smoke run

Six figures, each timed with ``time.perf_counter`` over ``--repeat`` repetitions of a fixed
amount of work after ``--warmup`` untimed repetitions of the same work; the result is the median
and the min-max spread of the per-repetition rates:

1. ``Segment.append`` throughput (GB/s, 1e9 bytes of record sets per second): ``--mib`` MiB per
   repetition, appended as record sets of at most ``--set-kib`` KiB (default 1 MiB), each a
   writable ``bytearray`` of whole uncompressed magic-2 batches of ~``--batch-kib`` KiB holding
   ``--value-bytes``-byte values (built once with ``_native.build_batch``; ``--buffers`` copies
   are cycled so the same bytes are not always hot in the CPU cache). CreateTime, so append only
   patches ``baseOffset`` / ``partitionLeaderEpoch`` in place and writes (no fsync). Each
   repetition starts a fresh segment in a fresh directory; when a segment would exceed
   ``--segment-mib`` MiB the clock is paused, it is deleted and a new one opened, so disk use
   stays below ``--segment-mib`` MiB (default 512) plus index files. Rolling is left out of the
   figure: the first record set appended into each new segment, which pays a one-off fault on
   the memory-mapped offset index (a few ms), is appended with the clock stopped and not counted
   (its times are in the JSON as ``untimed_first_append_ms``).
2. ``validate_batches`` throughput (GB/s) over the same record sets, ``--mib`` MiB per repetition
   (``max_message_bytes`` = Kafka's default 1048588).
3. ``Segment.read`` throughput (GB/s): ``--mib`` MiB per repetition read 1 MiB (``--set-kib``) at
   a time, whole batches, from the segment just written (so in the page cache; one more untimed
   pass than ``--warmup`` reads it all again first), cycling through it if it is smaller than ``--mib`` MiB. A segment
   that fits the CPU caches (a smoke run's few MiB) reads much faster than the default 256 MiB.
4. One small append (µs): ``Segment.append`` of a one-record batch with a ``--small-value-bytes``
   value (default 100 B), ``--ops`` appends per repetition, into a fresh segment.
5. ``codec.decode_request`` of a Produce v9 request (µs): one topic, one partition, records = the
   one-record batch of 4.; the frame is made by ``codec.encode_request`` and decoded from a writable
   memoryview as the broker does (the header, decoded once beforehand by
   ``decode_request_header``, is not in the figure). ``--ops`` decodes per repetition.
6. ``codec.encode_response`` of a one-partition Fetch v12 response (µs): records = the small
   batch as bytes, fields as ``pybroker/server/apis/fetch.py`` fills them; the response object is
   built once, ``--ops`` encodes per repetition.

The garbage collector is left enabled (as in the broker). The JSON also records which build of
the native module was measured: the cargo artifact (``target/release`` or ``target/debug``) it is
byte for byte identical to.

Results: bench/results/micro.{json,md} (``--out`` DIR), with every per-repetition figure, the
parameters, ``machine_info()`` and the ``provenance`` stamp.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import REPO, confirm_provenance, machine_info, provenance, provenance_line  # noqa: E402

sys.path.insert(0, str(REPO))
from pybroker import _native  # noqa: E402
from pybroker.protocol import codec, messages  # noqa: E402

MIB = 1 << 20
TIMESTAMP = 1_700_000_000_000
MAX_MESSAGE_BYTES = 1048588  # Kafka's default message.max.bytes
PRODUCE, FETCH = 0, 1


# --------------------------------------------------------------------------- inputs


def record_set(set_bytes: int, batch_bytes: int, value_bytes: int) -> bytes:
    """Whole uncompressed magic-2 batches of ~``batch_bytes`` (``value_bytes``-byte values, null
    keys), as many as fit in ``set_bytes``."""
    probe = len(_native.build_batch([(None, b"v" * value_bytes)] * 2, TIMESTAMP))
    one = len(_native.build_batch([(None, b"v" * value_bytes)], TIMESTAMP))
    per_record = probe - one
    count = max(1, (batch_bytes - (one - per_record)) // per_record)
    batch = _native.build_batch([(None, b"v" * value_bytes)] * count, TIMESTAMP)
    if len(batch) > set_bytes:
        raise SystemExit(f"a {len(batch)}-byte batch does not fit a {set_bytes}-byte record set")
    return batch * (set_bytes // len(batch))


def produce_frame(records: bytes) -> bytearray:
    """A Produce v9 request frame (size prefix included): one topic, one partition."""
    request = messages.ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[messages.ProduceRequest.TopicProduceData(name="bench-topic", partition_data=[
            messages.ProduceRequest.PartitionProduceData(index=0, records=records)])])
    return codec.encode_request(PRODUCE, 9, 1, "bench-client", request)


def fetch_response(records: bytes) -> Any:
    """A one-partition Fetch v12 response, fields as ``server/apis/fetch.py`` sets them."""
    partition = messages.FetchResponse.PartitionData(
        partition_index=0, error_code=0, high_watermark=1000, last_stable_offset=1000,
        log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=records)
    topic = messages.FetchResponse.FetchableTopicResponse(topic="bench-topic", partitions=[partition])
    return messages.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic])


# --------------------------------------------------------------------------- build type


def native_build() -> dict[str, Any]:
    """Which build of ``pybroker._native`` is measured: the cargo artifact it is identical to."""
    module = Path(_native.__file__).resolve()
    digest = hashlib.sha256(module.read_bytes()).hexdigest()
    profile = next(
        (name for name in ("release", "debug")
         if (artifact := REPO / "target" / name / "lib_native.so").is_file()
         and hashlib.sha256(artifact.read_bytes()).hexdigest() == digest),
        "unknown (identical to neither target/release nor target/debug)",
    )
    return {"module": str(module), "sha256": digest, "profile": profile}


# --------------------------------------------------------------------------- timing


def repeat(warmup: int, repetitions: int, once: Callable[[], tuple[float, float]]) -> list[float]:
    """``once()`` does one repetition and returns (work done, seconds); the rates
    ``work / seconds`` of the ``repetitions`` timed ones, after ``warmup`` discarded ones."""
    rates = []
    for i in range(warmup + repetitions):
        work, seconds = once()
        if i >= warmup:
            rates.append(work / seconds)
    return rates


def calls(ops: int, fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """(``ops``, seconds) of ``ops`` calls ``fn(*args)`` (no wrapper around the call)."""
    t0 = time.perf_counter()
    for _ in range(ops):
        fn(*args)
    return ops, time.perf_counter() - t0


def small_appends(segment: _native.Segment, batch: bytearray, ops: int) -> tuple[float, float]:
    """(``ops``, seconds) of ``ops`` appends of ``batch`` at the segment's next offset."""
    append = segment.append
    t0 = time.perf_counter()
    for _ in range(ops):
        append(batch, segment.next_offset, 0, -1)
    return ops, time.perf_counter() - t0


def us_per_call(rates: list[float]) -> list[float]:
    """Calls per second to µs per call."""
    return [1e6 / rate for rate in rates]


class Appender:
    """Appends record sets into fresh segments under ``root``, rolling (clock paused) at
    ``limit`` bytes; keeps the last segment for reading.

    Rolling is not part of the figure: opening a segment, deleting the old one and the first
    append into a new one (which pays the first write fault on the memory-mapped index, a
    one-off of a few ms per segment; its times are kept in ``first_append_s``) happen with the
    clock stopped, and that first record set is not counted."""

    def __init__(self, root: Path, limit: int) -> None:
        self.root, self.limit, self.count = root, limit, 0
        self.segment: _native.Segment | None = None
        self.first_append_s: list[float] = []

    def fresh(self) -> _native.Segment:
        """Delete the current segment and open an empty one in a new directory."""
        self.drop()
        self.count += 1
        directory = self.root / f"seg-{self.count}"
        directory.mkdir()
        self.segment = _native.Segment(str(directory), 0)
        return self.segment

    def drop(self) -> None:
        if self.segment is not None:
            directory = Path(self.segment.path).parent
            self.segment.delete()
            shutil.rmtree(directory, ignore_errors=True)
            self.segment = None

    def roll(self, first: bytearray) -> _native.Segment:
        """A fresh segment holding ``first`` (untimed, uncounted)."""
        segment = self.fresh()
        t0 = time.perf_counter()
        segment.append(first, segment.next_offset, 0, -1)
        self.first_append_s.append(time.perf_counter() - t0)
        return segment

    def run(self, sets: list[bytearray], total: int) -> tuple[float, float]:
        """Append ``total`` bytes of record sets (cycling through ``sets``): (bytes, seconds)."""
        segment = self.roll(sets[-1])
        done, seconds, i = 0, 0.0, 0
        while done < total:
            t0 = time.perf_counter()
            while done < total:
                buf = sets[i % len(sets)]
                if segment.size + len(buf) > self.limit or segment.index_is_full:
                    break
                segment.append(buf, segment.next_offset, 0, -1)
                done += len(buf)
                i += 1
            seconds += time.perf_counter() - t0
            if done < total:
                segment = self.roll(sets[-1])
        return done, seconds


def read_plan(segment: _native.Segment, max_bytes: int) -> list[int]:
    """Fetch offsets that read the segment front to back, ``max_bytes`` of whole batches each."""
    offsets, taken = [], max_bytes
    for header in segment.batches():
        if taken + header.size > max_bytes:
            offsets.append(header.base_offset)
            taken = 0
        taken += header.size
    return offsets


def read_pass(segment: _native.Segment, plan: list[int], max_bytes: int, total: int) -> tuple[float, float]:
    """Read ``total`` bytes (whole batches, ``max_bytes`` a call, cycling through ``plan``)."""
    done, i, end = 0, 0, 1 << 62
    t0 = time.perf_counter()
    while done < total:
        done += len(segment.read(plan[i % len(plan)], max_bytes, end, False))
        i += 1
    return done, time.perf_counter() - t0


# --------------------------------------------------------------------------- run


def summarize(values: list[float], unit: str, **work: Any) -> dict[str, Any]:
    return {"unit": unit, "median": statistics.median(values), "min": min(values), "max": max(values),
            "per_repetition": values, **work}


def measure(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, derived parameters)."""
    set_bytes, total = args.set_kib * 1024, args.mib * MIB
    template = record_set(set_bytes, args.batch_kib * 1024, args.value_bytes)
    info = _native.validate_batches(template, MAX_MESSAGE_BYTES)
    sets = [bytearray(template) for _ in range(args.buffers)]
    per_repetition = -(-total // len(template)) * len(template)  # whole record sets
    small = _native.build_batch([(None, b"v" * args.small_value_bytes)], TIMESTAMP)
    w, r = args.warmup, args.repeat
    metrics: dict[str, Any] = {}

    appender = Appender(workdir, args.segment_mib * MIB)
    try:
        rates = repeat(w, r, lambda: appender.run(sets, total))
        metrics["append"] = summarize([x / 1e9 for x in rates], "GB/s", bytes_per_repetition=per_repetition,
                                      untimed_first_append_ms=[t * 1e3 for t in appender.first_append_s])

        def validate() -> tuple[float, float]:
            done, i = 0, 0
            t0 = time.perf_counter()
            while done < total:
                done += _native.validate_batches(sets[i % len(sets)], MAX_MESSAGE_BYTES).size
                i += 1
            return done, time.perf_counter() - t0

        rates = repeat(w, r, validate)
        metrics["validate"] = summarize([x / 1e9 for x in rates], "GB/s", bytes_per_repetition=per_repetition)

        segment = appender.segment
        assert segment is not None
        plan = read_plan(segment, set_bytes)
        rates = repeat(w + 1, r, lambda: read_pass(segment, plan, set_bytes, total))
        metrics["read"] = summarize([x / 1e9 for x in rates], "GB/s", bytes_per_repetition=per_repetition,
                                    segment_bytes=segment.size)
        read_segment_bytes = segment.size

        small_buf = bytearray(small)
        segment = appender.fresh()
        rates = repeat(w, r, lambda: small_appends(segment, small_buf, args.ops))
        metrics["small_append"] = summarize(us_per_call(rates), "µs", ops_per_repetition=args.ops)
    finally:
        appender.drop()

    frame = produce_frame(small)
    view = memoryview(frame)[4:]
    header, body = codec.decode_request_header(view)
    assert (header.api_key, header.api_version) == (PRODUCE, 9)
    decoded = codec.decode_request(PRODUCE, 9, view, body)
    assert bytes(decoded.topic_data[0].partition_data[0].records) == small
    rates = repeat(w, r, lambda: calls(args.ops, codec.decode_request, PRODUCE, 9, view, body))
    metrics["decode_produce_v9"] = summarize(us_per_call(rates), "µs", ops_per_repetition=args.ops)

    response = fetch_response(small)
    encoded = codec.encode_response(FETCH, 12, 1, response)
    _, back = codec.decode_response(FETCH, 12, memoryview(encoded)[4:])
    assert back.responses[0].partitions[0].records == small
    rates = repeat(w, r, lambda: calls(args.ops, codec.encode_response, FETCH, 12, 1, response))
    metrics["encode_fetch_v12"] = summarize(us_per_call(rates), "µs", ops_per_repetition=args.ops)

    derived = {
        "record_set_bytes": len(template), "batches_per_set": info.batch_count,
        "records_per_set": info.record_count, "batch_bytes": len(template) // info.batch_count,
        "read_segment_bytes": read_segment_bytes, "small_batch_bytes": len(small),
        "produce_v9_frame_bytes": len(frame), "fetch_v12_frame_bytes": len(encoded),
    }
    return metrics, derived


LABELS = {
    "append": "`Segment.append`, {set} B record sets",
    "validate": "`validate_batches`, {set} B record sets",
    "read": "`Segment.read`, {set} B at a time, page cache",
    "small_append": "one small append ({small} B batch, 1 record)",
    "decode_produce_v9": "`decode_request` Produce v9 ({produce} B frame, 1 partition)",
    "encode_fetch_v12": "`encode_response` Fetch v12 ({fetch} B frame, 1 partition)",
}


def markdown(result: dict[str, Any]) -> str:
    d, native, m = result["derived"], result["native"], result["machine"]
    rows = "\n".join(
        f"| {LABELS[name].format(set=d['record_set_bytes'], small=d['small_batch_bytes'], produce=d['produce_v9_frame_bytes'], fetch=d['fetch_v12_frame_bytes'])} "
        f"| {v['median']:.2f} | {v['min']:.2f} – {v['max']:.2f} | {v['unit']} |"
        for name, v in result["metrics"].items()
    )
    p = result["parameters"]
    return f"""# Micro-benchmark: storage hot path and codec through Python

{provenance_line(result['provenance'])} Generated {result['generated']}.

Median and min – max of {p['repeat']} timed repetitions (after {p['warmup']} warm-up), each
{p['mib']} MiB of record sets (batches of ~{d['batch_bytes']} B, {p['value_bytes']} B values)
or {p['ops']} calls. GB/s = 1e9 bytes/s. Native module: {native['profile']} build. Machine: {m['nproc']} vCPU {m['cpu']}, Python {m['python']},
work dir on {m.get('workdir_filesystem', '?')}.

| metric | median | spread (min – max) | unit |
|---|---:|---:|---|
{rows}

Per-repetition figures, parameters and machine details are in `micro.json`.
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="timed repetitions per metric")
    ap.add_argument("--warmup", type=int, default=1, help="untimed repetitions before them")
    ap.add_argument("--mib", type=int, default=256, help="MiB of record sets per repetition (append, validate, read)")
    ap.add_argument("--ops", type=int, default=20000, help="calls per repetition (small append, decode, encode)")
    ap.add_argument("--set-kib", type=int, default=1024, help="record set size (and read size), KiB")
    ap.add_argument("--batch-kib", type=int, default=16, help="batch size inside a record set, KiB")
    ap.add_argument("--value-bytes", type=int, default=100, help="record value size in the record sets")
    ap.add_argument("--small-value-bytes", type=int, default=100, help="value of the small one-record batch")
    ap.add_argument("--buffers", type=int, default=8, help="copies of the record set cycled through")
    ap.add_argument("--segment-mib", type=int, default=512, help="roll the append segment beyond this size")
    ap.add_argument("--dir", type=Path, default=None, help="parent of the temporary segment dir (default: system temp)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="results directory")
    args = ap.parse_args(argv)
    if min(args.repeat, args.mib, args.ops, args.set_kib, args.batch_kib, args.buffers) < 1 or args.warmup < 0:
        ap.error("sizes and counts must be positive")
    if args.segment_mib * 1024 < 2 * args.set_kib or args.segment_mib > 2047:
        ap.error("--segment-mib must hold two record sets and stay below 2 GiB")

    stamp = provenance(__file__, argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-micro-", dir=args.dir) as work:
        workdir = Path(work)
        machine = machine_info(workdir)
        metrics, derived = measure(args, workdir)
    result = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "provenance": confirm_provenance(stamp),
        "machine": machine,
        "native": native_build(),
        "parameters": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "derived": derived,
        "metrics": metrics,
        "elapsed_s": round(time.perf_counter() - started, 2),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "micro.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    md = markdown(result)
    (out / "micro.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
