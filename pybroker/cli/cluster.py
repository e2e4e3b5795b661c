"""``pybroker cluster``: ZooKeeper and N brokers on this machine, until Ctrl-C/SIGTERM.

Parses the arguments, installs the signal handlers (the first SIGINT/SIGTERM stops the cluster
in order, a second one kills what is left) and turns failures into one message and exit code 1.
The work itself is `pybroker.cli.local_cluster`; ``pybroker cluster status`` is
`pybroker.cli.cluster_status`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from pybroker.cli import cluster_status
from pybroker.cli.local_cluster import (
    DEFAULT_BROKERS,
    DEFAULT_DIR,
    DEFAULT_FIRST_PORT,
    DEFAULT_ZOOKEEPER_PORT,
    ClusterError,
    LocalCluster,
    run_cluster,
)
from pybroker.cli.secure_setup import SecureSetup
from pybroker.cli.serve import LOG_FORMATS
from pybroker.zookeeper.server import ZooKeeperNotInstalledError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "cluster", help="run ZooKeeper and a cluster of brokers on this machine",
        description="Start ZooKeeper and N brokers (node ids 1..N) on 127.0.0.1, wait until they form a "
                    "cluster, print where everything is (also in DIR/cluster.json), and on Ctrl-C/SIGTERM "
                    "stop the brokers with controlled shutdown, then ZooKeeper. Starting again reuses the data.",
    )
    parser.add_argument("--brokers", type=int, default=DEFAULT_BROKERS, metavar="N",
                        help=f"number of brokers (default {DEFAULT_BROKERS})")
    parser.add_argument("--port", type=int, default=DEFAULT_FIRST_PORT, metavar="FIRST",
                        help=f"port of broker 1; broker i listens on FIRST+i-1 (default {DEFAULT_FIRST_PORT})")
    parser.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                        help=f"cluster directory: configs, data and logs (default ./{DEFAULT_DIR}/)")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                        help="use this ZooKeeper ensemble instead of starting one")
    parser.add_argument("--zookeeper-port", type=int, default=DEFAULT_ZOOKEEPER_PORT, metavar="PORT",
                        help=f"port of the ZooKeeper this command starts (default {DEFAULT_ZOOKEEPER_PORT})")
    parser.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[],
        help="set a broker property on every broker (repeatable), e.g. --override num.partitions=3; values "
             "are templates: {id} (node id), {port} (FIRST+id-1), {port+N}, {port-N}, {id+N}, {host} (127.0.0.1), "
             "e.g. --override 'listeners=PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{port+100}'",
    )
    parser.add_argument(
        "--broker-override", metavar="ID:KEY=VALUE", action="append", default=[],
        help="set a broker property on broker ID only (repeatable; a template too), e.g. "
             "--broker-override '2:advertised.listeners=PLAINTEXT://proxy-2:19092'",
    )
    parser.add_argument(
        "--config", metavar="FILE",
        help="a properties file of broker properties (templates): KEY=VALUE lines for every broker, "
             "broker.ID.KEY=VALUE lines for broker ID; the command line wins over the file, and a value for "
             "one broker over a value for all",
    )
    parser.add_argument("--secure", action="store_true",
                        help="SASL_SSL listeners only (replication too), a generated CA and broker certificate, an "
                             "admin user (SCRAM-SHA-512, random password), the ACL authorizer, and client files "
                             "(client.properties, librdkafka.properties) in --secure-dir")
    parser.add_argument("--secure-dir", metavar="DIR",
                        help="where --secure keeps certificates, passwords and client files (default DIR/secure; "
                             "reused on restart)")
    parser.add_argument("--metrics-port", type=int, metavar="FIRST",
                        help="Prometheus endpoint of broker 1; broker i serves http://127.0.0.1:FIRST+i-1/metrics "
                             "(default: free ports, recorded in DIR/cluster.json)")
    parser.add_argument("--no-metrics", action="store_true", help="no Prometheus endpoint on the brokers")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                        help="the brokers' log format in DIR/broker-<id>/broker.log (see pybroker serve)")
    parser.set_defaults(run=run)
    # `pybroker cluster status`: a live view of a running cluster (pybroker.cli.cluster_status).
    cluster_status.add_parser(parser.add_subparsers(dest="cluster_command", metavar="{status}"))


async def _main(cluster: LocalCluster) -> int:
    # The command's own ZooKeeper client (kazoo) logs only what matters to the user.
    logging.basicConfig(level=logging.ERROR, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 2:
            cluster.say("Second signal: killing what is left")
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        return await run_cluster(cluster, stop, force=lambda: signals > 1)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run(args: argparse.Namespace) -> int:
    try:
        secure = None
        if args.secure:
            secure = SecureSetup.prepare(args.secure_dir or Path(args.dir) / "secure")
        cluster = LocalCluster(
            args.dir, args.brokers, args.port,
            zookeeper_connect=args.zookeeper, zookeeper_port=args.zookeeper_port, overrides=args.override,
            broker_overrides=args.broker_override, config_file=args.config,
            secure=secure, metrics=not args.no_metrics, metrics_port=args.metrics_port,
            log_format=args.log_format,
        )
        return asyncio.run(_main(cluster))
    except (ClusterError, ZooKeeperNotInstalledError, OSError) as e:
        print(f"pybroker cluster: {e}", file=sys.stderr)
        return 1
