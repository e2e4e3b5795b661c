"""Kafka's script names: ``kafka-topics.sh``, ``kafka-console-producer.sh``, ``kafka-server-start.sh`` …

Owns the table of scripts (`SCRIPTS`: each script's name, Kafka 3.6's options for that tool, the
``pybroker`` sub-command behind it and how its flags translate), Kafka's command-line conventions
(joptsimple's: ``--opt value`` or ``--opt=value``, a unique prefix of a long option stands for it,
an option Kafka does not know is refused with joptsimple's message and exit 1), the entry points'
names (`entry_point_name`; they live in `pybroker.cli.script_commands`, above ``main``), the
``python -P -m pybroker kafka-topics.sh …`` form the ``bin/`` wrappers of ``pybroker kafka-home`` run
(`module_command`: ``-P`` keeps the working directory off ``sys.path``, so a directory holding
another ``pybroker/`` package, such as a source checkout, does not shadow the one that runs; a
pybroker imported from a checkout goes on ``PYTHONPATH`` instead, `import_root`), and the server
scripts: ``kafka-server-start.sh [-daemon] server.properties [--override k=v]*``,
``kafka-server-stop.sh``, ``zookeeper-server-start.sh [-daemon] zookeeper.properties`` and
``zookeeper-server-stop.sh``, which find what to stop by the pid files the start scripts write.

A Kafka option the pybroker sub-command does not take (yet) is refused with one line and exit 1,
found by asking the sub-command's own parser, so a sub-command that gains an option (or a
sub-command that appears, such as ``reassign-partitions``) is used without a change here.
docs/kafka-scripts.md lists the scripts and their options.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import site
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pybroker
from pybroker import __version__
from pybroker.cli.command_config import CommandConfigError, load_properties

KAFKA_VERSION = "3.6.2"  # the Kafka tools whose options and output these scripts follow
REQUIRED, OPTIONAL, FLAG = "required", "optional", "flag"  # joptsimple's argument kinds
HOME_ENV = "PYBROKER_KAFKA_HOME"  # set by the bin/ wrappers of `pybroker kafka-home`
COMMON_OPTIONS = {"help": FLAG, "version": FLAG}  # Kafka's CommandDefaultOptions

Args = list[tuple[str, str | None]]  # parsed Kafka options in command-line order


class ScriptError(Exception):
    """A command line the script refuses: the message is printed on stderr, exit 1."""


@dataclass(frozen=True)
class Script:
    """One Kafka script: its options (name → `REQUIRED`/`OPTIONAL`/`FLAG`), the pybroker
    sub-command (``command``, defined in ``pybroker.cli.<module>``) and ``translate``, which
    turns the parsed options into the sub-command's arguments."""

    name: str
    command: str
    module: str
    options: dict[str, str]
    translate: Callable[[Script, Args], list[str]] | None = None
    refused: dict[str, str] = field(default_factory=dict)  # option → why pybroker refuses it


# --- Kafka's command line ------------------------------------------------------------------------

def unrecognized(name: str) -> ScriptError:
    return ScriptError(f'Exception in thread "main" joptsimple.UnrecognizedOptionException: {name} is not a '
                       "recognized option")


def resolve(options: dict[str, str], name: str) -> str:
    """joptsimple's long-option lookup: the exact name, else the one option it is a prefix of."""
    if name in options:
        return name
    candidates = [o for o in options if o.startswith(name)] if name else []
    if len(candidates) != 1:
        raise unrecognized(name)
    return candidates[0]


