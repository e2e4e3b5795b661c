"""The brokers of one invocation: launched pybroker / Tansu processes, or any bootstrap address.

``--brokers pybroker,tansu,pybroker-cluster3,kafka=10.0.0.5:9092``: ``pybroker`` and ``tansu``
are started fresh for every run on ``127.0.0.1:<free port>`` (``bench/brokers.py``; pybroker with
a new data dir, Tansu with its in-memory storage) and stopped by PID afterwards;
``pybroker-clusterN`` is a fresh local cluster of N pybroker processes and a ZooKeeper server for
every run (``bench/cluster.py``), whose topics get replication factor min(N, 3); ``NAME=HOST:PORT``
is an already running broker that is only connected to (topics get unique names per run instead).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.brokers import (
    Broker,
    broker_command,
    broker_env,
    find_tansu,
    free_port,
    group_cpu_seconds,
    proc_status_kb,
    pybroker_import,
)

LAUNCHABLE = ("pybroker", "tansu")
CLUSTER = re.compile(r"pybroker-cluster(\d+)")


@dataclass
class TargetSpec:
    """A broker named on the command line."""

    name: str
    kind: str  # pybroker | tansu | cluster | external
    bootstrap: str | None = None
    nodes: int = 1  # brokers of a launched cluster

    @property
    def replication_factor(self) -> int:
        """Of the topics a run creates: min(brokers, 3) on a launched cluster, else 1."""
        return min(self.nodes, 3) if self.kind == "cluster" else 1

    @classmethod
    def parse(cls, text: str) -> TargetSpec:
        text = text.strip()
        if "=" in text:
            name, _, address = text.partition("=")
            if not name or ":" not in address:
                raise ValueError(f"broker {text!r}: use NAME=HOST:PORT")
            return cls(name.strip(), "external", address.strip())
        if text in LAUNCHABLE:
            return cls(text, text)
        if (m := CLUSTER.fullmatch(text)) and int(m.group(1)) >= 1:
            return cls(text, "cluster", nodes=int(m.group(1)))
        raise ValueError(
            f"broker {text!r}: one of {', '.join(LAUNCHABLE)}, pybroker-clusterN, or NAME=HOST:PORT"
        )


@dataclass
class Tools:
    """The Tansu binary (for ``bench.brokers.broker_command``) and interpreter for pybroker."""

    python: str = sys.executable
    tansu: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def locate(cls, specs: list[TargetSpec], python: str = sys.executable) -> Tools:
        tools = cls(python=python)
        if any(s.kind == "tansu" for s in specs):
            tools.tansu, meta = find_tansu()
            v = subprocess.run(
                [tools.tansu, "--version"], capture_output=True, text=True, timeout=30
            )
            tools.info.update(meta, tansu=v.stdout.strip(), tansu_binary=tools.tansu)
        if any(s.kind in ("pybroker", "cluster") for s in specs):
            tools.info["pybroker_import"] = pybroker_import(python)
        return tools


@dataclass
class Running:
    """A broker ready for a run."""

    spec: TargetSpec
    bootstrap: str
    process: Broker | None = None
    data_dir: Path | None = None
    startup_s: float | None = None
    cluster: Any = None  # bench.cluster.LocalCluster of a launched cluster

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def replication_factor(self) -> int:
        return self.spec.replication_factor

    @property
    def processes(self) -> list[Broker]:
        """The launched broker processes (every broker of a cluster)."""
        if self.cluster is not None:
            return [n.process for n in self.cluster.nodes if n.process is not None]
        return [self.process] if self.process else []

    def cpu_seconds(self) -> float | None:
        """CPU seconds of the launched brokers' process groups, summed (None for external brokers)."""
        procs = self.processes
        return sum(group_cpu_seconds(p.pid) for p in procs) if procs else None

    def peak_rss_mb(self) -> float | None:
        """Peak RSS of the launched brokers, summed over a cluster's brokers."""
        procs = self.processes
        if not procs:
            return None
        try:
            return sum(proc_status_kb(p.pid, "VmHWM") for p in procs) * 1024 / 1e6
        except (OSError, KeyError):
            return None

    def check_alive(self) -> None:
        for p in self.processes:
            if not p.alive():
                raise RuntimeError(f"{self.name} exited: {p.log_tail(1500)}")


@contextmanager
def running(
    spec: TargetSpec,
    tools: Tools,
    workdir: Path,
    overrides: dict[str, str] | None = None,
    startup_timeout: float = 60.0,
    keep: bool = False,
) -> Iterator[Running]:
    """The broker of ``spec``, started for the duration of the block (stopped by PID)."""
    if spec.kind == "external":
        assert spec.bootstrap
        yield Running(spec, spec.bootstrap)
        return
    if spec.kind == "cluster":
        with running_cluster(spec, tools, workdir, overrides, startup_timeout, keep) as r:
            yield r
        return
    run_dir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=workdir))  # fresh per run
    port = free_port()
    data_dir = run_dir / "data"
    cmd = broker_command(spec.kind, port, data_dir, tools, tools.python)
    if spec.kind == "pybroker":
        for k, v in (overrides or {}).items():
            cmd += ["--override", f"{k}={v}"]
    add_path = bool(tools.info.get("pybroker_import", {}).get("add_repo_to_pythonpath"))
    env = broker_env(spec.kind, add_path)
    proc = Broker(cmd, env, run_dir, run_dir / "broker.log")
    try:
        startup = proc.wait_ready(port, startup_timeout)
        yield Running(spec, f"127.0.0.1:{port}", proc, data_dir, startup)
    finally:
        proc.stop()
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)


@contextmanager
def running_cluster(
    spec: TargetSpec,
    tools: Tools,
    workdir: Path,
    overrides: dict[str, str] | None,
    startup_timeout: float,
    keep: bool,
) -> Iterator[Running]:
    """A fresh ZooKeeper and ``spec.nodes`` pybroker processes, for the duration of the block."""
    from bench.cluster import LocalCluster, start_zookeeper

    run_dir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=workdir))
    add_path = bool(tools.info.get("pybroker_import", {}).get("add_repo_to_pythonpath"))
    zk = start_zookeeper(run_dir / "zookeeper")
    cluster = LocalCluster(
        f"{zk.connect_string}/bench",
        run_dir / "cluster",
        spec.nodes,
        overrides,
        tools.python,
        add_path,
    )
    try:
        startup = cluster.start(startup_timeout)
        yield Running(spec, cluster.bootstrap(), startup_s=startup, cluster=cluster)
    finally:
        cluster.stop()
        zk.stop()
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)
