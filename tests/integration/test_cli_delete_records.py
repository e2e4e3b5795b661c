"""``pybroker delete-records`` (like kafka-delete-records.sh, with KIP-1343's ``--leader-only``).

Requests the CLI sends are watched through the test proxy of test_admin_delete_records, which can
also play a broker without DeleteRecords v3.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pybroker.cli.command_config import client_settings, parse_properties
from pybroker.protocol.api_keys import ApiKey
from pybroker.types import TopicPartition
from tests.integration.test_admin_delete_records import (
    create_topic,
    earliest,
    produce,
    proxy_in_thread,
    run,
)
from tests.integration.test_cli import failed, ok, pybroker

HEADER = ["Executing records delete operation", "Records delete operation completed:"]
OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE: The requested offset is not within the range of offsets maintained by the server."
UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition."


def offset_file(tmp_path: Path, partitions: list[tuple[str, int, int]], name: str = "offsets.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "offset": o} for t, p, o in partitions
    ]}))
    return str(path)


def delete_records(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return pybroker("delete-records", "--bootstrap-server", bootstrap, *args)


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stdout.splitlines()


def test_deletes_and_prints_each_partition(broker, topic_name, tmp_path):
    run(lambda: create_topic(broker.bootstrap, topic_name, partitions=2))
    produce(broker.bootstrap, topic_name, 5, partition=0)
    produce(broker.bootstrap, topic_name, 3, partition=1)
    path = offset_file(tmp_path, [(topic_name, 0, 2), (topic_name, 1, -1)])
    result = delete_records(broker.bootstrap, "--offset-json-file", path)
    assert ok(result).splitlines() == HEADER + [
        f"partition: {topic_name}-0\tlow_watermark: 2\tleader_log_start_offset: 2",
        f"partition: {topic_name}-1\tlow_watermark: 3\tleader_log_start_offset: 3",
    ]
    assert result.stderr == ""
    assert run(lambda: earliest(broker.bootstrap, TopicPartition(topic_name, 0))) == 2
    assert run(lambda: earliest(broker.bootstrap, TopicPartition(topic_name, 1))) == 3


def test_failed_partitions_print_their_error_and_exit_non_zero(broker, topic_name, tmp_path):
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 3)
    path = offset_file(tmp_path, [(topic_name, 0, 1), (topic_name + "-missing", 0, 0), (topic_name, 5, 0)])
    result = delete_records(broker.bootstrap, "--offset-json-file", path)
    assert result.returncode == 1, result.stderr
    assert lines(result) == HEADER + [
        f"partition: {topic_name}-0\tlow_watermark: 1\tleader_log_start_offset: 1",
        f"partition: {topic_name}-missing-0\terror: {UNKNOWN}",
        f"partition: {topic_name}-5\terror: UNKNOWN_TOPIC_OR_PARTITION: topic {topic_name} has no partition 5",
    ]
    past_hw = delete_records(broker.bootstrap, "--offset-json-file", offset_file(tmp_path, [(topic_name, 0, 4)], "past.json"))
    assert past_hw.returncode == 1
    assert lines(past_hw) == HEADER + [f"partition: {topic_name}-0\terror: {OUT_OF_RANGE}"]
    assert run(lambda: earliest(broker.bootstrap, TopicPartition(topic_name, 0))) == 1


def test_duplicate_partitions_are_refused_before_anything_is_sent(broker, topic_name, tmp_path):
    run(lambda: create_topic(broker.bootstrap, topic_name, partitions=2))
    produce(broker.bootstrap, topic_name, 3)
    path = offset_file(tmp_path, [(topic_name, 0, 1), (topic_name, 1, 0), (topic_name, 0, 2), (topic_name, 1, 0)])
    with proxy_in_thread(broker.bootstrap) as proxy:
        line = failed(delete_records(proxy.bootstrap, "--offset-json-file", path))
        assert proxy.requests == []  # not even a connection's ApiVersions
    assert line == f"Error: Offset json file contains duplicate topic partitions: {topic_name}-0,{topic_name}-1"
    assert run(lambda: earliest(broker.bootstrap, TopicPartition(topic_name, 0))) == 0


def test_bad_offset_files_give_one_error_line(broker, tmp_path):
    files = {
        "not json": ('{"version": 1, "partitions": [', "is not valid JSON"),
        "a list": ('[{"topic": "t", "partition": 0, "offset": 1}]', "expected a JSON object"),
        "version 2": ('{"version": 2, "partitions": []}', "Not supported version field value 2"),
        "no partitions": ('{"version": 1}', "Missing partitions field"),
        "no offset": ('{"partitions": [{"topic": "t", "partition": 0}]}', 'partitions[0]: missing "offset"'),
        "text partition": ('{"partitions": [{"topic": "t", "partition": "0", "offset": 1}]}', '"partition" must be an integer'),
        "float offset": ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1.5}]}', '"offset" must be a 64-bit integer'),
        "numeric topic": ('{"partitions": [{"topic": 7, "partition": 0, "offset": 1}]}', '"topic" must be a string'),
    }
    paths = {}
    for name, (text, _) in files.items():
        paths[name] = tmp_path / (name.replace(" ", "-") + ".json")
        paths[name].write_text(text)
    missing = str(tmp_path / "missing.json")
    cases = [(str(paths[name]), (fragment, str(paths[name]))) for name, (_, fragment) in files.items()]
    cases.append((missing, ("cannot read offset json file", missing)))
    with ThreadPoolExecutor(len(cases)) as pool:
        results = list(pool.map(lambda case: delete_records(broker.bootstrap, "--offset-json-file", case[0]), cases))
    for (_, fragments), result in zip(cases, results, strict=True):
        assert failed(result, *fragments).startswith("Error: ")


def test_an_empty_partition_list_deletes_nothing(broker, tmp_path):
    assert ok(delete_records(broker.bootstrap, "--offset-json-file", offset_file(tmp_path, []))).splitlines() == HEADER


def test_leader_only_is_sent_as_v3(broker, topic_name, tmp_path):
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 4)
    with proxy_in_thread(broker.bootstrap) as proxy:
        first = delete_records(proxy.bootstrap, "--offset-json-file", offset_file(tmp_path, [(topic_name, 0, 2)]), "--leader-only")
        second = delete_records(proxy.bootstrap, "--offset-json-file", offset_file(tmp_path, [(topic_name, 0, 3)], "b.json"),
                                "--timeout-ms", "5000")
        sent = [(r.api_version, r.decode()) for r in proxy.seen(ApiKey.DELETE_RECORDS)]
    assert ok(first).splitlines()[2:] == [f"partition: {topic_name}-0\tlow_watermark: 2\tleader_log_start_offset: 2"]
    assert ok(second).splitlines()[2:] == [f"partition: {topic_name}-0\tlow_watermark: 3\tleader_log_start_offset: 3"]
    assert [(v, r.leader_only) for v, r in sent] == [(3, True), (3, False)]
    assert 0 < sent[1][1].timeout_ms <= 5000


def test_against_a_broker_without_v3(broker, topic_name, tmp_path):
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 4)
    path = offset_file(tmp_path, [(topic_name, 0, 2)])
    with proxy_in_thread(broker.bootstrap, delete_records_max_version=2) as proxy:
        refused = delete_records(proxy.bootstrap, "--offset-json-file", path, "--leader-only")
        assert proxy.seen(ApiKey.DELETE_RECORDS) == []
        downgraded = delete_records(proxy.bootstrap, "--offset-json-file", path)
        assert [r.api_version for r in proxy.seen(ApiKey.DELETE_RECORDS)] == [2]
    assert refused.returncode == 1, refused.stderr
    (line,) = lines(refused)[2:]
    assert line.startswith(f"partition: {topic_name}-0\terror: UNSUPPORTED_VERSION: leader_only needs DeleteRecords v3"), line
    assert ok(downgraded).splitlines()[2:] == [f"partition: {topic_name}-0\tlow_watermark: 2\tleader_log_start_offset: -1"]


def test_command_config_applies_client_settings_and_warns_about_security(broker, topic_name, tmp_path):
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 2)
    config = tmp_path / "admin.properties"
    config.write_text("# admin client settings\nclient.id = ops-tool\nrequest.timeout.ms: 5000\nretries=3\n"
                      "security.protocol=PLAINTEXT\nssl.cipher.suites=TLS_AES_128_GCM_SHA256\nmystery.setting=1\n")
    path = offset_file(tmp_path, [(topic_name, 0, 1)])
    with proxy_in_thread(broker.bootstrap) as proxy:
        result = delete_records(proxy.bootstrap, "--offset-json-file", path, "--command-config", str(config))
        client_ids = {r.client_id for r in proxy.requests}
    assert ok(result).splitlines()[2:] == [f"partition: {topic_name}-0\tlow_watermark: 1\tleader_log_start_offset: 1"]
    assert client_ids == {"ops-tool"}
    warnings = result.stderr.splitlines()
    assert warnings == [
        f"Warning: --command-config {config}: security settings pybroker's clients do not support were ignored: "
        "ssl.cipher.suites",
        f"Warning: --command-config {config}: unknown client settings were ignored: mystery.setting",
    ]
    bad = tmp_path / "bad.properties"
    bad.write_text("request.timeout.ms=soon\n")
    failed(delete_records(broker.bootstrap, "--offset-json-file", path, "--command-config", str(bad)),
           "request.timeout.ms", "expected an integer")
    failed(delete_records(broker.bootstrap, "--offset-json-file", path, "--command-config", str(tmp_path / "none")),
           "cannot read --command-config file")


def test_properties_format():
    text = "a=1\n  b : two words \n! comment\n# comment\nc three\nd=x\\\n   y\ne=tab\\tend\nf\n"
    assert parse_properties(text) == {"a": "1", "b": "two words ", "c": "three", "d": "xy", "e": "tab\tend", "f": ""}
    settings = client_settings({"client.id": "x", "default.api.timeout.ms": "7000", "security.protocol": "plaintext",
                                "bootstrap.servers": "elsewhere:1"})
    assert (settings.client_id, settings.request_timeout_ms, settings.default_api_timeout_ms) == ("x", None, 7000)
    assert settings.warnings == []


def test_unreachable_broker_and_usage_errors(tmp_path):
    path = offset_file(tmp_path, [("t", 0, 1)])
    line = failed(delete_records("127.0.0.1:1", "--offset-json-file", path), "127.0.0.1:1")
    assert line.startswith("Error: ")
    usage = pybroker("delete-records", "--bootstrap-server", "127.0.0.1:1")
    assert usage.returncode == 2 and "--offset-json-file" in usage.stderr
    negative = delete_records("127.0.0.1:1", "--offset-json-file", path, "--timeout-ms", "-1")
    assert negative.returncode == 2 and "--timeout-ms" in negative.stderr