def parse_kafka_args(options: dict[str, str], argv: list[str]) -> tuple[Args, list[str]]:
    """Kafka-style ``argv`` → ([(option, value or None)], non-option arguments)."""
    parsed: Args = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            rest += argv[i:]
            break
        if not token.startswith("-") or token == "-" or _is_number(token):
            rest.append(token)
            continue
        name, eq, value = token.lstrip("-").partition("=")
        option = resolve(options, name)
        kind = options[option]
        if kind == FLAG:
            if eq:
                raise ScriptError(f"Option {option} does not take an argument")
            parsed.append((option, None))
        elif eq:
            parsed.append((option, value))
        elif kind == REQUIRED:
            if i >= len(argv):
                raise ScriptError(f"Option {option} requires an argument")
            parsed.append((option, argv[i]))
            i += 1
        elif i < len(argv) and not argv[i].startswith("-"):
            parsed.append((option, argv[i]))
            i += 1
        else:
            parsed.append((option, None))
    return parsed, rest


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def as_arguments(args: Args) -> list[str]:
    """``--name=value`` (unambiguous for argparse, even for a value such as ``-2``) or ``--name``."""
    return [f"--{name}" if value is None else f"--{name}={value}" for name, value in args]


# --- translations --------------------------------------------------------------------------------

def _properties_file(path: str, option: str) -> list[tuple[str, str]]:
    try:
        return list(load_properties(path).items())
    except CommandConfigError as e:
        raise ScriptError(str(e).replace("--command-config", f"--{option}")) from None


def translate_topics(script: Script, args: Args) -> list[str]:
    """TopicCommand's exact output and errors come with ``--kafka-tool``."""
    return [*as_arguments(args), "--kafka-tool"]


def translate_configs(script: Script, args: Args) -> list[str]:
    """``--force`` only suppressed ZooKeeper-mode prompts: dropped."""
    return as_arguments([(n, v) for n, v in args if n != "force"])


# ConsoleProducer's options that set a producer property (its ``maybeMergeOptions``; they win
# over --producer-property and --producer.config).
PRODUCER_OPTION_PROPERTIES = {
    "timeout": "linger.ms",
    "request-timeout-ms": "request.timeout.ms",
    "message-send-max-retries": "retries",
    "retry-backoff-ms": "retry.backoff.ms",
    "socket-buffer-size": "send.buffer.bytes",
    "max-memory-bytes": "buffer.memory",
    "batch-size": "batch.size",
    "max-partition-memory-bytes": "batch.size",
    "metadata-expiry-ms": "metadata.max.age.ms",
    "max-block-ms": "max.block.ms",
}
LINE_READERS = ("kafka.tools.ConsoleProducer$LineMessageReader", "kafka.tools.LineMessageReader",
                "org.apache.kafka.tools.LineMessageReader")
FORMATTERS = ("kafka.tools.DefaultMessageFormatter", "org.apache.kafka.tools.consumer.DefaultMessageFormatter")
BYTE_DESERIALIZERS = tuple(f"org.apache.kafka.common.serialization.{name}Deserializer" for name in ("String", "ByteArray"))


def translate_console_producer(script: Script, args: Args) -> list[str]:
    out: list[str] = []
    reader_config: list[tuple[str, str]] = []
    merged: list[tuple[str, str]] = []
    servers = [v for n, v in args if n == "bootstrap-server"]
    for name, value in args:
        if name == "broker-list":  # deprecated for --bootstrap-server, which wins
            if not servers:
                out.append(f"--bootstrap-server={value}")
        elif name == "compression-codec":
            out.append(f"--compression-codec={value or 'gzip'}")  # Kafka: gzip when given no value
        elif name == "sync":
            continue  # every record is acknowledged before the tool exits anyway
        elif name == "line-reader":
            if value not in LINE_READERS:
                raise ScriptError(f"{script.name}: --line-reader {value}: pybroker's console producer reads lines "
                                  "only (Kafka's LineMessageReader)")
        elif name == "reader-config":
            reader_config += _properties_file(str(value), name)
        elif name in PRODUCER_OPTION_PROPERTIES:
            merged.append((PRODUCER_OPTION_PROPERTIES[name], str(value)))
        else:
            out += as_arguments([(name, value)])
    return ([f"--property={k}={v}" for k, v in reader_config] + out
            + [f"--producer-property={k}={v}" for k, v in merged])


