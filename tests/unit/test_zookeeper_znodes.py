"""Kafka's znode JSON: our encoders match hand-written Kafka znodes, and decode them back."""

import json
import uuid

import pytest

from pybroker.types import TopicPartition
from pybroker.zookeeper import znodes
from pybroker.zookeeper.znodes import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
)

TOPIC_ID = uuid.UUID("00000000-0000-0001-0000-000000000001")
TOPIC_ID_TEXT = "AAAAAAAAAAEAAAAAAAAAAQ"  # Kafka's Uuid(1, 1).toString()


def same_json(encoded: bytes, kafka_written: str) -> bool:
    """Equal as JSON (field order is free), and compact as Jackson writes it."""
    assert b": " not in encoded and b", " not in encoded, encoded
    return json.loads(encoded) == json.loads(kafka_written)


def test_broker_registration_v5():
    info = BrokerInfo(
        broker_id=1,
        endpoints=(EndPoint("host1", 9092, "PLAINTEXT", "PLAINTEXT"), EndPoint("host1", 9093, "REPLICATION", "SSL")),
        rack="dc1",
        timestamp_ms=2233345666,
    )
    kafka = ('{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPLICATION":"SSL"},'
             '"endpoints":["PLAINTEXT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1","jmx_port":-1,'
             '"host":"host1","timestamp":"2233345666","port":9092,"version":5}')
    assert same_json(znodes.encode_broker_info(info), kafka)
    assert znodes.decode_broker_info(1, kafka.encode()) == info
    assert info.path == "/brokers/ids/1"


def test_broker_registration_without_plaintext_or_rack_and_ipv6():
    info = BrokerInfo(2, (EndPoint("::1", 9094, "INTERNAL", "SASL_SSL"), EndPoint(None, 9095, "SSL", "SSL")))
    body = json.loads(znodes.encode_broker_info(info))
    assert body["host"] is None and body["port"] == -1 and "rack" not in body
    assert body["endpoints"] == ["INTERNAL://[::1]:9094", "SSL://:9095"]
    assert body["features"] == {} and body["jmx_port"] == -1 and body["timestamp"].isdigit()
    decoded = znodes.decode_broker_info(2, znodes.encode_broker_info(info))
    assert decoded.endpoints == info.endpoints


def test_broker_registration_old_versions():
    v1 = znodes.decode_broker_info(0, b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}')
    assert v1.endpoints == (EndPoint("localhost", 9092, "PLAINTEXT", "PLAINTEXT"),) and v1.jmx_port == 9999
    v2 = znodes.decode_broker_info(0, b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1",'
                                      b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}')
    assert [e.security_protocol for e in v2.endpoints] == ["PLAINTEXT", "SSL"]
    with pytest.raises(ValueError, match="No security protocol defined for listener CLIENT"):
        znodes.decode_broker_info(0, b'{"version":4,"jmx_port":-1,"endpoints":["CLIENT://h:1"],'
                                     b'"listener_security_protocol_map":{"OTHER":"SSL"}}')


def test_controller_epoch_and_cluster_id():
    assert znodes.encode_controller(3, 1700000000000) == b'{"version":1,"brokerid":3,"timestamp":"1700000000000"}'
    assert znodes.decode_controller(b'{"version":1,"brokerid":3,"timestamp":"1700000000000"}') == 3
    assert znodes.decode_controller(b'{"version":2,"brokerid":2,"timestamp":"1","kraftControllerEpoch":-1}') == 2
    assert znodes.encode_controller_epoch(5) == b"5" and znodes.decode_controller_epoch(b"17") == 17
    assert znodes.encode_cluster_id("Q6C1Ywm7Ti6Q0bKQzFx4yg") == b'{"version":"1","id":"Q6C1Ywm7Ti6Q0bKQzFx4yg"}'
    assert znodes.decode_cluster_id(b'{"version":"1","id":"Q6C1Ywm7Ti6Q0bKQzFx4yg"}') == "Q6C1Ywm7Ti6Q0bKQzFx4yg"


