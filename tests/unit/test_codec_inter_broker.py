"""The inter-broker APIs of Kafka's ZooKeeper mode and ElectLeaders on the wire.

LeaderAndIsr v4-5, StopReplica v3, UpdateMetadata v6-7, ControlledShutdown v3, ElectLeaders v0-2
and AlterPartition v0-1: realistic messages round-trip (encode, decode, same message, same bytes
again) at every supported version, and for each API at least one small request and response is
checked against bytes written out by hand from Kafka's layout (header versions, compact or classic
lengths, tagged sections). Also: the fields a replica fetcher needs in Fetch v12,
OffsetForLeaderEpoch and ListOffsets.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.codec import EncodeError
from pybroker.protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from pybroker.protocol.specs import REQUESTS, RESPONSES

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
ELECT_LEADERS, ALTER_PARTITION = 43, 56
TOPIC_ID = uuid.UUID(int=1)


def h(text: str) -> bytes:
    """Hex with spaces and ``#`` comments allowed."""
    clean = "".join(line.split("#", 1)[0] for line in text.splitlines())
    return bytes.fromhex(clean)


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def check_request(key: int, version: int, obj: object, expected: bytes) -> None:
    """``obj`` encodes (correlation id 7, client id "cli") to exactly ``expected`` and back."""
    frame = codec.encode_request(key, version, 7, "cli", obj)
    assert bytes(frame) == framed(expected)
    view = memoryview(bytearray(expected))
    header, offset = codec.decode_request_header(view)
    assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 7)
    assert header.client_id == "cli"
    assert codec.decode_request(key, version, view, offset) == obj


def check_response(key: int, version: int, obj: object, expected: bytes) -> None:
    """``obj`` encodes (correlation id 7) to exactly ``expected`` and back."""
    frame = codec.encode_response(key, version, 7, obj)
    assert bytes(frame) == framed(expected)
    corr, back = codec.decode_response(key, version, memoryview(expected))
    assert corr == 7
    assert back == obj


def roundtrip_request(key: int, version: int, obj: Any) -> Any:
    frame = codec.encode_request(key, version, 99, "broker-1", obj)
    view = memoryview(bytearray(frame))[4:]
    header, offset = codec.decode_request_header(view)
    assert offset > 0 and header.client_id == "broker-1"
    back = codec.decode_request(key, version, view, offset)
    assert codec.encode_request(key, version, 99, "broker-1", back) == frame
    return back


def roundtrip_response(key: int, version: int, obj: Any) -> Any:
    frame = codec.encode_response(key, version, 99, obj)
    corr, back = codec.decode_response(key, version, memoryview(frame)[4:])
    assert corr == 99
    assert codec.encode_response(key, version, 99, back) == frame
    return back


# ---- realistic messages, one builder per message and version ---------------------------------


def leader_and_isr_request(version: int) -> Any:
    R = LeaderAndIsrRequest
    states = [
        R.LeaderAndIsrPartitionState(
            partition_index=p, controller_epoch=3, leader=1 + p % 3, leader_epoch=7 + p,
            isr=[1, 2, 3], partition_epoch=12, replicas=[1, 2, 3], adding_replicas=[4] if p else [],
            removing_replicas=[3] if p else [], is_new=p == 2,
        )
        for p in range(3)
    ]
    return R(
        controller_id=1, controller_epoch=3, broker_epoch=4242, type=2 if version >= 5 else 0,
        topic_states=[R.LeaderAndIsrTopicState(
            topic_name="orders", topic_id=TOPIC_ID if version >= 5 else uuid.UUID(int=0),
            partition_states=states)],
        live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=b, host_name=f"broker-{b}", port=9092)
                      for b in (1, 2, 3)],
    )


def leader_and_isr_response(version: int) -> Any:
    R = LeaderAndIsrResponse
    if version < 5:
        return R(error_code=0, partition_errors=[
            R.LeaderAndIsrPartitionError(topic_name="orders", partition_index=p,
                                         error_code=ErrorCode.KAFKA_STORAGE_ERROR if p else 0)
            for p in range(3)])
    return R(error_code=0, topics=[R.LeaderAndIsrTopicError(topic_id=TOPIC_ID, partition_errors=[
        R.LeaderAndIsrPartitionError(partition_index=p, error_code=0) for p in range(3)])])