def translate_console_consumer(script: Script, args: Args) -> list[str]:
    out: list[str] = []
    formatter_config: list[tuple[str, str]] = []
    last: list[str] = []
    for name, value in args:
        if name == "formatter":
            if value not in FORMATTERS:
                raise ScriptError(f"{script.name}: --formatter {value}: pybroker's console consumer has Kafka's "
                                  "DefaultMessageFormatter only")
        elif name == "formatter-config":
            formatter_config += _properties_file(str(value), name)
        elif name in ("key-deserializer", "value-deserializer"):
            if value not in BYTE_DESERIALIZERS:
                raise ScriptError(f"{script.name}: --{name} {value}: pybroker's console consumer prints the bytes "
                                  "(StringDeserializer or ByteArrayDeserializer) only")
        elif name == "skip-message-on-error":
            continue  # the default formatter does not fail on a record
        elif name == "isolation-level":
            last.append(f"--consumer-property=isolation.level={value}")
        else:
            out += as_arguments([(name, value)])
    return [f"--property={k}={v}" for k, v in formatter_config] + out + last


# The options Kafka's ACL command generates for its --producer and --consumer conveniences
# (AclCommand.getProducerResourceFilterToAcls / getConsumerResourceFilterToAcls).
PRODUCER_TOPIC_OPERATIONS = ("Write", "Describe", "Create")
CONSUMER_TOPIC_OPERATIONS = ("Read", "Describe")


def acl_invocations(script: Script, args: Args) -> list[list[str]]:
    """kafka-acls.sh's arguments as one or more ``pybroker acls`` runs: ``--producer`` and
    ``--consumer`` give each resource type its own operations (topics: Write, Describe, Create
    or Read, Describe; groups: Read; transactional ids: Write, Describe; the cluster with
    --idempotent: IdempotentWrite), one run per resource type."""
    names = {n for n, _ in args}
    if not names & {"producer", "consumer"}:
        if "idempotent" in names:
            raise ScriptError("The --idempotent option is only available if --producer is set")
        return [as_arguments(args)]
    if "operation" in names:
        raise ScriptError("--operation can't be used with --producer or --consumer")
    if "consumer" in names and "group" not in names:
        raise ScriptError("With --consumer you must specify a --group")
    common = [(n, v) for n, v in args if n not in ("producer", "consumer", "idempotent", "topic", "group",
                                                       "transactional-id", "cluster")]
    topics = [(n, v) for n, v in args if n == "topic"]
    runs: list[Args] = []
    topic_operations = list(dict.fromkeys(
        (PRODUCER_TOPIC_OPERATIONS if "producer" in names else ()) + (CONSUMER_TOPIC_OPERATIONS if "consumer" in names else ())))
    if topics:
        runs.append(topics + [("operation", op) for op in topic_operations])
    if "consumer" in names:
        runs.append([(n, v) for n, v in args if n == "group"] + [("operation", "Read")])
    if "producer" in names:
        transactional = [(n, v) for n, v in args if n == "transactional-id"]
        if transactional:
            runs.append(transactional + [("operation", "Write"), ("operation", "Describe")])
        if "idempotent" in names:
            runs.append([("cluster", None), ("operation", "IdempotentWrite")])
    if not topics:
        raise ScriptError("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")
    return [as_arguments(common + run) for run in runs]


ZOOKEEPER_REFUSED = ("pybroker's tools talk to the brokers only (Kafka 3.x's --bootstrap-server); ZooKeeper-mode "
                     "access to the metadata is not supported")
IP_QUOTAS_REFUSED = "IP connection-rate quotas (--ip, --ip-defaults) are not supported by pybroker"

