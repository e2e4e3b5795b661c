"""``pybroker cluster status``: a live view of a running cluster.

Owns what the status command shows and how it gets it: the brokers (id, address, whether each
is alive: registered in the cluster's Metadata, and for a `pybroker cluster` its process
running), the controller, partitions and leaders per broker, the under-replicated partitions
(ISR smaller than the replica set) and the offline ones (no live leader), and each broker's
throughput. The cluster is the one `pybroker cluster` runs in ``--dir`` (its ``cluster.json``:
addresses, PIDs and each broker's metrics port) or any cluster through ``--bootstrap-server``.

Throughput comes from each broker's Prometheus endpoint when cluster.json names one (bytes in
and out per second: the difference of ``kafka_server_brokertopicmetrics_bytesin_total`` /
``bytesout_total`` between two samples), otherwise from the log end offsets (records in per
second per leader, the difference of the partitions' latest offsets). A rate needs two samples:
the first view shows none, and ``--once`` takes its two samples ``min(--interval, 1 s)`` apart.

The view is redrawn in place every ``--interval`` seconds on a terminal (ANSI clear screen),
and printed as successive plain blocks when stdout is not a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from prometheus_client.parser import text_string_to_metric_families

from pybroker.cli.command_config import settings_for_command
from pybroker.cli.local_cluster import DEFAULT_DIR, MANIFEST, pid_alive
from pybroker.client.admin import Admin, AdminError, PartitionInfo, TopicDescription
from pybroker.client.connection import KafkaClientError
from pybroker.client.security import PLAINTEXT, ClientSecurity
from pybroker.types import TopicPartition

PROG = "pybroker cluster status"
DEFAULT_INTERVAL_S = 2.0
ONCE_WINDOW_S = 1.0
SCRAPE_TIMEOUT_S = 2.0
LISTED_PARTITIONS = 20  # under-replicated / offline partitions listed by name, at most
CLEAR_SCREEN = "\x1b[H\x1b[2J"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


class StatusError(Exception):
    """The status cannot be shown (no cluster.json, the cluster does not answer)."""


def add_parser(cluster_commands: argparse._SubParsersAction) -> None:
    parser = cluster_commands.add_parser(
        "status", help="a live view of a running cluster",
        description="Show the brokers (alive or not), the controller, partitions and leaders per broker, "
                    "under-replicated and offline partitions and each broker's throughput, refreshed in place "
                    "every --interval seconds (Ctrl-C ends). The cluster is the one `pybroker cluster` runs in "
                    "--dir, or any cluster with --bootstrap-server.",
    )
    parser.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                        help=f"the directory of a `pybroker cluster` (its {MANIFEST}; default ./{DEFAULT_DIR}/)")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="any cluster's broker(s) instead of --dir (throughput from log end offsets)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="admin client properties (security settings, e.g. DIR/secure/client.properties)")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                        help=f"refresh period (default {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--once", action="store_true", help="print one view and exit")
    parser.set_defaults(run=run)


@dataclass
class BrokerStatus:
    node_id: int
    address: str
    alive: bool
    metrics_port: int | None = None
    partitions: int = 0  # replicas hosted
    leaders: int = 0
    bytes_in: float | None = None  # per second
    bytes_out: float | None = None
    records_in: float | None = None


@dataclass
class Snapshot:
    """One look at the cluster; rates are filled in against the previous snapshot."""

    taken: float
    controller: int | None
    brokers: list[BrokerStatus]
    topics: list[TopicDescription]
    state: str | None = None  # cluster.json's state, for a `pybroker cluster`
    counters: dict[int, tuple[float, float]] = field(default_factory=dict)  # broker → (bytes in, bytes out)
    end_offsets: dict[TopicPartition, int] = field(default_factory=dict)

    def partitions(self) -> list[tuple[str, PartitionInfo]]:
        return [(t.name, p) for t in self.topics for p in t.partitions]

    def alive_ids(self) -> set[int]:
        return {b.node_id for b in self.brokers if b.alive}

    def under_replicated(self) -> list[tuple[str, PartitionInfo]]:
        return [(t, p) for t, p in self.partitions() if len(p.isr) < len(p.replicas)]

    def offline(self) -> list[tuple[str, PartitionInfo]]:
        alive = self.alive_ids()
        return [(t, p) for t, p in self.partitions() if p.leader < 0 or p.leader not in alive]


def read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StatusError(f"no {MANIFEST} in {directory}: start a cluster there with `pybroker cluster --dir "
                          f"{directory}`, or name one with --bootstrap-server") from None
    except (OSError, ValueError) as e:
        raise StatusError(f"cannot read {path}: {e}") from None
    return manifest


class ClusterStatus:
    """Takes snapshots of one cluster: through Metadata, the brokers' metrics endpoints (when
    the manifest names them) or ListOffsets."""

    def __init__(self, bootstrap: str | None, manifest_dir: Path | None, security: ClientSecurity = PLAINTEXT,
                 client_id: str = "pybroker-cluster-status") -> None:
        self.bootstrap = bootstrap
        self.manifest_dir = manifest_dir
        self.security = security
        self.client_id = client_id

    async def snapshot(self) -> Snapshot:
        manifest = read_manifest(self.manifest_dir) if self.manifest_dir is not None else None
        bootstrap = self.bootstrap or (manifest or {}).get("bootstrap_servers") or ""
        if not bootstrap:
            raise StatusError(f"{MANIFEST} names no bootstrap servers")
        try:
            async with Admin(bootstrap, self.client_id, retry_timeout=5.0, request_timeout=5.0,
                             security=self.security) as admin:
                nodes = await admin.brokers()
                controller = await _controller_id(admin)
                topics = await admin.describe_topics()
                snapshot = Snapshot(time.monotonic(), controller, [], topics,
                                    state=None if manifest is None else manifest.get("state"))
                snapshot.brokers = _brokers(nodes, manifest)
                _count_replicas(snapshot)
                if any(b.metrics_port is not None for b in snapshot.brokers):
                    snapshot.counters = await _scrape_all(snapshot.brokers)
                else:
                    snapshot.end_offsets = await _end_offsets(admin, snapshot)
        except (OSError, TimeoutError, KafkaClientError, AdminError) as e:
            raise StatusError(f"the cluster at {bootstrap} does not answer: {e}") from None
        return snapshot


async def _controller_id(admin: Admin) -> int | None:
    try:
        return (await asyncio.wait_for(admin.controller(), 2.0)).node_id
    except (TimeoutError, AdminError):
        return None


def _brokers(nodes: list[Any], manifest: dict[str, Any] | None) -> list[BrokerStatus]:
    """The registered brokers, plus those of the manifest that are not (down)."""
    registered = {n.node_id: n for n in nodes}
    out: dict[int, BrokerStatus] = {}
    for entry in (manifest or {}).get("brokers", []):
        node_id = int(entry["node_id"])
        pid = entry.get("pid")
        running = pid is not None and pid_alive(int(pid))
        out[node_id] = BrokerStatus(node_id, entry.get("address", "?"), running and node_id in registered,
                                    entry.get("metrics_port"))
    for node_id, node in registered.items():
        if node_id not in out:
            out[node_id] = BrokerStatus(node_id, f"{node.host}:{node.port}", True)
    return [out[k] for k in sorted(out)]


def _count_replicas(snapshot: Snapshot) -> None:
    by_id = {b.node_id: b for b in snapshot.brokers}
    for _, p in snapshot.partitions():
        for replica in p.replicas:
            if replica in by_id:
                by_id[replica].partitions += 1
        if p.leader in by_id:
            by_id[p.leader].leaders += 1


async def _scrape_all(brokers: list[BrokerStatus]) -> dict[int, tuple[float, float]]:
    wanted = [b for b in brokers if b.alive and b.metrics_port is not None]
    results = await asyncio.gather(*(scrape_bytes(b.address.rpartition(":")[0] or "127.0.0.1", b.metrics_port or 0)
                                     for b in wanted), return_exceptions=True)
    return {b.node_id: r for b, r in zip(wanted, results, strict=True) if isinstance(r, tuple)}


async def scrape(host: str, port: int, timeout: float = SCRAPE_TIMEOUT_S) -> str:
    """The text of ``http://host:port/metrics`` (HTTP/1.0, read to the end)."""

    async def get() -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(f"GET /metrics HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
            await writer.drain()
            return await reader.read()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    data = await asyncio.wait_for(get(), timeout)
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") and not head.startswith(b"HTTP/1.0 200"):
        raise OSError(f"http://{host}:{port}/metrics answered {head.splitlines()[:1]}")
    return body.decode("utf-8", "replace")


async def scrape_bytes(host: str, port: int) -> tuple[float, float]:
    """(bytes in, bytes out) of all topics, from a broker's metrics endpoint."""
    text = await scrape(host, port)
    values = {BYTES_IN: 0.0, BYTES_OUT: 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in values and "topic" not in sample.labels:
                values[sample.name] = sample.value
    return values[BYTES_IN], values[BYTES_OUT]


async def _end_offsets(admin: Admin, snapshot: Snapshot) -> dict[TopicPartition, int]:
    alive = snapshot.alive_ids()
    partitions = [TopicPartition(t, p.partition) for t, p in snapshot.partitions() if p.leader in alive]
    try:
        answers = await admin.list_offsets(partitions, "latest") if partitions else {}
    except AdminError as e:  # once more without the partitions that failed
        rest = [tp for tp in partitions if tp not in e.failures]
        answers = await admin.list_offsets(rest, "latest") if rest else {}
    return {tp: o.offset for tp, o in answers.items()}


def fill_rates(previous: Snapshot | None, current: Snapshot) -> None:
    """Per-second rates of ``current`` against ``previous`` (nothing without one)."""
    if previous is None:
        return
    elapsed = current.taken - previous.taken
    if elapsed <= 0:
        return
    leaders = {TopicPartition(t, p.partition): p.leader for t, p in current.partitions()}
    records: dict[int, float] = {}
    for tp, offset in current.end_offsets.items():
        before = previous.end_offsets.get(tp)
        if before is not None and tp in leaders:
            records[leaders[tp]] = records.get(leaders[tp], 0.0) + max(offset - before, 0) / elapsed
    for broker in current.brokers:
        counted, counted_before = current.counters.get(broker.node_id), previous.counters.get(broker.node_id)
        if counted is not None and counted_before is not None:
            broker.bytes_in = max(counted[0] - counted_before[0], 0) / elapsed
            broker.bytes_out = max(counted[1] - counted_before[1], 0) / elapsed
        if current.end_offsets and broker.alive:
            broker.records_in = records.get(broker.node_id, 0.0)


def _rate(value: float | None, unit: str = "B") -> str:
    if value is None:
        return "-"
    for prefix in ("", "K", "M", "G"):
        if value < 1000 or prefix == "G":
            return f"{value:.0f} {unit}/s" if not prefix else f"{value:.1f} {prefix}{unit}/s"
        value /= 1000
    return "-"


def render(snapshot: Snapshot, source: str) -> str:
    """The view as text (no ANSI codes)."""
    alive = snapshot.alive_ids()
    under, offline = snapshot.under_replicated(), snapshot.offline()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"Cluster status at {stamp} ({source}{', ' + snapshot.state if snapshot.state else ''})"]
    lines.append(f"Controller: {'broker ' + str(snapshot.controller) if snapshot.controller is not None else 'none'}")
    lines.append(f"Brokers: {len(snapshot.brokers)} ({len(alive)} alive)")
    by_metrics = bool(snapshot.counters) or any(b.metrics_port is not None for b in snapshot.brokers)
    throughput = ("BYTES IN", "BYTES OUT") if by_metrics else ("RECORDS IN", "")
    header = f"  {'ID':>4}  {'ADDRESS':<21} {'ALIVE':<5} {'PARTITIONS':>10} {'LEADERS':>8} {throughput[0]:>12}"
    lines.append(header + (f" {throughput[1]:>12}" if throughput[1] else ""))
    for b in snapshot.brokers:
        row = (f"  {b.node_id:>4}  {b.address:<21} {'yes' if b.alive else 'NO':<5} {b.partitions:>10} "
               f"{b.leaders:>8} ")
        if by_metrics:
            row += f"{_rate(b.bytes_in):>12} {_rate(b.bytes_out):>12}"
        else:
            row += f"{_rate(b.records_in, 'rec'):>12}"
        lines.append(row)
    partitions = snapshot.partitions()
    lines.append(f"Topics: {len(snapshot.topics)}, partitions: {len(partitions)}")
    lines.append(f"Under-replicated partitions: {len(under)}")
    lines += _listed(under)
    lines.append(f"Offline partitions: {len(offline)}")
    lines += _listed(offline)
    return "\n".join(lines)


def _listed(partitions: list[tuple[str, PartitionInfo]]) -> list[str]:
    out = [f"    {t}-{p.partition}: leader {p.leader}, replicas {','.join(map(str, p.replicas))}, "
           f"isr {','.join(map(str, p.isr))}" for t, p in partitions[:LISTED_PARTITIONS]]
    if len(partitions) > LISTED_PARTITIONS:
        out.append(f"    ... and {len(partitions) - LISTED_PARTITIONS} more")
    return out


async def watch(status: ClusterStatus, source: str, interval: float, once: bool, out: TextIO) -> int:
    """Print the view once (two samples for the rates) or until interrupted; the exit code."""
    previous: Snapshot | None = None
    if once:
        previous = await status.snapshot()
        await asyncio.sleep(min(interval, ONCE_WINDOW_S))
        current = await status.snapshot()
        fill_rates(previous, current)
        print(render(current, source), file=out, flush=True)
        return 0
    tty = out.isatty()
    while True:
        try:
            current = await status.snapshot()
        except StatusError as e:
            text = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {e}"
            previous = None
        else:
            fill_rates(previous, current)
            previous = current
            text = render(current, source)
        print((CLEAR_SCREEN + text) if tty else text + "\n", file=out, flush=True)
        await asyncio.sleep(interval)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        print(f"{PROG}: --interval must be positive", file=sys.stderr)
        return 2
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    if args.bootstrap_server:
        status = ClusterStatus(args.bootstrap_server, None, settings.security)
        source = args.bootstrap_server
    else:
        directory = Path(args.dir)
        status = ClusterStatus(None, directory, settings.security)
        source = str(directory / MANIFEST)
    try:
        return asyncio.run(watch(status, source, args.interval, args.once, sys.stdout))
    except StatusError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