def stop_replica_request(version: int) -> Any:
    R = StopReplicaRequest
    return R(controller_id=1, controller_epoch=3, broker_epoch=4242, topic_states=[
        R.StopReplicaTopicState(topic_name="orders", partition_states=[
            R.StopReplicaPartitionState(partition_index=p, leader_epoch=7, delete_partition=p == 0)
            for p in range(2)]),
        R.StopReplicaTopicState(topic_name="deleted", partition_states=[
            R.StopReplicaPartitionState(partition_index=0, leader_epoch=-2,  # deleting
                                        delete_partition=True)]),
    ])


def stop_replica_response(version: int) -> Any:
    R = StopReplicaResponse
    return R(error_code=0, partition_errors=[
        R.StopReplicaPartitionError(topic_name="orders", partition_index=0, error_code=0),
        R.StopReplicaPartitionError(topic_name="orders", partition_index=1,
                                    error_code=ErrorCode.FENCED_LEADER_EPOCH),
    ])


def update_metadata_request(version: int) -> Any:
    R = UpdateMetadataRequest
    return R(
        controller_id=1, controller_epoch=3, broker_epoch=4242,
        topic_states=[R.UpdateMetadataTopicState(
            topic_name="orders", topic_id=TOPIC_ID if version >= 7 else uuid.UUID(int=0),
            partition_states=[R.UpdateMetadataPartitionState(
                partition_index=p, controller_epoch=3, leader=1 + p, leader_epoch=7, isr=[1, 2],
                zk_version=12, replicas=[1, 2, 3], offline_replicas=[3]) for p in range(2)])],
        live_brokers=[
            R.UpdateMetadataBroker(id=1, rack="rack-a", endpoints=[
                R.UpdateMetadataEndpoint(port=9092, host="broker-1", listener="PLAINTEXT",
                                         security_protocol=0),
                R.UpdateMetadataEndpoint(port=9093, host="broker-1", listener="REPLICATION",
                                         security_protocol=1),
            ]),
            R.UpdateMetadataBroker(id=2, rack=None, endpoints=[
                R.UpdateMetadataEndpoint(port=9092, host="broker-2", listener="PLAINTEXT")]),
        ],
    )


def update_metadata_response(version: int) -> Any:
    return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)


def controlled_shutdown_request(version: int) -> Any:
    return ControlledShutdownRequest(broker_id=2, broker_epoch=4242)


def controlled_shutdown_response(version: int) -> Any:
    R = ControlledShutdownResponse
    return R(error_code=0, remaining_partitions=[
        R.RemainingPartition(topic_name="orders", partition_index=p) for p in (0, 4)])


def elect_leaders_request(version: int) -> Any:
    R = ElectLeadersRequest
    return R(election_type=1 if version >= 1 else 0, timeout_ms=30000, topic_partitions=[
        R.TopicPartitions(topic="orders", partitions=[0, 1, 2]),
        R.TopicPartitions(topic="audit", partitions=[5]),
    ])


def elect_leaders_response(version: int) -> Any:
    R = ElectLeadersResponse
    return R(throttle_time_ms=0, error_code=0, replica_election_results=[
        R.ReplicaElectionResult(topic="orders", partition_result=[
            R.PartitionResult(partition_id=0, error_code=0, error_message=None),
            R.PartitionResult(partition_id=1, error_code=ErrorCode.ELECTION_NOT_NEEDED,
                              error_message="Leader election not needed for topic partition."),
        ]),
    ])


def alter_partition_request(version: int) -> Any:
    R = AlterPartitionRequest
    return R(broker_id=1, broker_epoch=4242, topics=[R.TopicData(topic_name="orders", partitions=[
        R.PartitionData(partition_index=0, leader_epoch=7, new_isr=[1, 2], partition_epoch=12),
        R.PartitionData(partition_index=1, leader_epoch=8, new_isr=[1],
                        leader_recovery_state=1 if version >= 1 else 0, partition_epoch=3),
    ])])