TOPICS_OPTIONS = {
    "bootstrap-server": REQUIRED, "command-config": REQUIRED, "list": FLAG, "create": FLAG, "delete": FLAG,
    "alter": FLAG, "describe": FLAG, "topic": REQUIRED, "topic-id": REQUIRED, "config": REQUIRED,
    "delete-config": REQUIRED, "partitions": REQUIRED, "replication-factor": REQUIRED,
    "replica-assignment": REQUIRED, "under-replicated-partitions": FLAG, "unavailable-partitions": FLAG,
    "under-min-isr-partitions": FLAG, "at-min-isr-partitions": FLAG, "topics-with-overrides": FLAG,
    "if-exists": FLAG, "if-not-exists": FLAG, "exclude-internal": FLAG,
}
CONFIGS_OPTIONS = {
    "zookeeper": REQUIRED, "bootstrap-server": REQUIRED, "command-config": REQUIRED, "alter": FLAG,
    "describe": FLAG, "all": FLAG, "entity-type": REQUIRED, "entity-name": REQUIRED, "entity-default": FLAG,
    "add-config": REQUIRED, "add-config-file": REQUIRED, "delete-config": REQUIRED, "force": FLAG,
    "topic": REQUIRED, "client": REQUIRED, "client-defaults": FLAG, "user": REQUIRED, "user-defaults": FLAG,
    "broker": REQUIRED, "broker-defaults": FLAG, "broker-logger": REQUIRED, "ip-defaults": FLAG, "ip": REQUIRED,
    "zk-tls-config-file": REQUIRED,
}
CONSUMER_GROUPS_OPTIONS = {
    "bootstrap-server": REQUIRED, "group": REQUIRED, "topic": REQUIRED, "all-topics": FLAG, "list": FLAG,
    "describe": FLAG, "all-groups": FLAG, "delete": FLAG, "timeout": REQUIRED, "command-config": REQUIRED,
    "reset-offsets": FLAG, "delete-offsets": FLAG, "dry-run": FLAG, "execute": FLAG, "export": FLAG,
    "to-offset": REQUIRED, "from-file": REQUIRED, "to-datetime": REQUIRED, "by-duration": REQUIRED,
    "to-earliest": FLAG, "to-latest": FLAG, "to-current": FLAG, "shift-by": REQUIRED, "members": FLAG,
    "verbose": FLAG, "offsets": FLAG, "state": OPTIONAL,
}
ACLS_OPTIONS = {
    "bootstrap-server": REQUIRED, "command-config": REQUIRED, "authorizer": REQUIRED,
    "authorizer-properties": REQUIRED, "topic": REQUIRED, "cluster": FLAG, "group": REQUIRED,
    "transactional-id": REQUIRED, "idempotent": FLAG, "delegation-token": REQUIRED,
    "resource-pattern-type": REQUIRED, "add": FLAG, "remove": FLAG, "list": FLAG, "operation": REQUIRED,
    "allow-principal": REQUIRED, "deny-principal": REQUIRED, "principal": REQUIRED, "allow-host": REQUIRED,
    "deny-host": REQUIRED, "producer": FLAG, "consumer": FLAG, "force": FLAG, "zk-tls-config-file": REQUIRED,
    "user-principal": REQUIRED,
}
CONSOLE_PRODUCER_OPTIONS = {
    "topic": REQUIRED, "broker-list": REQUIRED, "bootstrap-server": REQUIRED, "sync": FLAG,
    "compression-codec": OPTIONAL, "batch-size": REQUIRED, "message-send-max-retries": REQUIRED,
    "retry-backoff-ms": REQUIRED, "timeout": REQUIRED, "request-required-acks": REQUIRED,
    "request-timeout-ms": REQUIRED, "metadata-expiry-ms": REQUIRED, "max-block-ms": REQUIRED,
    "max-memory-bytes": REQUIRED, "max-partition-memory-bytes": REQUIRED, "line-reader": REQUIRED,
    "socket-buffer-size": REQUIRED, "property": REQUIRED, "reader-config": REQUIRED,
    "producer-property": REQUIRED, "producer.config": REQUIRED,
}
CONSOLE_CONSUMER_OPTIONS = {
    "topic": REQUIRED, "whitelist": REQUIRED, "include": REQUIRED, "partition": REQUIRED, "offset": REQUIRED,
    "consumer-property": REQUIRED, "consumer.config": REQUIRED, "formatter": REQUIRED, "property": REQUIRED,
    "formatter-config": REQUIRED, "from-beginning": FLAG, "max-messages": REQUIRED, "timeout-ms": REQUIRED,
    "skip-message-on-error": FLAG, "bootstrap-server": REQUIRED, "key-deserializer": REQUIRED,
    "value-deserializer": REQUIRED, "enable-systest-events": FLAG, "isolation-level": REQUIRED, "group": REQUIRED,
}