def test_topic_znode():
    assert znodes.uuid_to_base64(TOPIC_ID) == TOPIC_ID_TEXT and znodes.uuid_from_base64(TOPIC_ID_TEXT) == TOPIC_ID
    assignment = {1: ReplicaAssignment((2, 3)), 0: ReplicaAssignment((1, 2))}
    kafka = ('{"version":3,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},"removing_replicas":{},'
             f'"topic_id":"{TOPIC_ID_TEXT}"}}')
    assert same_json(znodes.encode_topic(TOPIC_ID, assignment), kafka)
    decoded = znodes.decode_topic("t", kafka.encode())
    assert decoded.topic == "t" and decoded.topic_id == TOPIC_ID and decoded.assignment == assignment

    v2 = znodes.decode_topic("t", b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}')
    assert v2.topic_id is None and v2.assignment == {0: ReplicaAssignment((1,))}
    assert znodes.decode_topic("t", b'{"version":1,"partitions":{"0":[0,1]}}').assignment == {0: ReplicaAssignment((0, 1))}
    assert "topic_id" not in json.loads(znodes.encode_topic(None, assignment))

    moving = {0: ReplicaAssignment((1, 2, 3), adding_replicas=(3,), removing_replicas=(1,)), 1: ReplicaAssignment((2,))}
    body = json.loads(znodes.encode_topic(TOPIC_ID, moving))
    assert body["adding_replicas"] == {"0": [3]} and body["removing_replicas"] == {"0": [1]}
    assert znodes.decode_topic("t", znodes.encode_topic(TOPIC_ID, moving)).assignment == moving


def test_topic_znode_with_kip_253_counts():
    assignment = {0: ReplicaAssignment((1,)), 1: ReplicaAssignment((2,)), 2: ReplicaAssignment((1,))}
    data = znodes.encode_topic(TOPIC_ID, assignment, 2, 3)
    body = json.loads(data)
    assert (body["version"], body["initial_partition_count"], body["undeleted_partition_count"]) == (3, 2, 3)
    decoded = znodes.decode_topic("t", data)
    assert (decoded.initial_partition_count, decoded.undeleted_partition_count) == (2, 3)
    assert decoded.assignment == assignment
    # A znode Kafka wrote has neither count.
    kafka = znodes.decode_topic("t", znodes.encode_topic(TOPIC_ID, assignment))
    assert (kafka.initial_partition_count, kafka.undeleted_partition_count) == (None, None)


def test_partition_znode_with_kip_253_epochs():
    data = znodes.encode_partition_epochs({1: 4, 0: 3}, {})
    assert json.loads(data) == {"version": 1, "leaderEpochAfterCreation": {"0": 3, "1": 4}}
    assert znodes.decode_partition_epochs(data) == ({0: 3, 1: 4}, {})
    both = znodes.encode_partition_epochs({0: 1}, {0: 5, 1: 2})
    assert json.loads(both) == {"version": 1, "leaderEpochAfterCreation": {"0": 1},
                                "leaderEpochBeforeDeletion": {"0": 5, "1": 2}}
    assert znodes.decode_partition_epochs(both) == ({0: 1}, {0: 5, 1: 2})
    assert znodes.decode_partition_epochs(b"") == ({}, {})  # Kafka's partition znode has no data


def test_partition_state():
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), controller_epoch=1)
    kafka = '{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    assert same_json(znodes.encode_partition_state(state), kafka)
    decoded = znodes.decode_partition_state(kafka.encode(), zk_version=7)
    assert decoded.leader_and_isr == LeaderAndIsr(1, 0, (1, 2), partition_epoch=7) and decoded.controller_epoch == 1

    recovering = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 4, (2,), znodes.LEADER_RECOVERY_RECOVERING), 3)
    body = json.loads(znodes.encode_partition_state(recovering))
    assert body["leader_recovery_state"] == 1
    assert znodes.decode_partition_state(znodes.encode_partition_state(recovering), 0) == recovering
    tp = TopicPartition("t", 4)
    assert znodes.topic_partition_state_path(tp) == "/brokers/topics/t/partitions/4/state"


def test_configs_and_change_notifications():
    assert same_json(znodes.encode_entity_config({"retention.ms": "1000"}), '{"version":1,"config":{"retention.ms":"1000"}}')
    assert znodes.decode_entity_config(b'{"version":1,"config":{"cleanup.policy":"compact"}}') == {"cleanup.policy": "compact"}
    assert znodes.decode_entity_config(b"") == {}
    assert znodes.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert znodes.decode_config_change(b'{"version":2,"entity_path":"topics/t"}') == "topics/t"
    assert znodes.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"
    assert znodes.config_entity_path("topics", "t") == "/config/topics/t"


def test_producer_id_block():
    block = ProducerIdsBlock(assigned_broker_id=1, first_producer_id=1000)
    assert block.last_producer_id == 1999 and block.next_block_first_id == 2000
    kafka = '{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}'
    assert same_json(znodes.encode_producer_id_block(block), kafka)
    assert znodes.decode_producer_id_block(kafka.encode()) == block


def test_persistent_paths_are_kafkas():
    assert znodes.PERSISTENT_ZK_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
        "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
    )