def alter_partition_response(version: int) -> Any:
    R = AlterPartitionResponse
    return R(throttle_time_ms=0, error_code=0, topics=[R.TopicData(topic_name="orders", partitions=[
        R.PartitionData(partition_index=0, error_code=0, leader_id=1, leader_epoch=7, isr=[1, 2],
                        partition_epoch=13),
        R.PartitionData(partition_index=1, error_code=ErrorCode.INVALID_UPDATE_VERSION,
                        leader_id=1, leader_epoch=8, isr=[1, 2, 3], partition_epoch=3),
    ])])


BUILDERS: dict[int, tuple[Callable[[int], Any], Callable[[int], Any]]] = {
    LEADER_AND_ISR: (leader_and_isr_request, leader_and_isr_response),
    STOP_REPLICA: (stop_replica_request, stop_replica_response),
    UPDATE_METADATA: (update_metadata_request, update_metadata_response),
    CONTROLLED_SHUTDOWN: (controlled_shutdown_request, controlled_shutdown_response),
    ELECT_LEADERS: (elect_leaders_request, elect_leaders_response),
    ALTER_PARTITION: (alter_partition_request, alter_partition_response),
}

CASES = [(key, v) for key in BUILDERS for v in REQUESTS[key].versions()]


def case_id(case: tuple[int, int]) -> str:
    key, version = case
    return f"{REQUESTS[key].name.removesuffix('Request')}-v{version}"


def test_supported_versions() -> None:
    assert {key: codec.supported_versions(key) for key in BUILDERS} == {
        LEADER_AND_ISR: (4, 5), STOP_REPLICA: (3, 3), UPDATE_METADATA: (6, 7),
        CONTROLLED_SHUTDOWN: (3, 3), ELECT_LEADERS: (0, 2), ALTER_PARTITION: (0, 1),
    }
    flexible = {key: [v for v in REQUESTS[key].versions() if codec.is_flexible(key, v)]
                for key in BUILDERS}
    assert flexible == {
        LEADER_AND_ISR: [4, 5], STOP_REPLICA: [3], UPDATE_METADATA: [6, 7],
        CONTROLLED_SHUTDOWN: [3], ELECT_LEADERS: [2], ALTER_PARTITION: [0, 1],
    }
    for key in BUILDERS:
        assert RESPONSES[key].valid_versions == REQUESTS[key].valid_versions


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_request_roundtrip(case: tuple[int, int]) -> None:
    key, version = case
    obj = BUILDERS[key][0](version)
    assert roundtrip_request(key, version, obj) == obj


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_response_roundtrip(case: tuple[int, int]) -> None:
    key, version = case
    obj = BUILDERS[key][1](version)
    assert roundtrip_response(key, version, obj) == obj


# ---- hand-written bytes ------------------------------------------------------------------------


def test_controlled_shutdown_v3_request() -> None:
    expected = h("""
        0007 0003 00000007 # ControlledShutdown v3 (flexible: header v2), correlation id 7
        0003 636c69 00     # client_id "cli" (int16 length in every header), header tags none
        00000002           # broker_id 2
        000000000000002a   # broker_epoch 42
        00                 # tagged fields: none
    """)
    check_request(CONTROLLED_SHUTDOWN, 3, ControlledShutdownRequest(broker_id=2, broker_epoch=42),
                  expected)


def test_controlled_shutdown_v3_response() -> None:
    expected = h("""
        00000007 00        # correlation id, header v1 tags none
        0000               # error_code 0
        03                 # remaining_partitions: compact 2+1
          02 74 00000000 00 #   "t" partition 0, element tags
          02 74 00000003 00 #   "t" partition 3
        00                 # tagged fields
    """)
    R = ControlledShutdownResponse
    resp = R(remaining_partitions=[R.RemainingPartition(topic_name="t", partition_index=0),
                                   R.RemainingPartition(topic_name="t", partition_index=3)])
    check_response(CONTROLLED_SHUTDOWN, 3, resp, expected)