SCRIPTS: dict[str, Script] = {s.name: s for s in (
    Script("kafka-topics.sh", "topics", "topics", TOPICS_OPTIONS, translate_topics,
           refused={"topic-id": "--topic-id is not supported by pybroker's kafka-topics.sh: give --topic"}),
    Script("kafka-configs.sh", "configs", "configs", CONFIGS_OPTIONS, translate_configs,
           refused={"zookeeper": ZOOKEEPER_REFUSED, "zk-tls-config-file": ZOOKEEPER_REFUSED,
                    "ip": IP_QUOTAS_REFUSED, "ip-defaults": IP_QUOTAS_REFUSED}),
    Script("kafka-consumer-groups.sh", "consumer-groups", "consumer_groups", CONSUMER_GROUPS_OPTIONS),
    Script("kafka-delete-records.sh", "delete-records", "delete_records",
           {"bootstrap-server": REQUIRED, "offset-json-file": REQUIRED, "command-config": REQUIRED}),
    Script("kafka-acls.sh", "acls", "acls", ACLS_OPTIONS,
           refused={"authorizer": ZOOKEEPER_REFUSED, "authorizer-properties": ZOOKEEPER_REFUSED,
                    "zk-tls-config-file": ZOOKEEPER_REFUSED}),
    Script("kafka-reassign-partitions.sh", "reassign-partitions", "reassign_partitions", {
        "verify": FLAG, "generate": FLAG, "execute": FLAG, "cancel": FLAG, "list": FLAG,
        "bootstrap-server": REQUIRED, "command-config": REQUIRED, "reassignment-json-file": REQUIRED,
        "topics-to-move-json-file": REQUIRED, "broker-list": REQUIRED, "disable-rack-aware": FLAG,
        "throttle": REQUIRED, "replica-alter-log-dirs-throttle": REQUIRED, "timeout": REQUIRED,
        "additional": FLAG, "preserve-throttles": FLAG}),
    Script("kafka-leader-election.sh", "leader-election", "leader_election", {
        "bootstrap-server": REQUIRED, "admin.config": REQUIRED, "path-to-json-file": REQUIRED, "topic": REQUIRED,
        "partition": REQUIRED, "all-topic-partitions": FLAG, "election-type": REQUIRED}),
    Script("kafka-log-dirs.sh", "log-dirs", "log_dirs", {
        "bootstrap-server": REQUIRED, "command-config": REQUIRED, "describe": FLAG, "topic-list": REQUIRED,
        "broker-list": REQUIRED}),
    Script("kafka-console-producer.sh", "console-producer", "console", CONSOLE_PRODUCER_OPTIONS,
           translate_console_producer),
    Script("kafka-console-consumer.sh", "console-consumer", "console", CONSOLE_CONSUMER_OPTIONS,
           translate_console_consumer,
           refused={"whitelist": "--whitelist/--include (subscribing by pattern) is not supported by pybroker's "
                                 "console consumer: give --topic",
                    "include": "--whitelist/--include (subscribing by pattern) is not supported by pybroker's "
                               "console consumer: give --topic",
                    "enable-systest-events": "--enable-systest-events is not supported by pybroker"}),
)}
# The server scripts: their own command lines (a properties file, then --override pairs).
SERVER_SCRIPTS = ("kafka-server-start.sh", "kafka-server-stop.sh", "zookeeper-server-start.sh",
                  "zookeeper-server-stop.sh")
