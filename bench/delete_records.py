"""DeleteRecords benchmark: latency on one broker, and one bulk retention sweep.

Usage::

    python bench/delete_records.py [--requests 2000] [--partitions 1000] [--sweeps 5]

1. **Latency.** A one-partition topic holds ``--requests`` records; DeleteRecords (v3, with
   LeaderOnly=false, the default acknowledgement) moves the log start offset forward by one
   record per request, one request at a time over one connection of the project's own client.
   Reports p50/p99/max of the round trip as the client sees it.
2. **Bulk retention sweep** (seed 000's motivation): a topic of ``--partitions`` partitions, a few
   records in each; ONE DeleteRecords with offset -1 (the high watermark) for every partition;
   time until the answer. Repeated ``--sweeps`` times (records are produced again in between).

The broker is a fresh ``python -m pybroker serve`` with default settings on a free port, stopped by
PID at the end. Results: bench/results/delete_records.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_compare import REPO, Broker, broker_command, broker_env, free_port  # noqa: E402
from brokers import confirm_provenance, machine_info, provenance, provenance_line  # noqa: E402

sys.path.insert(0, str(REPO))
from pybroker.client.connection import BrokerConnection  # noqa: E402
from pybroker.protocol.api_keys import ApiKey  # noqa: E402
from pybroker.protocol.errors import ErrorCode  # noqa: E402
from pybroker.protocol.messages import (  # noqa: E402
    CreateTopicsRequest,
    DeleteRecordsRequest,
    ProduceRequest,
)

RECORDS_PER_PARTITION = 4


def batch(count: int) -> bytes:
    """``count`` small uncompressed records in one batch (the native builder)."""
    from pybroker import _native

    return _native.build_batch([(None, b"x" * 16)] * count, int(time.time() * 1000))


async def create_topic(conn: BrokerConnection, name: str, partitions: int) -> None:
    request = CreateTopicsRequest(timeout_ms=60000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])])
    response = await conn.send(ApiKey.CREATE_TOPICS, request, timeout=120)
    assert response.topics[0].error_code == ErrorCode.NONE, response


async def produce(conn: BrokerConnection, topic: str, partitions: int, count: int) -> None:
    records = batch(count)
    request = ProduceRequest(acks=1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=p, records=records)
                                    for p in range(partitions)])])
    response = await conn.send(ApiKey.PRODUCE, request, timeout=120)
    errors = {p.error_code for t in response.responses for p in t.partition_responses}
    assert errors == {ErrorCode.NONE}, errors


def delete_request(topic: str, offsets: dict[int, int]) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(timeout_ms=30000, leader_only=False, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items()])])


async def latency(conn: BrokerConnection, requests: int) -> list[float]:
    await create_topic(conn, "latency", 1)
    await produce(conn, "latency", 1, requests)
    samples = []
    for offset in range(1, requests + 1):
        t0 = time.perf_counter()
        response = await conn.send(ApiKey.DELETE_RECORDS, delete_request("latency", {0: offset}), version=3)
        samples.append(time.perf_counter() - t0)
        result = response.topics[0].partitions[0]
        assert result.error_code == ErrorCode.NONE and result.low_watermark == offset, result
    return samples


async def sweeps(conn: BrokerConnection, partitions: int, count: int) -> list[float]:
    await create_topic(conn, "sweep", partitions)
    samples = []
    for _ in range(count):
        await produce(conn, "sweep", partitions, RECORDS_PER_PARTITION)
        request = delete_request("sweep", dict.fromkeys(range(partitions), -1))
        t0 = time.perf_counter()
        response = await conn.send(ApiKey.DELETE_RECORDS, request, version=3, timeout=120)
        samples.append(time.perf_counter() - t0)
        results = response.topics[0].partitions
        assert len(results) == partitions and {r.error_code for r in results} == {ErrorCode.NONE}, results[:3]
    return samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def run(port: int, args: argparse.Namespace) -> dict[str, Any]:
    conn = BrokerConnection("127.0.0.1", port, client_id="bench-delete-records")
    await conn.connect()
    try:
        lat = await latency(conn, args.requests)
        sweep = await sweeps(conn, args.partitions, args.sweeps)
    finally:
        await conn.close()
    return {"latency_s": lat, "sweep_s": sweep}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="DeleteRecords requests for the latency run")
    ap.add_argument("--partitions", type=int, default=1000, help="partitions in the bulk sweep")
    ap.add_argument("--sweeps", type=int, default=5, help="bulk sweeps")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    args = ap.parse_args(argv)
    stamp = provenance(__file__, list(argv if argv is not None else sys.argv[1:]))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-delete-records-") as work:
        broker = Broker(broker_command("pybroker", port, Path(work) / "data", None, sys.executable),  # type: ignore[arg-type]
                        broker_env("pybroker", add_repo_to_pythonpath=True), Path(work), Path(work) / "broker.log")
        try:
            broker.wait_ready(port, 60)
            raw = asyncio.run(run(port, args))
        finally:
            exit_code = broker.stop()
    lat_ms = [s * 1000 for s in raw["latency_s"]]
    sweep_ms = [s * 1000 for s in raw["sweep_s"]]
    summary = {
        "latency_ms": {"p50": percentile(lat_ms, 0.50), "p99": percentile(lat_ms, 0.99), "max": max(lat_ms),
                       "mean": statistics.fmean(lat_ms), "n": len(lat_ms)},
        "sweep_ms": {"median": statistics.median(sweep_ms), "min": min(sweep_ms), "max": max(sweep_ms),
                     "partitions": args.partitions, "n": len(sweep_ms)},
    }
    result = {
        "provenance": confirm_provenance(stamp),
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "parameters": vars(args), "summary": summary, "broker_exit_code": exit_code,
        "raw_ms": {"latency": lat_ms, "sweep": sweep_ms},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "delete_records.json").write_text(json.dumps(result, indent=1) + "\n")
    lat, sw = summary["latency_ms"], summary["sweep_ms"]
    md = f"""# DeleteRecords benchmark

{provenance_line(result['provenance'])} Finished {result['generated']}. One pybroker broker
(default settings, fresh data dir), the project's own client over one connection, DeleteRecords
v3 with LeaderOnly=false. Machine: {os.cpu_count()} vCPU, {platform.platform()}, Python {platform.python_version()}.

| metric | value |
|---|---:|
| DeleteRecords latency p50 (1 partition, {lat['n']} sequential requests) | {lat['p50']:.3f} ms |
| DeleteRecords latency p99 | {lat['p99']:.3f} ms |
| DeleteRecords latency max | {lat['max']:.3f} ms |
| bulk sweep: one DeleteRecords over {sw['partitions']} partitions, median of {sw['n']} | {sw['median']:.1f} ms |
| bulk sweep min / max | {sw['min']:.1f} / {sw['max']:.1f} ms |

Raw per-request and per-sweep times are in `delete_records.json`.
"""
    (out / "delete_records.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
