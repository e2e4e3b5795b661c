"""Bad input never crashes the broker nor disturbs other connections; it gets Kafka's answer."""

from __future__ import annotations

import socket
import struct

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ApiVersionsRequest,
    ConsumerGroupPositionRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
    PartitionLeaderEpochsForPartitionsRequest,
    ProduceRequest,
)
from tests.conftest import wait_until
from tests.integration import clients
from tests.unit.batches import build_batch


class RawClient:
    """A socket speaking framed requests by hand."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = 0

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def request(self, api_key: int, version: int, message: object) -> object:
        self.correlation += 1
        self.send_frame(bytes(codec.encode_request(api_key, version, self.correlation, "raw", message)))
        return self.response(api_key, version)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def response(self, api_key: int, version: int) -> object:
        correlation_id, message = codec.decode_response(api_key, version, memoryview(self.read_frame()))
        assert correlation_id == self.correlation
        return message

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by broker")
            data += chunk
        return data

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(broker):
    client = RawClient(broker.bootstrap)
    yield client
    client.close()


def create(raw: RawClient, topic: str) -> None:
    """Auto-create ``topic`` by Metadata v4 and ask again until it is ready (the first answer is
    LEADER_NOT_AVAILABLE, as Kafka's)."""
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True)
    wait_until(lambda: raw.request(ApiKey.METADATA, 4, request).topics[0].error_code == ErrorCode.NONE,
               message=f"topic {topic} ready")


def assert_broker_healthy(broker) -> None:
    assert broker.alive
    other = RawClient(broker.bootstrap)
    try:
        response = other.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert response.error_code == 0
    finally:
        other.close()


# The broker's WARNING for a deliberate close; an internal error would log an ERROR with a
# traceback instead, which fails the test (tests/conftest.py).
def deliberate_close(reason: str) -> str:
    return rf"WARNING Closing connection from 127\.0\.0\.1:\d+: {reason}"


@pytest.mark.parametrize("size", [-1, -2**31, 104857601, 2**31 - 1])
def test_frame_size_outside_limits_closes_connection(broker, raw, size):
    bystander = RawClient(broker.bootstrap)
    mark = broker.log_mark()
    try:
        raw.send_frame(struct.pack(">i", size))
        assert raw.is_closed_by_peer()
        broker.wait_for_log(deliberate_close(f"frame size {size} is outside 0..104857600"), since=mark)
        assert bystander.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()).error_code == 0
    finally:
        bystander.close()
    assert_broker_healthy(broker)


def test_unsupported_api_versions_version_gets_error_35_in_v0_layout(broker, raw):
    raw.correlation += 1
    header = struct.pack(">hhi", ApiKey.API_VERSIONS, 99, raw.correlation) + struct.pack(">h", 3) + b"raw"
    raw.send_frame(struct.pack(">i", len(header)) + header)
    response = codec.decode_response(ApiKey.API_VERSIONS, 0, memoryview(raw.read_frame()))[1]
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[ApiKey.API_VERSIONS] == (0, 4)


@pytest.mark.parametrize("api_key,version,name", [
    (ApiKey.METADATA, 99, "METADATA"), (9999, 0, "key 9999"), (ApiKey.PRODUCE, 10, "PRODUCE")])
def test_unknown_api_or_version_closes_connection(broker, raw, api_key, version, name):
    mark = broker.log_mark()
    header = struct.pack(">hhi", api_key, version, 7) + struct.pack(">h", -1)
    raw.send_frame(struct.pack(">i", len(header)) + header)
    assert raw.is_closed_by_peer()
    broker.wait_for_log(deliberate_close(f"unsupported API {name} version {version} "), since=mark)
    assert_broker_healthy(broker)


def header_v1(api_key: int, version: int) -> bytes:
    """Request header v1: key, version, correlation id 5, a null client id."""
    return struct.pack(">hhi", api_key, version, 5) + struct.pack(">h", -1)


def header_v2(api_key: int, version: int) -> bytes:
    """Request header v2 (flexible versions): v1's fields (the client id stays a classic int16
    string) and then the header's tagged fields, none here (a zero uvarint)."""
    return header_v1(api_key, version) + b"\x00"


# A flexible (compact) array's length is a uvarint of N + 1: 1001 = b"\xe9\x07" says 1000 elements.
COMPACT_1000 = b"\xe9\x07"


@pytest.mark.parametrize("frame,request_name", [
    # 1000 topics, none sent
    (header_v1(ApiKey.METADATA, 1) + struct.pack(">i", 1000), "METADATA v1"),
    # GroupId "g", GenerationId 1, MemberId "m", then ReportedPositions of 1000 topics, none sent
    (header_v2(ApiKey.CONSUMER_GROUP_POSITION, 0) + b"\x02g" + struct.pack(">i", 1) + b"\x02m" + COMPACT_1000,
     "CONSUMER_GROUP_POSITION v0"),
    # Topics: 1000, none sent
    (header_v2(ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS, 0) + COMPACT_1000,
     "PARTITION_LEADER_EPOCHS_FOR_PARTITIONS v0"),
], ids=["metadata", "consumer-group-position", "partition-leader-epochs-for-partitions"])
def test_malformed_body_closes_connection(broker, raw, frame, request_name):
    mark = broker.log_mark()
    raw.send_frame(struct.pack(">i", len(frame)) + frame)
    assert raw.is_closed_by_peer()
    # "0 bytes left": the broker took the flexible frames' tag byte as the end of a v2 header
    broker.wait_for_log(deliberate_close(
        rf"malformed {request_name} request \(array of 1000 elements cannot fit in the 0 bytes left\)"), since=mark)
    assert_broker_healthy(broker)