SCRIPT_NAMES = (*SCRIPTS, *SERVER_SCRIPTS)


def subcommand_parser(script: Script) -> argparse.ArgumentParser | None:
    """The parser of the script's pybroker sub-command; None when this build does not have it."""
    try:
        module = importlib.import_module(f"pybroker.cli.{script.module}")
    except ModuleNotFoundError as e:
        if e.name == f"pybroker.cli.{script.module}":
            return None
        raise
    subcommands = argparse.ArgumentParser().add_subparsers()
    module.add_parser(subcommands)
    return subcommands.choices.get(script.command)


def translate(script: Script, argv: list[str]) -> list[list[str]]:
    """The pybroker command lines (usually one) that do what ``script argv`` does in Kafka;
    raises ScriptError for what pybroker refuses."""
    args, rest = parse_kafka_args({**script.options, **COMMON_OPTIONS}, argv)
    for name, _ in args:
        if name in script.refused:
            raise ScriptError(f"{script.name}: {script.refused[name]}")
    if rest:
        print(f"{script.name}: ignoring non-option arguments: {' '.join(rest)}", file=sys.stderr)
    if script.name == "kafka-acls.sh":
        runs = acl_invocations(script, args)
    else:
        runs = [script.translate(script, args) if script.translate else as_arguments(args)]
    parser = subcommand_parser(script)
    if parser is None:
        raise ScriptError(f"{script.name}: this pybroker has no `pybroker {script.command}` command")
    accepted = parser._option_string_actions
    for run in runs:
        for token in run:
            option = token.partition("=")[0]
            if option.startswith("--") and option not in accepted:
                raise ScriptError(f"{script.name}: option {option} is not supported by pybroker "
                                  f"(`pybroker {script.command}` does not take it)")
    return [[script.command, *run] for run in runs]


def module_command(python: str = sys.executable) -> list[str]:
    """The command line that runs ``python -m pybroker`` with the pybroker that is installed (or
    on ``PYTHONPATH``), wherever it runs: ``-P`` (Python 3.11+, as ``PYTHONSAFEPATH``) keeps
    ``python -m`` from putting the working directory first on ``sys.path``, where a checkout's
    ``pybroker/`` (without its built ``_native`` module) would be imported instead."""
    return [python, "-P", "-m", "pybroker"]


def import_root() -> Path | None:
    """The directory pybroker is imported from when it is not an installed package (a checkout
    on PYTHONPATH or the working directory), which a `module_command` must then find on
    PYTHONPATH; None when installed."""
    root = Path(pybroker.__file__).resolve().parent.parent
    installed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages(),
                 site.getusersitepackages()}
    return None if any(Path(p).resolve() == root for p in installed if p) else root


