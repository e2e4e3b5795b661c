"""What security costs: produce and consume throughput over PLAINTEXT, SSL, SASL_PLAINTEXT and
SASL_SSL in one run, and the time to open an authenticated connection.

    python bench/security.py [--records 1000000] [--size 1024] [--runs 3]

One fresh pybroker per run, listening on four listeners at once (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL; PEM certificates from a private CA made for the run; SCRAM-SHA-256 and SCRAM-SHA-512
users created through AlterUserScramCredentials). Every case of a run uses the same broker, in an
order rotated from run to run:

* **throughput**: kcat (linked to the confluent-kafka wheel's librdkafka 2.16) produces
  ``--records`` records of ``--size`` bytes to a fresh one-partition topic over the case's
  listener, then consumes them back; rates are payload MB/s over the client's wall time, and broker
  CPU s/GB from /proc. Over PLAINTEXT (and SASL_PLAINTEXT) a fetch sends log bytes with
  ``sendfile``; over TLS it reads them and encrypts them in the process: the consume rows show the
  cost of losing zero-copy. A consume fails the run unless every record comes back with its size.
* **connection set-up**: ``--connections`` sequential connections of pybroker's own client
  (TCP, ApiVersions, then the TLS handshake and/or SASL exchange of the case), each timed from
  ``connect`` to authenticated; the broker's CPU per connection from /proc. SCRAM costs the client
  PBKDF2 (4096 iterations) and the broker two HMACs and a hash: the client's CPU is reported too.

Writes ``bench/results/security.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import ssl
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_compare import (  # noqa: E402
    check_consumed,
    finish_phase,
    make_records_file,
    run_client,
    setup_tools,
    wait_for_quiet,
)
from brokers import (  # noqa: E402
    REPO,
    Broker,
    broker_env,
    free_port,
    group_cpu_seconds,
    pybroker_import,
)
from harness import BenchRun  # noqa: E402

sys.path.insert(0, str(REPO))
from pybroker.client.admin import Admin, UserScramCredentialUpsertion  # noqa: E402
from pybroker.client.connection import BrokerConnection  # noqa: E402
from pybroker.client.security import ClientSecurity  # noqa: E402
from pybroker.security.certificates import CertificateAuthority  # noqa: E402

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"

# (case name, listener, SASL mechanism): the throughput cases and the connection cases
THROUGHPUT_CASES = [
    ("PLAINTEXT", "PLAINTEXT", None),
    ("SSL", "SSL", None),
    ("SASL_PLAINTEXT SCRAM-SHA-256", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_SSL SCRAM-SHA-256", "SASL_SSL", "SCRAM-SHA-256"),
]
CONNECTION_CASES = [
    ("PLAINTEXT", "PLAINTEXT", None),
    ("SSL", "SSL", None),
    ("SASL_PLAINTEXT PLAIN", "SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT SCRAM-SHA-256", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT SCRAM-SHA-512", "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL SCRAM-SHA-256", "SASL_SSL", "SCRAM-SHA-256"),
]


def broker_properties(ports: dict[str, int], data_dir: Path, keystore: Path, ca: Path) -> list[str]:
    listeners = ",".join(f"{p}://127.0.0.1:{ports[p]}" for p in PROTOCOLS)
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ADMIN}" password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}" '
            f'user_{USER}="{PASSWORD}";')
    props = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "log.dirs": str(data_dir),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    }
    return [x for key, value in props.items() for x in ("--override", f"{key}={value}")]


def kcat_security(listener: str, mechanism: str | None, ca: Path) -> list[str]:
    props = [f"security.protocol={listener.lower()}"]
    if listener.endswith("SSL"):
        props.append(f"ssl.ca.location={ca}")
    if mechanism:
        props += [f"sasl.mechanisms={mechanism}", f"sasl.username={USER}", f"sasl.password={PASSWORD}"]
    return [x for p in props for x in ("-X", p)]


def client_security(listener: str, mechanism: str | None, ca: Path) -> ClientSecurity:
    context = ssl.create_default_context(cafile=str(ca)) if listener.endswith("SSL") else None
    return ClientSecurity(listener, context, mechanism, USER if mechanism else None, PASSWORD if mechanism else None)


async def create_users(port: int) -> None:
    admin = Admin(f"127.0.0.1:{port}")
    try:
        await admin.connect()
        await admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(USER, mechanism, PASSWORD, iterations=4096)
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        ])
    finally:
        await admin.close()


async def time_connections(port: int, security: ClientSecurity, count: int, broker_pid: int) -> dict[str, Any]:
    """``count`` sequential connect-and-authenticate; the connection is closed untimed."""
    times_ms: list[float] = []
    cpu0 = group_cpu_seconds(broker_pid)
    client0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(count):
        connection = BrokerConnection("127.0.0.1", port, "bench-security", security=security)
        t0 = time.perf_counter()
        await connection.connect()
        times_ms.append((time.perf_counter() - t0) * 1000)
        await connection.close()
    client1 = resource.getrusage(resource.RUSAGE_SELF)
    broker_cpu = group_cpu_seconds(broker_pid) - cpu0
    client_cpu = (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)
    ordered = sorted(times_ms)
    return {
        "connections": count,
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max_ms": ordered[-1],
        "mean_ms": statistics.fmean(ordered),
        "broker_cpu_ms_per_connection": broker_cpu * 1000 / count,
        "client_cpu_ms_per_connection": client_cpu * 1000 / count,
    }


def run_one(run_no: int, args: argparse.Namespace, tools: Any, records_file: Path, workdir: Path,
            ca: CertificateAuthority, keystore: Path) -> dict[str, Any]:
    run_dir = workdir / f"run{run_no}"
    data_dir = run_dir / "data"
    data_dir.mkdir(parents=True)
    ports = {p: free_port() for p in PROTOCOLS}
    cmd = [args.python, "-m", "pybroker", "serve", *broker_properties(ports, data_dir, keystore, ca.certificate_path)]
    out: dict[str, Any] = {"run": run_no, "ports": ports, "command": cmd, "ok": False, "throughput": {},
                           "connections": {}}
    rotate = run_no % len(THROUGHPUT_CASES)
    broker: Broker | None = None
    try:
        broker = Broker(cmd, broker_env("pybroker", bool(args.pybroker_import.get("add_repo_to_pythonpath"))),
                        run_dir, run_dir / "broker.log")
        out["startup_s"] = broker.wait_ready(ports["PLAINTEXT"], args.startup_timeout)
        asyncio.run(create_users(ports["PLAINTEXT"]))
        for name, listener, mechanism in THROUGHPUT_CASES[rotate:] + THROUGHPUT_CASES[:rotate]:
            out["throughput"][name] = throughput_case(
                name, listener, mechanism, ports[listener], args, tools, broker, records_file, run_dir, ca)
        for name, listener, mechanism in CONNECTION_CASES:
            wait_for_quiet(args.quiet_cores, args.quiet_wait)
            security = client_security(listener, mechanism, ca.certificate_path)
            out["connections"][name] = asyncio.run(
                time_connections(ports[listener], security, args.connections, broker.pid))
        out["ok"] = all(case["ok"] for case in out["throughput"].values())
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        if broker is not None:
            out["broker_log_tail"] = broker.log_tail()
    finally:
        if broker is not None:
            out["exit_code"] = broker.stop()
        if not args.keep_workdir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out


def throughput_case(name: str, listener: str, mechanism: str | None, port: int, args: argparse.Namespace,
                    tools: Any, broker: Broker, records_file: Path, run_dir: Path,
                    ca: CertificateAuthority) -> dict[str, Any]:
    topic = "bench-" + name.replace(" ", "-").lower()
    bootstrap = f"127.0.0.1:{port}"
    security = kcat_security(listener, mechanism, ca.certificate_path)
    stem = run_dir / topic
    wait_for_quiet(args.quiet_cores, args.quiet_wait)
    produce = run_client([tools.kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0", *security, *args.client_prop_args,
                          "-l", str(records_file)], tools, broker, Path(f"{stem}.produce.out"),
                         Path(f"{stem}.produce.err"), args.phase_timeout)
    finish_phase(produce, args.records, args.size)
    case: dict[str, Any] = {"produce": produce.__dict__, "ok": produce.ok}
    if not produce.ok:
        return case
    wait_for_quiet(args.quiet_cores, args.quiet_wait)
    consume = run_client([tools.kcat, "-C", "-b", bootstrap, "-t", topic, "-p", "0", *security,
                          *args.client_prop_args, "-o", "beginning", "-e", "-q", "-c", str(args.records),
                          "-f", "%S\\n"], tools, broker, Path(f"{stem}.consume.out"), Path(f"{stem}.consume.err"),
                         args.phase_timeout, watch_stdout=True)
    finish_phase(consume, args.records, args.size)
    received, _, error = check_consumed(Path(f"{stem}.consume.out"), args.records, args.size)
    consume.records_received = received
    if error:
        consume.ok, consume.error = False, error
    case["consume"] = consume.__dict__
    case["ok"] = consume.ok
    return case


# --------------------------------------------------------------------------- summary

def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    throughput: dict[str, dict[str, float | None]] = {}
    for name, _, _ in THROUGHPUT_CASES:
        cases = [r["throughput"][name] for r in runs if name in r["throughput"] and r["throughput"][name]["ok"]]
        throughput[name] = {
            "produce_mb_per_s": _median([c["produce"]["mb_per_s"] for c in cases]),
            "consume_mb_per_s": _median([c["consume"]["mb_per_s"] for c in cases]),
            "produce_cpu_s_per_gb": _median([c["produce"]["broker_cpu_s_per_gb"] for c in cases]),
            "consume_cpu_s_per_gb": _median([c["consume"]["broker_cpu_s_per_gb"] for c in cases]),
        }
    connections: dict[str, dict[str, float | None]] = {}
    for name, _, _ in CONNECTION_CASES:
        cases = [r["connections"][name] for r in runs if name in r["connections"]]
        connections[name] = {key: _median([c[key] for c in cases]) for key in (
            "p50_ms", "p99_ms", "broker_cpu_ms_per_connection", "client_cpu_ms_per_connection")}
    return {"throughput": throughput, "connections": connections}


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def render_markdown(result: dict[str, Any]) -> str:
    p = result["parameters"]
    s = result["summary"]
    lines = [
        "# Security: throughput over each protocol, and connection set-up",
        "",
        f"`{result['provenance']['command']}` at {result['provenance']['commit'][:12]}; "
        f"{p['runs']} runs (medians), {p['records']:,} records of {p['size']} B per case, kcat with "
        f"{result['tools']['kcat_version']}; {p['connections']} connections per connection case.",
        "",
        "| listener | produce MB/s | consume MB/s | broker CPU s/GB produce | broker CPU s/GB consume |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in s["throughput"].items():
        lines.append(f"| {name} | {_fmt(row['produce_mb_per_s'], ',.1f')} | {_fmt(row['consume_mb_per_s'], ',.1f')} "
                     f"| {_fmt(row['produce_cpu_s_per_gb'], '.2f')} | {_fmt(row['consume_cpu_s_per_gb'], '.2f')} |")
    lines += [
        "",
        "| connection | p50 ms | p99 ms | broker CPU ms/conn | client CPU ms/conn |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in s["connections"].items():
        lines.append(f"| {name} | {_fmt(row['p50_ms'], '.2f')} | {_fmt(row['p99_ms'], '.2f')} "
                     f"| {_fmt(row['broker_cpu_ms_per_connection'], '.2f')} "
                     f"| {_fmt(row['client_cpu_ms_per_connection'], '.2f')} |")
    failed = [f"run {r['run']}: {r.get('error') or 'a case failed'}" for r in result["runs"] if not r["ok"]]
    if failed:
        lines += ["", "Failed runs: " + "; ".join(failed)]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    s = result["summary"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(s["throughput"])
    x = range(len(names))
    produce = [s["throughput"][n]["produce_mb_per_s"] or 0 for n in names]
    consume = [s["throughput"][n]["consume_mb_per_s"] or 0 for n in names]
    left.bar([i - 0.2 for i in x], produce, 0.4, label="produce")
    left.bar([i + 0.2 for i in x], consume, 0.4, label="consume")
    left.set_xticks(list(x), [n.replace(" ", "\n") for n in names], fontsize=8)
    left.set_ylabel("MB/s (kcat)")
    left.set_title(f"throughput, {result['parameters']['size']} B records")
    left.legend()
    conn = list(s["connections"])
    right.barh(conn, [s["connections"][n]["p50_ms"] or 0 for n in conn])
    right.set_xlabel("connection set-up p50, ms")
    right.set_title("connect + authenticate")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records per throughput case")
    ap.add_argument("--size", type=int, default=1024, help="record size, bytes")
    ap.add_argument("--runs", type=int, default=3, help="runs, each on a fresh broker")
    ap.add_argument("--connections", type=int, default=200, help="connections per connection case")
    ap.add_argument("--phase-timeout", type=float, default=300.0, help="seconds allowed for a produce or consume")
    ap.add_argument("--startup-timeout", type=float, default=60.0, help="seconds for the broker to listen")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each phase, wait until the machine's busy CPU (1 s sample) is below this")
    ap.add_argument("--quiet-wait", type=float, default=30.0, help="longest wait for --quiet-cores, s")
    ap.add_argument("--kcat", default="kcat", help="kcat binary")
    ap.add_argument("--any-librdkafka", action="store_true", help="do not insist on librdkafka 2.16")
    ap.add_argument("-X", dest="client_props", action="append", default=[], metavar="PROP=VAL",
                    help="extra librdkafka property for the kcat phases (repeatable)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    if min(args.records, args.size, args.runs, args.connections) < 1:
        ap.error("--records, --size, --runs and --connections must be >= 1")
    args.client_prop_args = [x for prop in args.client_props for x in ("-X", prop)]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.pybroker_import = pybroker_import(args.python)
    with BenchRun.start(__file__, argv, args, prefix="bench-security-") as run:
        tools = setup_tools(run.workdir, args.kcat, need_tansu=False, any_librdkafka=args.any_librdkafka)
        ca = CertificateAuthority.create(run.workdir / "ca")
        keystore = ca.issue_server("localhost").keystore
        records_file = run.workdir / "records.txt"
        make_records_file(records_file, args.records, args.size)
        runs: list[dict[str, Any]] = []
        for run_no in range(args.runs):
            runs.append(run_one(run_no, args, tools, records_file, run.workdir, ca, keystore))
            print(f"run {run_no}: {'ok' if runs[-1]['ok'] else runs[-1].get('error', 'failed')}", flush=True)
    result = {
        **run.head(),
        "parameters": {k: v for k, v in vars(args).items() if k not in ("client_prop_args",)},
        "machine": run.machine,
        "tools": {"kcat": tools.kcat, "kcat_version": tools.kcat_version, "librdkafka": tools.librdkafka},
        "runs": runs,
        "summary": summarize(runs),
    }
    run.write("security", result, render_markdown, plot)
    return 0 if all(r["ok"] for r in runs) and not run.interrupted else 1


if __name__ == "__main__":
    raise SystemExit(main())
