"""``pybroker kafka-home DIR``: lay out a Kafka installation directory that runs pybroker.

Tools and test suites that drive Kafka through its directory (``$KAFKA_PATH/bin/kafka-topics.sh
--bootstrap-server … --create …``, ``$KAFKA_HOME/bin/kafka-server-start.sh
$KAFKA_HOME/config/server.properties``) find there:

- ``bin/<script>`` for every script of `pybroker.cli.kafka_scripts` (``kafka-topics.sh`` …,
  ``kafka-server-start.sh``): small sh wrappers that exec this Python with ``-P -m pybroker
  <script>``, so they work without the installed scripts on the PATH and inside a virtualenv,
  from any working directory (``-P``: a ``pybroker/`` directory there, such as a source
  checkout without its built native module, is not imported instead); when pybroker is not
  installed but imported from a checkout, the wrapper puts that checkout on ``PYTHONPATH``.
  They export ``PYBROKER_KAFKA_HOME`` so the server scripts keep their output and pid files in
  ``DIR/logs`` (``$LOG_DIR`` wins, as in Kafka);
- ``config/server.properties``: a working single broker (pybroker's defaults, a PLAINTEXT
  listener on 127.0.0.1:9092, ``log.dirs`` under ``DIR/data``), and ``config/zookeeper.properties``
  for zookeeper-server-start.sh;
- ``libs/`` (empty: no jars) and ``NOTICE`` saying what the directory is.

Running it again rewrites the wrappers and NOTICE when they differ (another Python, another
checkout) and keeps the config files, which tools edit (a port, a broker id), unless ``--force``.
Every file is printed with what was done to it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import pybroker
from pybroker.cli import kafka_scripts
from pybroker.cli.kafka_scripts import HOME_ENV, KAFKA_VERSION, SCRIPT_NAMES, module_command
from pybroker.common.config import format_value
from pybroker.server.config import BROKER_CONFIGS

DEFAULT_PORT = 9092
ZOOKEEPER_PORT = 2181


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "kafka-home", help="lay out a Kafka-style directory (bin/*.sh, config/) that runs pybroker",
        description="Write DIR/bin/<Kafka script> wrappers running pybroker, DIR/config/server.properties and "
                    "zookeeper.properties, DIR/libs/ and DIR/NOTICE, for tools that drive Kafka through its "
                    "directory (KAFKA_HOME/KAFKA_PATH).",
    )
    parser.add_argument("directory", metavar="DIR", help="the directory to lay out (created if missing)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the broker's port in config/server.properties (default {DEFAULT_PORT})")
    parser.add_argument("--force", action="store_true", help="also overwrite config files that exist")
    parser.set_defaults(run=run)


def wrapper(script: str, python: str = sys.executable, import_root: Path | None = None) -> str:
    """The sh text of ``bin/<script>``: ``python -P -m pybroker <script>`` (`module_command`),
    ``import_root`` (a checkout pybroker is imported from) first on ``PYTHONPATH``."""
    command = module_command(python)
    lines = [
        "#!/bin/sh",
        f"# Kafka's {script}, run by pybroker (written by `pybroker kafka-home`): "
        f"`{shlex.join([Path(python).name, *command[1:], script])} ARGS`.",
        'base_dir=$(cd "$(dirname "$0")/.." && pwd)',
        f'{HOME_ENV}="$base_dir"; export {HOME_ENV}',
    ]
    if import_root is not None:
        lines.append(f"PYTHONPATH={shlex.quote(str(import_root))}${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH")
    lines.append(f'exec {shlex.join([*command, script])} "$@"')
    return "\n".join(lines) + "\n"


def _default(name: str) -> str:
    return format_value(BROKER_CONFIGS[name].default)


def server_properties(home: Path, port: int = DEFAULT_PORT) -> str:
    """A single broker's server.properties: Kafka's file's sections with pybroker's defaults."""
    return f"""# server.properties of a pybroker broker (written by `pybroker kafka-home`), in the layout of
# Kafka's config/server.properties. Any Kafka broker property pybroker knows may be added;
# unknown ones are logged and ignored. Start it with bin/kafka-server-start.sh config/server.properties.

############################# Server Basics #############################
# This broker's id: Kafka's broker.id, which kafka-server-start.sh passes on as pybroker's node.id
# (the broker itself logs broker.id as an unknown property it ignores).
broker.id={_default("node.id")}