def module_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a `module_command` child that imports this process's pybroker: `import_root`
    first on ``PYTHONPATH`` when pybroker is not installed."""
    root = import_root()
    if root is None:
        return env
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": str(root) + (os.pathsep + rest if rest else "")}


#: ``pybroker``'s own command line (`pybroker.cli.main.main`), which runs a translated script.
Main = Callable[[list[str]], int]


def run_script(name: str, argv: list[str], main: Main) -> int:
    """Run Kafka's script ``name`` with Kafka's arguments ``argv`` through ``main``; the exit
    code."""
    if name in SERVER_SCRIPTS:
        return SERVER_RUNNERS[name](argv, main)
    script = SCRIPTS[name]
    if argv and argv[0] in ("--version", "-version"):
        print(f"{KAFKA_VERSION} (pybroker {__version__})")
        return 0
    if "--help" in argv or "-h" in argv:
        parser = subcommand_parser(script)
        if parser is not None:
            parser.print_help()
        return 0
    try:
        runs = translate(script, argv)
    except ScriptError as e:
        print(str(e), file=sys.stderr)
        return 1
    code = 0
    for run in runs:
        try:
            code = main(run) or code
        except SystemExit as e:  # argparse's usage errors (2)
            return e.code if isinstance(e.code, int) else 1
    return code


# --- kafka-server-start.sh / kafka-server-stop.sh and ZooKeeper's ----------------------------------

SERVER_USAGE = "USAGE: {script} [-daemon] server.properties [--override property=value]*"
ZOOKEEPER_USAGE = "USAGE: {script} [-daemon] zookeeper.properties"


def run_dir() -> Path:
    """Where the server scripts write their console output and pid files: ``$LOG_DIR`` as in
    Kafka's kafka-run-class.sh, else the Kafka home's ``logs/`` (of a ``pybroker kafka-home``
    wrapper, or of the directory an installed script is in, like Kafka's ``$base_dir/logs``),
    else ``./logs``."""
    if os.environ.get("LOG_DIR"):
        return Path(os.environ["LOG_DIR"])
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]) / "logs"
    program = Path(sys.argv[0])
    if program.name in SCRIPT_NAMES:
        return program.resolve().parent.parent / "logs"
    return Path("logs")


def _pid_file(kind: str, pid: int) -> Path:
    return run_dir() / f"{kind}-{pid}.pid"


def _write_pid(kind: str, pid: int) -> Path:
    path = _pid_file(kind, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid}\n")
    return path


def _process_matches(pid: int, marker: str) -> bool:
    """``pid`` is alive and its command line holds ``marker`` (a reused pid is not ours)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc (macOS): trust the pid file
    return marker in cmdline


def stop_servers(kind: str, marker: str) -> list[int]:
    """Signal (``$SIGNAL``, default TERM, as Kafka's stop scripts) every live process of the pid
    files of ``kind``; stale pid files are removed. The pids signalled."""
    name = os.environ.get("SIGNAL", "TERM").upper().removeprefix("SIG")
    sig = getattr(signal, f"SIG{name}", None) if not name.isdigit() else signal.Signals(int(name))
    if sig is None:
        raise ScriptError(f"unknown signal {name}")
    stopped = []
    for path in sorted(run_dir().glob(f"{kind}-*.pid")):
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
        if not _process_matches(pid, marker):
            path.unlink(missing_ok=True)
            continue
        try:
            os.kill(pid, sig)
            stopped.append(pid)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
    return stopped


def _server_arguments(argv: list[str], script: str) -> tuple[bool, str, list[str]]:
    """(daemon, properties file, overrides) of ``[-daemon] server.properties [--override k=v]*``."""
    daemon = bool(argv) and argv[0] == "-daemon"
    argv = argv[1:] if daemon else argv
    if not argv or argv[0].startswith("-"):
        raise ScriptError(SERVER_USAGE.format(script=script))
    path, rest, overrides = argv[0], argv[1:], []
    i = 0
    while i < len(rest):
        token = rest[i]
        if token == "--override" and i + 1 < len(rest):
            overrides.append(rest[i + 1])
            i += 2
        elif token.startswith("--override="):
            overrides.append(token.removeprefix("--override="))
            i += 1
        else:
            raise ScriptError(f"Found non argument parameters: {token}\n" + SERVER_USAGE.format(script=script))
    for item in overrides:
        if "=" not in item:
            raise ScriptError(f"Invalid override {item!r}: expected property=value")
    return daemon, path, overrides


def kafka_server_start_main(argv: list[str], main: Main) -> int:
    """``kafka-server-start.sh [-daemon] server.properties [--override property=value]*``:
    ``pybroker serve`` in the foreground (until SIGTERM/SIGINT), or with ``-daemon`` in the
    background (a `module_command` child running this pybroker) with its output in
    ``$LOG_DIR/kafkaServer.out``. Each broker's pid file lets kafka-server-stop.sh find it."""
    script = "kafka-server-start.sh"
    if argv and argv[0] in ("--version", "-version"):
        print(f"{KAFKA_VERSION} (pybroker {__version__})")
        return 0
    try:
        daemon, path, overrides = _server_arguments(argv, script)
        try:
            load_properties(path)  # an unreadable file stops here, in one line
        except CommandConfigError as e:
            raise ScriptError(str(e).replace("--command-config file", "properties file")) from None
    except ScriptError as e:
        print(str(e), file=sys.stderr)
        return 1
    if daemon:
        out_path = run_dir() / "kafkaServer.out"
        out_path.parent.mkdir(parents=True, exist_ok=True)
        command = [*module_command(), script, path]
        for item in overrides:
            command += ["--override", item]
        env = module_environment({**os.environ, "LOG_DIR": str(run_dir().resolve())})
        with open(out_path, "ab") as out:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env)
        _write_pid("kafka-server", child.pid)
        return 0
    pid_file = _write_pid("kafka-server", os.getpid())
    try:
        return main(["serve", "--config", path, *[f"--override={item}" for item in overrides]])
    finally:
        pid_file.unlink(missing_ok=True)


