"""Every protocol spec matches Kafka's JSON message definition, kept in tests/data/kafka-messages
(DeleteRecords with KIP-1343's v3): field order, names, types, versions, defaults, tags."""

from __future__ import annotations

import json
import re

import pytest

from pybroker.protocol.api_keys import PRIVATE_API_KEY_START
from pybroker.protocol.schema import field
from pybroker.protocol.specs import REQUESTS, RESPONSES
from tests.tools import check_specs


def test_every_spec_matches_kafkas_definition(capsys):
    assert check_specs.main([]) == 0, capsys.readouterr().out
    kafkas = [key for key in [*REQUESTS, *RESPONSES] if key < PRIVATE_API_KEY_START]
    assert capsys.readouterr().out.strip() == f"{len(kafkas)} specs match Kafka's definitions"


def test_the_comparison_notices_a_difference(tmp_path, capsys):
    """A changed field in Kafka's definition is reported: the check can fail."""
    for path in check_specs.KEPT.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    produce = tmp_path / "ProduceRequest.json"
    produce.write_text(re.sub(r'"name": "Acks", "type": "int16"', '"name": "Acks", "type": "int32"', produce.read_text()))
    assert check_specs.main([str(tmp_path)]) == 1
    assert "ProduceRequest.acks: type int32 vs int16" in capsys.readouterr().out


def test_delete_records_v3_is_kip_1343():
    text = (check_specs.KEPT / "DeleteRecordsRequest.json").read_text()
    spec = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
    assert spec["validVersions"] == "0-3"
    assert spec["fields"][-1] == {
        "name": "LeaderOnly", "type": "bool", "versions": "3+", "default": "false",
        "about": spec["fields"][-1]["about"],
    }


def test_the_comparison_notices_a_map_key_difference(tmp_path, capsys):
    """Kafka's ``mapKey`` is compared too, both ways."""
    for path in check_specs.KEPT.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    topics = tmp_path / "CreateTopicsRequest.json"
    text = topics.read_text()
    assert text.count('"mapKey": true') == 3
    topics.write_text(text.replace('"mapKey": true', '"mapKey": false', 1))
    heartbeat = tmp_path / "HeartbeatRequest.json"
    text = heartbeat.read_text()
    heartbeat.write_text(text.replace('"name": "GroupId",', '"name": "GroupId", "mapKey": true,'))
    assert check_specs.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "CreateTopicsRequest.topics.name: mapKey False vs True" in out
    assert "HeartbeatRequest.group_id: mapKey True vs False" in out


def test_map_key_is_recorded_and_only_on_primitive_fields():
    assert field("Name", "string", "0+", map_key=True).map_key
    assert not field("Name", "string", "0+").map_key
    for bad in ("[]int32", "records"):
        with pytest.raises(ValueError, match="map key"):
            field("X", bad, "0+", map_key=True)
    with pytest.raises(ValueError, match="map key"):
        field("X", "Sub", "0+", map_key=True, fields=[field("Y", "int32")])


def test_a_common_struct_is_compared_wherever_it_is_used(tmp_path, capsys):
    """LeaderAndIsrPartitionState is one of Kafka's ``commonStructs``, used by the v0-1 ungrouped
    list and by each v2+ topic: a change in it is reported at both places."""
    for path in check_specs.KEPT.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    lisr = tmp_path / "LeaderAndIsrRequest.json"
    text = lisr.read_text()
    old = '{ "name": "PartitionEpoch", "type": "int32"'
    assert text.count(old) == 1
    lisr.write_text(text.replace(old, '{ "name": "PartitionEpoch", "type": "int64"'))
    assert check_specs.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == [
        "LeaderAndIsrRequest.topic_states.partition_states.partition_epoch: type int64 vs int32",
        "LeaderAndIsrRequest.ungrouped_partition_states.partition_epoch: type int64 vs int32",
    ]
