"""``pybroker configs`` (like kafka-configs.sh): describe and alter topic configs, describe broker
configs. What the CLI changes is checked against what confluent-kafka's AdminClient sees."""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from tests.integration.test_cli import failed, ok, pybroker, topics

MIN_TIMESTAMP = "1700000000000"
ENTRY = re.compile(r"  [A-Za-z0-9._]+=\S* sensitive=(true|false) synonyms=\{([A-Z_]+:[A-Za-z0-9._]+=\S*(, )?)*\}")


def configs(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return pybroker("configs", "--bootstrap-server", broker.bootstrap, *args)


def kafka_overrides(broker, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {n: e.value for n, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def test_alter_then_describe_log_retention_min_timestamp(broker, topic_name):
    ok(topics(broker, "create", "--topic", topic_name))
    entity = ("--entity-type", "topics", "--entity-name", topic_name)
    assert ok(configs(broker, *entity, "--describe")) == f"Dynamic configs for topic {topic_name} are:\n"
    assert ok(configs(broker, *entity, "--alter", "--add-config", f"log.retention.min.timestamp={MIN_TIMESTAMP},retention.ms=60000")) \
        == f"Completed updating config for topic {topic_name}.\n"
    out = ok(configs(broker, *entity, "--describe")).splitlines()
    assert out[0] == f"Dynamic configs for topic {topic_name} are:"
    assert out[1] == (f"  log.retention.min.timestamp={MIN_TIMESTAMP} sensitive=false "
                      f"synonyms={{DYNAMIC_TOPIC_CONFIG:log.retention.min.timestamp={MIN_TIMESTAMP}}}")
    # No broker synonym: Kafka's list starts at log.retention.ms, which the broker does not set.
    assert out[2] == "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}", out[2]
    assert len(out) == 3 and all(ENTRY.fullmatch(line) for line in out[1:]), out
    assert kafka_overrides(broker, topic_name) == {"log.retention.min.timestamp": MIN_TIMESTAMP, "retention.ms": "60000"}

    # --delete-config (repeatable, comma-separated), and --topic as the shorthand entity.
    assert ok(configs(broker, "--topic", topic_name, "--alter", "--delete-config", "retention.ms")) \
        == f"Completed updating config for topic {topic_name}.\n"
    assert kafka_overrides(broker, topic_name) == {"log.retention.min.timestamp": MIN_TIMESTAMP}
    assert ok(configs(broker, "--topic", topic_name, "--describe")).splitlines()[1:] == [
        f"  log.retention.min.timestamp={MIN_TIMESTAMP} sensitive=false "
        f"synonyms={{DYNAMIC_TOPIC_CONFIG:log.retention.min.timestamp={MIN_TIMESTAMP}}}",
    ]
    # Kafka's square brackets group a value holding commas; set and delete in one call.
    ok(configs(broker, *entity, "--alter", "--add-config", "cleanup.policy=[compact,delete]",
               "--delete-config", "log.retention.min.timestamp"))
    assert kafka_overrides(broker, topic_name) == {"cleanup.policy": "compact,delete"}


def test_describe_all_topic_configs(broker, topic_name):
    ok(topics(broker, "create", "--topic", topic_name, "--config", "segment.bytes=50000"))
    out = ok(configs(broker, "--topic", topic_name, "--describe", "--all")).splitlines()
    assert out[0] == f"All configs for topic {topic_name} are:"
    assert all(ENTRY.fullmatch(line) for line in out[1:]), out
    names = [line.split("=", 1)[0].strip() for line in out[1:]]
    assert names == sorted(names) and {"cleanup.policy", "log.retention.min.timestamp", "retention.ms"} <= set(names)
    assert any(line.startswith("  log.retention.min.timestamp=0 sensitive=false synonyms={") for line in out), out
    assert any(line.startswith("  segment.bytes=50000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=50000")
               for line in out), out


def test_describe_every_topic(broker, topic_name):
    ok(topics(broker, "create", "--topic", topic_name, "--config", "retention.ms=120000"))
    out = ok(configs(broker, "--entity-type", "topics", "--describe"))
    block = out.split(f"Dynamic configs for topic {topic_name} are:\n", 1)[1]
    assert block.startswith("  retention.ms=120000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=120000")


def test_broker_configs(broker):
    assert ok(configs(broker, "--entity-type", "brokers", "--entity-name", "1", "--describe")) == "Dynamic configs for broker 1 are:\n"
    assert ok(configs(broker, "--entity-type", "brokers", "--describe")) == \
        "Dynamic configs for broker 1 are:\nDefault configs for brokers in the cluster are:\n"
    out = ok(configs(broker, "--broker", "1", "--describe", "--all")).splitlines()
    assert out[0] == "All configs for broker 1 are:" and len(out) > 10
    assert all(ENTRY.fullmatch(line) for line in out[1:]), [line for line in out[1:] if not ENTRY.fullmatch(line)]
    assert ok(configs(broker, "--broker", "7", "--describe")) == "The broker '7' doesn't exist and doesn't have dynamic config.\n"


def test_errors(broker, topic_name):
    ok(topics(broker, "create", "--topic", topic_name))
    missing = topic_name + "-missing"
    assert ok(configs(broker, "--topic", missing, "--describe")) == \
        f"The topic '{missing}' doesn't exist and doesn't have dynamic config.\n"
    cases = [  # (arguments, fragments of the one error line)
        (("--topic", missing, "--alter", "--add-config", "retention.ms=1"), ("UNKNOWN_TOPIC_OR_PARTITION", missing)),
        (("--topic", topic_name, "--alter", "--add-config", "retention.ms=soon"), ("INVALID_CONFIG",)),
        (("--topic", topic_name, "--alter", "--add-config", "no.such.config=1"), ("INVALID_CONFIG",)),
        (("--topic", topic_name, "--alter", "--delete-config", "segment.bytes"), ("Invalid config(s): segment.bytes",)),
        (("--topic", topic_name, "--alter", "--add-config", "retention.ms"), ("Invalid entity config",)),
        (("--topic", topic_name, "--alter", "--add-config", "bad key=1"), ("Invalid character found for config key: bad key",)),
        (("--broker", "one", "--describe"), ("must be a valid integer broker id",)),
        (("--broker", "1", "--alter", "--add-config", "log.dirs=/x"), ("INVALID_REQUEST", "Set(log.dirs)")),
        # Usage errors (exit 2).
        (("--topic", topic_name, "--describe", "--alter"), ("exactly one action",)),
        (("--topic", topic_name, "--alter"), ("At least one of --add-config",)),
        (("--topic", topic_name, "--describe", "--add-config", "retention.ms=1"), ("only be used with --alter",)),
        (("--describe",), ("give the entity",)),
        (("--entity-type", "topics", "--alter", "--add-config", "retention.ms=1"), ("An entity name must be specified",)),
    ]
    with ThreadPoolExecutor(len(cases)) as pool:
        results = list(pool.map(lambda case: configs(broker, *case[0]), cases))
    for (args, fragments), result in zip(cases, results, strict=True):
        line = failed(result, *fragments)
        assert result.returncode == (2 if line.startswith("pybroker configs: ") else 1), (args, line)
    assert kafka_overrides(broker, topic_name) == {}  # the failures changed nothing