def kafka_server_stop_main(argv: list[str], main: Main | None = None) -> int:
    """``kafka-server-stop.sh``: signal the brokers kafka-server-start.sh started (its pid files
    in the same ``$LOG_DIR``); "No kafka server to stop" and exit 1 when there is none."""
    try:
        stopped = stop_servers("kafka-server", "pybroker")
    except ScriptError as e:
        print(str(e), file=sys.stderr)
        return 1
    if not stopped:
        print("No kafka server to stop")
        return 1
    return 0


def zookeeper_server_start_main(argv: list[str], main: Main | None = None) -> int:
    """``zookeeper-server-start.sh [-daemon] zookeeper.properties``: the Debian ZooKeeper
    (`pybroker.zookeeper.server`) with that file, in the foreground or in the background with
    its output in ``$LOG_DIR/zookeeper.out``."""
    from pybroker.zookeeper.server import MAIN_CLASS, ZooKeeperInstall, ZooKeeperNotInstalledError

    script = "zookeeper-server-start.sh"
    daemon = bool(argv) and argv[0] == "-daemon"
    argv = argv[1:] if daemon else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(ZOOKEEPER_USAGE.format(script=script), file=sys.stderr)
        return 1
    try:
        install = ZooKeeperInstall.find()
    except ZooKeeperNotInstalledError as e:
        print(f"{script}: {e}", file=sys.stderr)
        return 1
    command = [install.java, "-cp", os.pathsep.join(install.classpath), MAIN_CLASS, argv[0]]
    if daemon:
        out_path = run_dir() / "zookeeper.out"
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "ab") as out:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        _write_pid("zookeeper-server", child.pid)
        return 0
    _write_pid("zookeeper-server", os.getpid())  # exec keeps the pid; the stop script drops it once dead
    os.execv(install.java, command)
    return 1  # not reached


def zookeeper_server_stop_main(argv: list[str], main: Main | None = None) -> int:
    """``zookeeper-server-stop.sh``: signal the ZooKeeper servers zookeeper-server-start.sh
    started; "No zookeeper server to stop" and exit 1 when there is none."""
    try:
        stopped = stop_servers("zookeeper-server", MAIN_CLASS_MARKER)
    except ScriptError as e:
        print(str(e), file=sys.stderr)
        return 1
    if not stopped:
        print("No zookeeper server to stop")
        return 1
    return 0


MAIN_CLASS_MARKER = "ZooKeeperServerMain"
SERVER_RUNNERS: dict[str, Callable[[list[str], Main], int]] = {
    "kafka-server-start.sh": kafka_server_start_main,
    "kafka-server-stop.sh": kafka_server_stop_main,
    "zookeeper-server-start.sh": zookeeper_server_start_main,
    "zookeeper-server-stop.sh": zookeeper_server_stop_main,
}


def entry_point_name(script: str) -> str:
    """The function of `pybroker.cli.script_commands` installed under ``script``'s name."""
    return script.removesuffix(".sh").replace("-", "_")
