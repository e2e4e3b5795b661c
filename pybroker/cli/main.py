"""The ``pybroker`` command: sub-command dispatch."""

from __future__ import annotations

import argparse
import sys

from pybroker.cli import (
    acls,
    apis,
    cluster,
    configs,
    console,
    consumer_groups,
    delete_records,
    kafka_home,
    kafka_scripts,
    leader_election,
    log_dirs,
    reassign_partitions,
    serve,
    topics,
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in kafka_scripts.SCRIPT_NAMES:  # `pybroker kafka-topics.sh …` (the bin/ wrappers)
        return kafka_scripts.run_script(argv[0], argv[1:], main)
    parser = argparse.ArgumentParser(prog="pybroker", description="A Kafka-compatible broker.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(commands)
    cluster.add_parser(commands)
    topics.add_parser(commands)
    consumer_groups.add_parser(commands)
    console.add_parser(commands)
    configs.add_parser(commands)
    delete_records.add_parser(commands)
    leader_election.add_parser(commands)
    reassign_partitions.add_parser(commands)
    log_dirs.add_parser(commands)
    apis.add_parser(commands)
    acls.add_parser(commands)
    kafka_home.add_parser(commands)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
