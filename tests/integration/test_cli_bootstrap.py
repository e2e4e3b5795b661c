"""``--bootstrap-server`` as Kafka's tools read it, in every ``pybroker`` command that takes it:
``host:port``, a listener-style ``SCHEME://host:port`` (any scheme), ``[ipv6]:port``, an empty
host (the loopback address), unresolvable hosts skipped; and Kafka's messages for what Kafka
refuses ("Invalid url", "Invalid port", "No resolvable bootstrap urls given in
bootstrap.servers").

`FORMS` is checked twice: against pybroker's commands, and against Kafka 3.9.2's own
TopicCommand (its jars, ``bench/apache_kafka.py``) on the same broker, so the table is Kafka's
behaviour rather than a guess.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.apache_kafka import ZOOKEEPER_VERSION, run_kafka_tool
from bench.brokers import free_port
from tests.conftest import REPO, BrokerProcess, require_kafka
from tests.integration.test_cli import failed, ok, pybroker

NO_HOST = "nosuchhost.invalid"  # RFC 2606: never resolves
# (--bootstrap-server with {host} and {port} the broker's, Kafka's ConfigException message or None
# when the tool connects and works).
FORMS = [
    ("{host}:{port}", None),
    ("PLAINTEXT://{host}:{port}", None),
    ("SASL_SSL://{host}:{port}", None),  # the scheme is not the connection's security protocol
    ("BOGUS://{host}:{port}", None),  # nor is it checked
    (":{port}", None),  # an empty host is the loopback address
    (f"{NO_HOST}:{{port}}, PLAINTEXT://{{host}}:{{port}}", None),  # an unresolvable entry is skipped
    ("{host}:{port},", None),  # blank entries are skipped
    ("{host}", "Invalid url in bootstrap.servers: {host}"),
    ("{host}:{port}, {host}:kafka", "Invalid url in bootstrap.servers: {host}:kafka"),
    ("PLAINTEXT://{host}", "Invalid url in bootstrap.servers: PLAINTEXT://{host}"),
    ("{host}:99999", "Invalid port in bootstrap.servers: {host}:99999"),
    (f"{NO_HOST}:{{port}}", "No resolvable bootstrap urls given in bootstrap.servers"),
    (" , ", "No resolvable bootstrap urls given in bootstrap.servers"),
]


def form(text: str, broker: BrokerProcess) -> str:
    return text.format(host="127.0.0.1", port=broker.port)


def test_topics_reads_bootstrap_servers_as_kafka(broker: BrokerProcess, topic_name: str) -> None:
    ok(pybroker("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic_name))

    def listed(text: str) -> subprocess.CompletedProcess[str]:
        return pybroker("topics", "--bootstrap-server", form(text, broker), "--list")

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(listed, [text for text, _ in FORMS]))
    for (text, message), result in zip(FORMS, results, strict=True):
        if message is None:
            assert topic_name in ok(result).split("\n"), (text, result.stderr)
        else:
            assert result.returncode == 1 and result.stdout == "", (text, result.stdout)
            assert result.stderr.splitlines()[-1] == "Error: " + form(message, broker), (text, result.stderr)
    skipped = results[FORMS.index((f"{NO_HOST}:{{port}}, PLAINTEXT://{{host}}:{{port}}", None))]
    assert skipped.stderr == (f"Couldn't resolve server {NO_HOST}:{broker.port} from bootstrap.servers as DNS "
                              f"resolution failed for {NO_HOST}\n")


def test_every_command_takes_a_listener_style_address(broker: BrokerProcess, topic_name: str) -> None:
    """The admin commands and the console clients (pybroker's producer and consumer), directly and
    through Kafka's script names."""
    server = f"PLAINTEXT://{broker.bootstrap}"
    assert ok(pybroker("topics", "--bootstrap-server", server, "--create", "--topic", topic_name)) == \
        f"Created topic {topic_name}.\n"
    produced = subprocess.run([sys.executable, "-m", "pybroker", "console-producer", "--bootstrap-server", server,
                               "--topic", topic_name], input="v1\nv2\n", cwd=REPO, capture_output=True, text=True,
                              timeout=60)
    ok(produced)
    consumed = pybroker("console-consumer", "--bootstrap-server", server, "--topic", topic_name, "--from-beginning",
                        "--max-messages", "2", "--timeout-ms", "20000", "--group", f"{topic_name}-g")
    assert (consumed.returncode, consumed.stdout) == (0, "v1\nv2\n"), consumed.stderr
    assert f"{topic_name}-g" in ok(pybroker("consumer-groups", "--bootstrap-server", server, "--list")).split("\n")
    assert ok(pybroker("configs", "--bootstrap-server", server, "--describe", "--entity-type", "topics",
                       "--entity-name", topic_name)) == f"Dynamic configs for topic {topic_name} are:\n"
    assert ok(pybroker("leader-election", "--bootstrap-server", server, "--election-type", "preferred", "--topic",
                       topic_name, "--partition", "0")) == f"Valid replica already elected for partitions {topic_name}-0\n"
    assert topic_name in ok(pybroker("kafka-topics.sh", "--bootstrap-server", f"SASL_SSL://{broker.bootstrap}",
                                     "--list")).split("\n")
    bad = pybroker("kafka-configs.sh", "--bootstrap-server", "127.0.0.1", "--describe", "--entity-type", "brokers")
    failed(bad, "Invalid url in bootstrap.servers: 127.0.0.1")


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


def test_ipv6_addresses(tmp_path: Path) -> None:
    """``[::1]:port`` (with or without a scheme) and ``::1:port`` reach a broker listening on ::1."""
    if not _ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback address")
    port = free_port()
    v6 = BrokerProcess(tmp_path / "data", port, **{
        "listeners": f"PLAINTEXT://127.0.0.1:{port},IPV6://[::1]:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,IPV6:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
    })
    v6.start()
    try:
        ok(pybroker("topics", "--bootstrap-server", f"[::1]:{port}", "--create", "--topic", "over-ipv6"))
        for server in (f"[::1]:{port}", f"PLAINTEXT://[::1]:{port}", f"::1:{port}"):
            assert ok(pybroker("topics", "--bootstrap-server", server, "--list")) == "over-ipv6\n", server
    finally:
        assert v6.stop() == 0, v6.log()
        v6.kill()


@pytest.mark.timeout(300)  # a JVM per form
def test_forms_are_what_kafkas_topic_command_does(broker: BrokerProcess, topic_name: str) -> None:
    """Kafka 3.9.2's TopicCommand given each of `FORMS` on the same broker: it lists the topics,
    or fails with that ConfigException."""
    require_kafka(ZOOKEEPER_VERSION)
    ok(pybroker("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic_name))
    for text, message in FORMS:
        result = run_kafka_tool(ZOOKEEPER_VERSION, "org.apache.kafka.tools.TopicCommand",
                                ["--bootstrap-server", form(text, broker), "--list"], timeout=120)
        if message is None:
            assert result.returncode == 0, (text, result.stdout, result.stderr)
            assert topic_name in result.stdout.split("\n"), (text, result.stdout)
        else:
            assert result.returncode == 1, (text, result.stdout, result.stderr)
            assert f"ConfigException: {form(message, broker)}\n" in result.stderr, (text, result.stderr)
