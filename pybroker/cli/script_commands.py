"""The entry points installed under Kafka's script names (``[project.scripts]`` in pyproject.toml:
``kafka-topics.sh`` runs `kafka_topics` …): each runs its script (`pybroker.cli.kafka_scripts`)
through ``pybroker``'s own command line. They sit above both, so neither imports the other's
caller.
"""

from __future__ import annotations

import sys

from pybroker.cli.kafka_scripts import run_script
from pybroker.cli.main import main


def kafka_topics() -> int:
    return run_script("kafka-topics.sh", sys.argv[1:], main)


def kafka_configs() -> int:
    return run_script("kafka-configs.sh", sys.argv[1:], main)


def kafka_consumer_groups() -> int:
    return run_script("kafka-consumer-groups.sh", sys.argv[1:], main)


def kafka_delete_records() -> int:
    return run_script("kafka-delete-records.sh", sys.argv[1:], main)


def kafka_acls() -> int:
    return run_script("kafka-acls.sh", sys.argv[1:], main)


def kafka_reassign_partitions() -> int:
    return run_script("kafka-reassign-partitions.sh", sys.argv[1:], main)


def kafka_leader_election() -> int:
    return run_script("kafka-leader-election.sh", sys.argv[1:], main)


def kafka_log_dirs() -> int:
    return run_script("kafka-log-dirs.sh", sys.argv[1:], main)


def kafka_console_producer() -> int:
    return run_script("kafka-console-producer.sh", sys.argv[1:], main)


def kafka_console_consumer() -> int:
    return run_script("kafka-console-consumer.sh", sys.argv[1:], main)


def kafka_server_start() -> int:
    return run_script("kafka-server-start.sh", sys.argv[1:], main)


def kafka_server_stop() -> int:
    return run_script("kafka-server-stop.sh", sys.argv[1:], main)


def zookeeper_server_start() -> int:
    return run_script("zookeeper-server-start.sh", sys.argv[1:], main)


def zookeeper_server_stop() -> int:
    return run_script("zookeeper-server-stop.sh", sys.argv[1:], main)