def test_alter_partition_v0_request() -> None:
    expected = h("""
        0038 0000 00000007 # AlterPartition v0 (flexible from v0: header v2)
        0003 636c69 00     # client_id "cli", header tags
        00000001           # broker_id 1
        0000000000000005   # broker_epoch 5
        02                 # topics: compact 1
          02 74            #   topic_name "t" (v0-1)
          02               #   partitions: 1
            00000000       #     partition_index 0
            00000003       #     leader_epoch 3
            03 00000001 00000002 # new_isr [1, 2]
            00000007       #     partition_epoch 7 (no leader_recovery_state before v1)
            00             #     partition tags
          00               #   topic tags
        00                 # tagged fields
    """)
    R = AlterPartitionRequest
    req = R(broker_id=1, broker_epoch=5, topics=[R.TopicData(topic_name="t", partitions=[
        R.PartitionData(partition_index=0, leader_epoch=3, new_isr=[1, 2], partition_epoch=7)])])
    check_request(ALTER_PARTITION, 0, req, expected)


def test_alter_partition_v1_response() -> None:
    expected = h("""
        00000007 00        # correlation id, header tags
        00000000 0000      # throttle_time_ms 0, error_code 0
        02                 # topics: 1
          02 74            #   topic_name "t"
          02               #   partitions: 1
            00000000 0000  #     partition_index 0, error_code 0
            00000001 00000004 # leader_id 1, leader_epoch 4
            03 00000001 00000002 # isr [1, 2]
            01             #     leader_recovery_state 1 (v1+)
            00000008       #     partition_epoch 8
            00 00          #     partition tags, topic tags
        00                 # tagged fields
    """)
    R = AlterPartitionResponse
    resp = R(topics=[R.TopicData(topic_name="t", partitions=[R.PartitionData(
        partition_index=0, leader_id=1, leader_epoch=4, isr=[1, 2], leader_recovery_state=1,
        partition_epoch=8)])])
    check_response(ALTER_PARTITION, 1, resp, expected)


def test_leader_and_isr_v5_request() -> None:
    expected = h("""
        0004 0005 00000007 0003 636c69 00 # LeaderAndIsr v5, header v2
        00000001           # controller_id 1 (no is_k_raft_controller before v7)
        00000002           # controller_epoch 2
        0000000000000003   # broker_epoch 3
        02                 # type 2 (full, v5+)
        02                 # topic_states: 1 (no ungrouped_partition_states after v1)
          02 74            #   topic_name "t"
          00000000000000000000000000000001 # topic_id (v5+)
          02               #   partition_states: 1
            00000000 00000002 # partition_index 0 (no topic_name after v1), controller_epoch 2
            00000001 00000004 # leader 1, leader_epoch 4
            02 00000001    #     isr [1]
            00000005       #     partition_epoch 5
            03 00000001 00000002 # replicas [1, 2]
            01 01          #     adding_replicas [], removing_replicas []
            01             #     is_new true (no leader_recovery_state before v6)
            00             #     partition tags
          00               #   topic tags
        02                 # live_leaders: 1
          00000001 02 68 00002384 00 # broker 1, host "h", port 9092, tags
        00                 # tagged fields
    """)
    R = LeaderAndIsrRequest
    req = R(controller_id=1, controller_epoch=2, broker_epoch=3, type=2, topic_states=[
        R.LeaderAndIsrTopicState(topic_name="t", topic_id=TOPIC_ID, partition_states=[
            R.LeaderAndIsrPartitionState(partition_index=0, controller_epoch=2, leader=1,
                                         leader_epoch=4, isr=[1], partition_epoch=5,
                                         replicas=[1, 2], is_new=True)])],
        live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092)])
    check_request(LEADER_AND_ISR, 5, req, expected)


