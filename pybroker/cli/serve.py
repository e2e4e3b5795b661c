"""``pybroker serve``: run one broker until SIGTERM/SIGINT, then shut down cleanly.

Zero-config PLAINTEXT by default; ``--secure`` (`pybroker.cli.secure_setup`) makes it a SASL_SSL
broker with ACLs, an admin user and ready-to-use client files in ``--secure-dir``."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import faulthandler
import io
import json
import logging
import signal
import sys

from pybroker.cli.secure_setup import DEFAULT_SECURE_DIR, SecureSetup, create_admin_user
from pybroker.client.admin import AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.common.config import ConfigError
from pybroker.log.log_manager import LogDirError
from pybroker.server.broker import Broker
from pybroker.server.config import BrokerConfig, read_properties


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("serve", help="run a broker")
    parser.add_argument("--config", metavar="FILE", help="server.properties-style file")
    parser.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[],
        help="set a broker property (repeatable), e.g. --override log.dirs=/tmp/data",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                        help="text: Kafka-style lines (default); json: one JSON object per line with time, level, "
                             "logger, message and, when there is one, exception")
    parser.add_argument("--secure", action="store_true",
                        help="one SASL_SSL listener (no PLAINTEXT), a generated CA and broker certificate, an admin "
                             "user (SCRAM-SHA-512, random password), the ACL authorizer, and client files in "
                             "--secure-dir; --config and --override values of the same names are overridden, "
                             "except --override, which wins")
    parser.add_argument("--secure-dir", default=DEFAULT_SECURE_DIR, metavar="DIR",
                        help=f"where --secure keeps its certificates, passwords and client files "
                             f"(default ./{DEFAULT_SECURE_DIR}/; reused on restart)")
    parser.set_defaults(run=run)


LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


class JsonLogFormatter(logging.Formatter):
    """``--log-format json``: each record as one JSON object on one line — ``time`` (ISO 8601,
    local time with its offset, milliseconds), ``level``, ``logger``, ``message``, and
    ``exception`` (the formatted traceback) when the record carries one. A message's own
    newlines are escaped by JSON, so a line is always a whole record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, str] = {
            "time": datetime.datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, log_format: str = "text") -> None:
    """The broker's logging on stderr: Kafka-style text lines, or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _log_tasks() -> None:
    """SIGUSR1: log every asyncio task and where it waits (a hung broker's thread dump)."""
    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        logging.getLogger(__name__).warning("%s", out.getvalue().rstrip())


def _bootstrap(broker: Broker) -> str:
    """``host:port`` of the broker's first advertised listener (its bound port if 0)."""
    endpoint = broker.config.advertised_listeners[0]
    port = endpoint.port or broker.socket_server.bound_ports.get(endpoint.listener_name, 0)
    return f"{endpoint.host or '127.0.0.1'}:{port}"


async def _serve(config: BrokerConfig, secure: SecureSetup | None = None) -> None:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_shutdown)
    loop.add_signal_handler(signal.SIGUSR1, _log_tasks)
    await broker.start()
    try:
        if secure is not None:
            bootstrap = _bootstrap(broker)
            await create_admin_user(bootstrap, secure)
            secure.write_client_files(bootstrap)
            print(secure.usage_line(bootstrap), flush=True)
        await broker.wait_for_shutdown()
    finally:
        await broker.shutdown()


def _port(listeners: str) -> int:
    """The port of the first of ``listeners`` (Kafka's default 9092 when none is set)."""
    first = listeners.split(",")[0].strip()
    _, _, port = first.rpartition(":")
    return int(port) if port.isdigit() else 9092


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    # A fatal signal (a crash in native code) prints every thread's Python stack to the log
    # before the process dies, as the JVM writes its hs_err file.
    faulthandler.enable(sys.stderr)
    try:
        secure = None
        overrides = list(args.override)
        if args.secure:
            secure = SecureSetup.prepare(args.secure_dir)
            raw = read_properties(args.config) if args.config else {}
            raw.update(item.partition("=")[::2] for item in overrides)
            port = _port(raw.get("listeners", ""))
            overrides = [f"{k}={v}" for k, v in secure.broker_properties("127.0.0.1", port).items()] + overrides
        config = BrokerConfig.load(args.config, overrides)
        asyncio.run(_serve(config, secure))
    except (ConfigError, LogDirError, OSError, RuntimeError, AdminError, KafkaClientError, ValueError) as e:
        print(f"pybroker: {e}", file=sys.stderr)
        return 1
    return 0