############################# Socket Server Settings #############################
listeners=PLAINTEXT://127.0.0.1:{port}
#advertised.listeners=PLAINTEXT://your.host.name:{port}
socket.request.max.bytes={_default("socket.request.max.bytes")}

############################# Log Basics #############################
log.dirs={home / "data" / "kafka-logs"}
num.partitions={_default("num.partitions")}
num.recovery.threads.per.data.dir={_default("num.recovery.threads.per.data.dir")}

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor={_default("offsets.topic.replication.factor")}
transaction.state.log.replication.factor={_default("transaction.state.log.replication.factor")}
transaction.state.log.min.isr={_default("transaction.state.log.min.isr")}

############################# Log Retention Policy #############################
log.retention.hours={_default("log.retention.hours")}
log.segment.bytes={_default("log.segment.bytes")}
log.retention.check.interval.ms={_default("log.retention.check.interval.ms")}

############################# Zookeeper #############################
# Without zookeeper.connect the broker runs alone (zero-config); set it (and a node.id per broker)
# to run a ZooKeeper-mode cluster, e.g. with bin/zookeeper-server-start.sh config/zookeeper.properties.
#zookeeper.connect=127.0.0.1:{ZOOKEEPER_PORT}

############################# Group Coordinator Settings #############################
group.initial.rebalance.delay.ms={_default("group.initial.rebalance.delay.ms")}
"""


def zookeeper_properties(home: Path) -> str:
    return f"""# zookeeper.properties for bin/zookeeper-server-start.sh (written by `pybroker kafka-home`):
# the Debian ZooKeeper package's server, as Kafka's own file sets it up.
dataDir={home / "data" / "zookeeper"}
clientPort={ZOOKEEPER_PORT}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,stat
"""


def notice(python: str) -> str:
    return f"""This directory is a pybroker "Kafka home", written by `pybroker kafka-home` (pybroker {pybroker.__version__}).

It is not Apache Kafka. It has Kafka's layout so that tools and test suites that drive Kafka
through its directory (KAFKA_HOME / KAFKA_PATH: bin/kafka-topics.sh, bin/kafka-server-start.sh
config/server.properties, ...) run against pybroker, a Kafka-compatible broker, unchanged:

  bin/     Kafka's script names; each runs `{python} -P -m pybroker <script>`, which
           takes the Kafka {KAFKA_VERSION} tool's options (see pybroker's docs/kafka-scripts.md).
  config/  server.properties (one broker on 127.0.0.1) and zookeeper.properties.
  libs/    empty: there are no jars.
  logs/    the server scripts' output (kafkaServer.out) and pid files.
  data/    the broker's log.dirs and ZooKeeper's dataDir.

Running `pybroker kafka-home` again refreshes bin/ and this file and keeps config/.
"""


def _write(path: Path, text: str, executable: bool = False, keep: bool = False) -> str:
    """Write ``text`` to ``path`` unless it holds it already (or exists and ``keep``); what was done."""
    if path.exists():
        if keep:
            return "kept"
        if path.read_text(encoding="utf-8") == text:
            if executable:
                path.chmod(0o755)
            return "unchanged"
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)
    return "wrote"


def lay_out(directory: Path, port: int = DEFAULT_PORT, force: bool = False) -> list[tuple[str, Path]]:
    """Lay out ``directory``; (what was done, path) for every file and folder."""
    home = directory.resolve()
    done: list[tuple[str, Path]] = []
    for folder in ("bin", "config", "libs"):
        path = home / folder
        done.append(("unchanged" if path.is_dir() else "created", path))
        path.mkdir(parents=True, exist_ok=True)
    root = kafka_scripts.import_root()
    for script in SCRIPT_NAMES:
        path = home / "bin" / script
        done.append((_write(path, wrapper(script, sys.executable, root), executable=True), path))
    done.append((_write(home / "config" / "server.properties", server_properties(home, port), keep=not force),
                 home / "config" / "server.properties"))
    done.append((_write(home / "config" / "zookeeper.properties", zookeeper_properties(home), keep=not force),
                 home / "config" / "zookeeper.properties"))
    done.append((_write(home / "NOTICE", notice(sys.executable)), home / "NOTICE"))
    return done


def run(args: argparse.Namespace) -> int:
    try:
        done = lay_out(Path(args.directory), args.port, args.force)
    except OSError as e:
        print(f"pybroker kafka-home: {e}", file=sys.stderr)
        return 1
    for what, path in done:
        print(f"{what} {path}{'/' if path.is_dir() else ''}")
    return 0