def test_leader_and_isr_responses_v4_by_name_v5_by_topic_id() -> None:
    R = LeaderAndIsrResponse
    v4 = h("""
        00000007 00        # correlation id, header tags
        0000               # error_code
        02                 # partition_errors: 1 (v0-4)
          02 74 00000000 0038 00 # "t", partition 0, KAFKA_STORAGE_ERROR (56), tags
        00                 # tagged fields
    """)
    check_response(LEADER_AND_ISR, 4, R(partition_errors=[R.LeaderAndIsrPartitionError(
        topic_name="t", partition_index=0, error_code=ErrorCode.KAFKA_STORAGE_ERROR)]), v4)
    v5 = h("""
        00000007 00 0000   # correlation id, header tags, error_code
        02                 # topics: 1 (v5+)
          00000000000000000000000000000001 # topic_id
          02 00000000 0000 00 # partition_errors: 1, partition 0, no error, tags
          00               #   topic tags
        00                 # tagged fields
    """)
    check_response(LEADER_AND_ISR, 5, R(topics=[R.LeaderAndIsrTopicError(
        topic_id=TOPIC_ID, partition_errors=[R.LeaderAndIsrPartitionError(partition_index=0)])]),
        v5)


def test_stop_replica_v3_request_and_response() -> None:
    request = h("""
        0005 0003 00000007 0003 636c69 00 # StopReplica v3, header v2
        00000001 00000002  # controller_id 1, controller_epoch 2
        0000000000000003   # broker_epoch 3 (no delete_partitions after v2)
        02                 # topic_states: 1 (v3+)
          02 74            #   topic_name "t"
          02               #   partition_states: 1
            00000000 00000004 01 00 # partition 0, leader_epoch 4, delete_partition true, tags
          00               #   topic tags
        00                 # tagged fields
    """)
    R = StopReplicaRequest
    check_request(STOP_REPLICA, 3, R(controller_id=1, controller_epoch=2, broker_epoch=3,
                                     topic_states=[R.StopReplicaTopicState(
                                         topic_name="t", partition_states=[
                                             R.StopReplicaPartitionState(
                                                 partition_index=0, leader_epoch=4,
                                                 delete_partition=True)])]),
                  request)
    response = h("""
        00000007 00 0000   # correlation id, header tags, error_code
        02 02 74 00000000 004a 00 # partition_errors: 1, "t" 0 FENCED_LEADER_EPOCH (74), tags
        00                 # tagged fields
    """)
    S = StopReplicaResponse
    check_response(STOP_REPLICA, 3, S(partition_errors=[S.StopReplicaPartitionError(
        topic_name="t", partition_index=0, error_code=ErrorCode.FENCED_LEADER_EPOCH)]), response)


def test_update_metadata_v7_request_and_v6_response() -> None:
    request = h("""
        0006 0007 00000007 0003 636c69 00 # UpdateMetadata v7, header v2
        00000001           # controller_id 1 (type is tagged, v8+ only)
        00000002           # controller_epoch 2
        0000000000000003   # broker_epoch 3
        02                 # topic_states: 1 (v5+)
          02 74            #   topic_name "t"
          00000000000000000000000000000001 # topic_id (v7+)
          02               #   partition_states: 1
            00000000 00000002 # partition_index 0, controller_epoch 2
            00000001 00000004 # leader 1, leader_epoch 4
            02 00000001    #     isr [1]
            00000005       #     zk_version 5
            02 00000001    #     replicas [1]
            01             #     offline_replicas []
            00             #     partition tags
          00               #   topic tags
        02                 # live_brokers: 1
          00000001         #   id 1 (no v0_host / v0_port)
          02               #   endpoints: 1
            00002384 02 68 #     port 9092, host "h"
            0a 504c41494e54455854 # listener "PLAINTEXT"
            0000 00        #     security_protocol 0, tags
          00               #   rack null
          00               #   broker tags
        00                 # tagged fields
    """)
    R = UpdateMetadataRequest
    req = R(controller_id=1, controller_epoch=2, broker_epoch=3, topic_states=[
        R.UpdateMetadataTopicState(topic_name="t", topic_id=TOPIC_ID, partition_states=[
            R.UpdateMetadataPartitionState(partition_index=0, controller_epoch=2, leader=1,
                                           leader_epoch=4, isr=[1], zk_version=5,
                                           replicas=[1])])],
        live_brokers=[R.UpdateMetadataBroker(id=1, rack=None, endpoints=[
            R.UpdateMetadataEndpoint(port=9092, host="h", listener="PLAINTEXT")])])
    check_request(UPDATE_METADATA, 7, req, request)
    check_response(UPDATE_METADATA, 6, UpdateMetadataResponse(error_code=0),
                   h("00000007 00 0000 00"))


