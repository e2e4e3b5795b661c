"""Bad input never crashes the broker nor disturbs other connections; it gets Kafka's answer."""

from __future__ import annotations

import socket
import struct

import pytest

from pybroker import _native
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import ApiVersionsRequest, MetadataRequest, ProduceRequest
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


def assert_broker_healthy(broker) -> None:
    assert broker.alive
    other = RawClient(broker.bootstrap)
    try:
        response = other.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert response.error_code == 0
    finally:
        other.close()


@pytest.mark.parametrize("size", [-1, -2**31, 104857601, 2**31 - 1])
def test_frame_size_outside_limits_closes_connection(broker, raw, size):
    bystander = RawClient(broker.bootstrap)
    try:
        raw.send_frame(struct.pack(">i", size))
        assert raw.is_closed_by_peer()
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
    assert versions[ApiKey.API_VERSIONS] == (0, 3)


@pytest.mark.parametrize("api_key,version", [(ApiKey.METADATA, 99), (9999, 0), (ApiKey.PRODUCE, 0)])
def test_unknown_api_or_version_closes_connection(broker, raw, api_key, version):
    header = struct.pack(">hhi", api_key, version, 7) + struct.pack(">h", -1)
    raw.send_frame(struct.pack(">i", len(header)) + header)
    assert raw.is_closed_by_peer()
    assert_broker_healthy(broker)


def test_malformed_body_closes_connection(broker, raw):
    body = struct.pack(">hhi", ApiKey.METADATA, 1, 5) + struct.pack(">h", -1) + struct.pack(">i", 1000)  # 1000 topics, none sent
    raw.send_frame(struct.pack(">i", len(body)) + body)
    assert raw.is_closed_by_peer()
    assert_broker_healthy(broker)


def _produce(raw: RawClient, topic: str, records: bytes) -> object:
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    return raw.request(ApiKey.PRODUCE, 7, request).responses[0].partition_responses[0]


def _log_end_offset(raw: RawClient, bootstrap: str, topic: str) -> int:
    return len(clients.consume_confluent(bootstrap, topic, 1000, timeout=3))


def test_corrupt_batches_get_corrupt_message_and_append_nothing(broker, raw, topic_name):
    raw.request(ApiKey.METADATA, 4, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=True))
    good = build_batch([(b"k", b"v")])
    assert _produce(raw, topic_name, good).error_code == 0

    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    bad_length = bytearray(good)
    bad_length[8:12] = struct.pack(">i", len(good))  # longer than the data
    for bad in (bad_crc, wrong_magic, bad_length, good[:30]):
        assert _produce(raw, topic_name, bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert _log_end_offset(raw, broker.bootstrap, topic_name) == 1
    assert_broker_healthy(broker)


def test_batch_over_max_message_bytes_is_rejected(broker, raw, topic_name):
    raw.request(ApiKey.METADATA, 4, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=True))
    big = build_batch([(None, b"x" * 1_100_000)])
    assert _produce(raw, topic_name, big).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert isinstance(_native.crc32c(b"123456789"), int)
    assert_broker_healthy(broker)
