"""``pybroker serve``: run one broker until SIGTERM/SIGINT, then shut down cleanly."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import io
import logging
import signal
import sys

from pybroker.log.config import ConfigError
from pybroker.log.log_manager import LogDirError
from pybroker.server.broker import Broker
from pybroker.server.config import BrokerConfig


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("serve", help="run a broker")
    parser.add_argument("--config", metavar="FILE", help="server.properties-style file")
    parser.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[],
        help="set a broker property (repeatable), e.g. --override log.dirs=/tmp/data",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.set_defaults(run=run)


def _log_tasks() -> None:
    """SIGUSR1: log every asyncio task and where it waits (a hung broker's thread dump)."""
    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        logging.getLogger(__name__).warning("%s", out.getvalue().rstrip())


async def _serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_shutdown)
    loop.add_signal_handler(signal.SIGUSR1, _log_tasks)
    await broker.start()
    try:
        await broker.wait_for_shutdown()
    finally:
        await broker.shutdown()


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stderr,
    )
    # A fatal signal (a crash in native code) prints every thread's Python stack to the log
    # before the process dies, as the JVM writes its hs_err file.
    faulthandler.enable(sys.stderr)
    try:
        config = BrokerConfig.load(args.config, args.override)
        asyncio.run(_serve(config))
    except (ConfigError, LogDirError, OSError, RuntimeError) as e:
        print(f"pybroker: {e}", file=sys.stderr)
        return 1
    return 0