def test_elect_leaders_v0_request_classic_encoding() -> None:
    expected = h("""
        002b 0000 00000007 0003 636c69 # ElectLeaders v0: header v1, no tagged fields
        00000001           # topic_partitions: int32 count 1 (no election_type before v1)
          0001 74          #   topic "t" (int16 length)
          00000002 00000000 00000001 # partitions [0, 1]
        0000ea60           # timeout_ms 60000
    """)
    R = ElectLeadersRequest
    req = R(topic_partitions=[R.TopicPartitions(topic="t", partitions=[0, 1])])
    assert req.timeout_ms == 60000
    check_request(ELECT_LEADERS, 0, req, expected)


def test_elect_leaders_v2_request_all_partitions() -> None:
    expected = h("""
        002b 0002 00000007 0003 636c69 00 # ElectLeaders v2: header v2
        01                 # election_type 1 (unclean)
        00                 # topic_partitions null: every partition
        00007530           # timeout_ms 30000
        00                 # tagged fields
    """)
    check_request(ELECT_LEADERS, 2,
                  ElectLeadersRequest(election_type=1, topic_partitions=None, timeout_ms=30000),
                  expected)


def test_elect_leaders_v1_response() -> None:
    expected = h("""
        00000007           # correlation id, header v0
        00000000 0000      # throttle_time_ms 0, error_code 0 (v1+)
        00000001           # replica_election_results: 1
          0001 74          #   topic "t"
          00000002         #   partition_result: 2
            00000000 0000 ffff # partition 0, no error, error_message null
            00000001 0054 0001 78 # partition 1, ELECTION_NOT_NEEDED (84), "x"
    """)
    R = ElectLeadersResponse
    resp = R(replica_election_results=[R.ReplicaElectionResult(topic="t", partition_result=[
        R.PartitionResult(partition_id=0, error_message=None),
        R.PartitionResult(partition_id=1, error_code=ErrorCode.ELECTION_NOT_NEEDED,
                          error_message="x"),
    ])])
    check_response(ELECT_LEADERS, 1, resp, expected)


# ---- behaviours --------------------------------------------------------------------------------


def test_null_and_empty_topic_partitions_stay_distinct() -> None:
    for version in (0, 1, 2):
        for value in (None, []):
            req = ElectLeadersRequest(topic_partitions=value)
            assert roundtrip_request(ELECT_LEADERS, version, req).topic_partitions == value


def test_fields_a_version_lacks_are_refused_or_dropped() -> None:
    """Non-ignorable fields of other versions must stay at their default; ignorable ones are
    dropped (and decode as their default)."""
    refused = [
        (ELECT_LEADERS, 0, ElectLeadersRequest(election_type=1)),
        (ALTER_PARTITION, 0, AlterPartitionRequest(topics=[AlterPartitionRequest.TopicData(
            partitions=[AlterPartitionRequest.PartitionData(leader_recovery_state=1)])])),
        (LEADER_AND_ISR, 4, LeaderAndIsrRequest(type=2)),
        (LEADER_AND_ISR, 5, LeaderAndIsrRequest(is_k_raft_controller=True)),
        (STOP_REPLICA, 3, StopReplicaRequest(delete_partitions=True)),
        (UPDATE_METADATA, 7, UpdateMetadataRequest(ungrouped_partition_states=[
            UpdateMetadataRequest.UpdateMetadataPartitionState()])),
    ]
    for key, version, req in refused:
        with pytest.raises(EncodeError):
            codec.encode_request(key, version, 1, None, req)
    req = leader_and_isr_request(5)
    req.type = 0  # not ignorable: v4 cannot say it
    back = roundtrip_request(LEADER_AND_ISR, 4, req)
    assert req.topic_states[0].topic_id == TOPIC_ID
    assert back.topic_states[0].topic_id == uuid.UUID(int=0)
    back = roundtrip_request(UPDATE_METADATA, 6, update_metadata_request(7))
    assert back.topic_states[0].topic_id == uuid.UUID(int=0)