def test_partition_leader_epochs_for_unknown_partitions(broker, raw, topic_name):
    """An unknown topic, and partitions out of range of a known one, get UNKNOWN_TOPIC_OR_PARTITION
    each (and no epochs), in the same answer as a known partition; the connection stays open."""
    create(raw, topic_name)
    R = PartitionLeaderEpochsForPartitionsRequest
    response = raw.request(ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS, 0, R(topics=[
        R.RequestTopic(name=f"{topic_name}-absent", partition_indexes=[0, 1]),
        R.RequestTopic(name=topic_name, partition_indexes=[0, 1, -1])]))
    answer = {(t.name, p.partition_index): (p.error_code, p.leader_epochs_after_creation, p.leader_epochs_before_deletion)
              for t in response.topics for p in t.partitions}
    unknown = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [], [])
    assert answer == {(f"{topic_name}-absent", 0): unknown, (f"{topic_name}-absent", 1): unknown,
                      (topic_name, 0): (ErrorCode.NONE, [], []), (topic_name, 1): unknown, (topic_name, -1): unknown}
    assert raw.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()).error_code == ErrorCode.NONE


@pytest.mark.parametrize("group,error", [("", ErrorCode.INVALID_GROUP_ID), (None, ErrorCode.UNKNOWN_MEMBER_ID)],
                         ids=["empty-group-id", "unknown-group"])
def test_consumer_group_position_outside_a_group(broker, raw, topic_name, group, error):
    """A position exchange with an empty group id, or for a group that does not exist, is refused
    as a heartbeat would be, with nothing else in the answer; the connection stays open. (Unknown
    members, stale generations and reports for partitions not owned are in
    test_partition_changes.py::test_consumer_group_position.)"""
    group = f"g-{topic_name}" if group is None else group
    if group:  # the coordinator must be up, else the answer is about it (not the group)
        wait_until(lambda: raw.request(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key=group)).error_code
                   == ErrorCode.NONE, 30, message="a group coordinator")
    R = ConsumerGroupPositionRequest
    response = raw.request(ApiKey.CONSUMER_GROUP_POSITION, 0, R(
        group_id=group, generation_id=1, member_id="nobody",
        reported_positions=[R.ReportedTopic(name=topic_name, partitions=[R.ReportedPartition(partition_index=0, position=3)])],
        interested_topics=[R.InterestedTopic(name=topic_name, partition_indexes=[0])]))
    assert response.error_code == error
    assert (response.report_errors, response.group_positions, response.position_requests) == ([], [], [])
    assert raw.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()).error_code == ErrorCode.NONE


def _produce(raw: RawClient, topic: str, records: bytes) -> object:
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    return raw.request(ApiKey.PRODUCE, 7, request).responses[0].partition_responses[0]


def _log_end_offset(raw: RawClient, topic: str) -> int:
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    answer = raw.request(ApiKey.LIST_OFFSETS, 5, request).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE
    return answer.offset


def test_corrupt_batches_are_refused_and_append_nothing(broker, raw, topic_name):
    create(raw, topic_name)
    good = build_batch([(b"k", b"v")])
    assert _produce(raw, topic_name, good).error_code == 0

    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    bad_length = bytearray(good)
    bad_length[8:12] = struct.pack(">i", len(good))  # longer than the data
    # Kafka 3.9.2's answers (tests/differential/test_error_paths.py): a bad CRC is corrupt; a magic
    # other than 2, or no whole batch, is an invalid record set for Produce v3+.
    for bad, error in ((bad_crc, ErrorCode.CORRUPT_MESSAGE), (wrong_magic, ErrorCode.INVALID_RECORD),
                       (bad_length, ErrorCode.INVALID_RECORD), (good[:30], ErrorCode.INVALID_RECORD)):
        assert _produce(raw, topic_name, bytes(bad)).error_code == error
    assert _log_end_offset(raw, topic_name) == 1
    assert [v for _, _, v, _ in clients.consume_confluent(broker.bootstrap, topic_name, 1)] == [b"v"]
    assert_broker_healthy(broker)


def test_batch_over_max_message_bytes_is_rejected(broker, raw, topic_name):
    create(raw, topic_name)
    assert _produce(raw, topic_name, build_batch([(b"k", b"small")])).error_code == ErrorCode.NONE
    # message.max.bytes defaults to 1048588: a batch one byte over it is refused whole.
    limit = 1048588
    overhead = len(build_batch([(None, b"")]))
    big = build_batch([(None, b"x" * (limit - overhead + 10))])
    assert len(big) > limit
    rejected = _produce(raw, topic_name, big)
    assert rejected.error_code == ErrorCode.MESSAGE_TOO_LARGE and rejected.base_offset == -1
    # Nothing of it was appended: the log still ends after the first record, which reads back alone.
    assert _log_end_offset(raw, topic_name) == 1
    assert [v for _, _, v, _ in clients.consume_confluent(broker.bootstrap, topic_name, 1)] == [b"small"]
    assert _produce(raw, topic_name, build_batch([(b"k", b"next")])).base_offset == 1
    assert_broker_healthy(broker)