def test_common_structs_are_one_class_at_both_places() -> None:
    """Kafka's ``commonStructs``: the v0-1 ungrouped list and the v2+ per-topic lists of
    LeaderAndIsr hold the same struct (and class); likewise UpdateMetadata and the response."""
    req = REQUESTS[LEADER_AND_ISR].struct
    ungrouped = req.field_named("ungrouped_partition_states").struct
    grouped = req.field_named("topic_states").struct.field_named("partition_states").struct
    assert ungrouped is grouped and ungrouped.name == "LeaderAndIsrPartitionState"
    upd = REQUESTS[UPDATE_METADATA].struct
    assert (upd.field_named("ungrouped_partition_states").struct
            is upd.field_named("topic_states").struct.field_named("partition_states").struct)
    resp = RESPONSES[LEADER_AND_ISR].struct
    assert (resp.field_named("partition_errors").struct
            is resp.field_named("topics").struct.field_named("partition_errors").struct)
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(partition_index=1, leader=2)
    req_obj = LeaderAndIsrRequest(topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
        topic_name="t", partition_states=[state])])
    back = roundtrip_request(LEADER_AND_ISR, 4, req_obj)
    got = back.topic_states[0].partition_states[0]
    assert type(got) is LeaderAndIsrRequest.LeaderAndIsrPartitionState and got == state


def test_defaults_follow_kafka() -> None:
    assert ElectLeadersRequest().timeout_ms == 60000
    assert ElectLeadersRequest().topic_partitions == []
    assert ControlledShutdownRequest().broker_epoch == -1
    assert AlterPartitionRequest().broker_epoch == -1
    assert StopReplicaRequest.StopReplicaPartitionState().leader_epoch == -1
    assert LeaderAndIsrRequest().broker_epoch == -1
    assert UpdateMetadataRequest.UpdateMetadataBroker().rack == ""
    assert REQUESTS[ELECT_LEADERS].struct.field_named("topic_partitions").struct.field_named(
        "topic").map_key
    assert [f.name for f in RESPONSES[CONTROLLED_SHUTDOWN].struct.field_named(
        "remaining_partitions").struct.fields if f.map_key] == ["topic_name", "partition_index"]


# ---- what a replica fetcher needs from the client APIs -----------------------------------------


def test_replica_fetcher_fields_in_fetch_v12_offset_for_leader_epoch_and_list_offsets() -> None:
    fetch_req, fetch_resp = REQUESTS[1], RESPONSES[1]
    assert 12 in fetch_req.valid_versions
    assert fetch_req.struct.field_named("replica_id").present_in(12)
    part = fetch_req.struct.field_named("topics").struct.field_named("partitions").struct
    for name in ("current_leader_epoch", "last_fetched_epoch", "log_start_offset"):
        assert part.field_named(name).present_in(12), name
    data = fetch_resp.struct.field_named("responses").struct.field_named("partitions").struct
    assert data.field_named("log_start_offset").present_in(12)
    assert {n: data.field_named(n).tag for n in ("diverging_epoch", "current_leader", "snapshot_id")
            if data.field_named(n).tagged_in(12)} == {
        "diverging_epoch": 0, "current_leader": 1, "snapshot_id": 2}
    ofle = REQUESTS[23]
    assert all(ofle.struct.field_named("replica_id").present_in(v) for v in (3, 4))
    assert ofle.struct.field_named("replica_id").default == -2  # "a consumer", as Kafka
    assert REQUESTS[2].struct.field_named("replica_id").present_in(REQUESTS[2].min_version)

    # a follower's fetch and the leader's answer that it diverged
    req = FetchRequest(replica_id=2, max_wait_ms=500, min_bytes=1, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=7, fetch_offset=100, last_fetched_epoch=6,
            log_start_offset=0, partition_max_bytes=1 << 20)])])
    assert roundtrip_request(1, 12, req) == req
    R = FetchResponse
    resp = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[R.PartitionData(
        partition_index=0, high_watermark=90, log_start_offset=0,
        diverging_epoch=R.EpochEndOffset(epoch=6, end_offset=90),
        current_leader=R.LeaderIdAndEpoch(leader_id=1, leader_epoch=7), records=None)])])
    assert roundtrip_response(1, 12, resp) == resp
