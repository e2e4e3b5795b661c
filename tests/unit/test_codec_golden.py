"""Hand-checked wire bytes: each expected frame below was written out field by field from
Kafka's protocol layout (header versions, int16/int32 vs compact lengths, tagged sections), and the
codec must produce exactly these bytes and decode them back.
"""

from __future__ import annotations

import struct

from pybroker.protocol import codec, messages
from pybroker.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataResponse,
    ProduceRequest,
)


def h(text: str) -> bytes:
    """Hex with spaces and ``#`` comments allowed."""
    clean = "".join(line.split("#", 1)[0] for line in text.splitlines())
    return bytes.fromhex(clean)


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def check_request(key: int, version: int, obj: object, expected: bytes, client_id: str | None) -> None:
    frame = codec.encode_request(key, version, 7, client_id, obj)
    assert bytes(frame) == framed(expected)
    view = memoryview(bytearray(expected))
    header, offset = codec.decode_request_header(view)
    assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 7)
    assert header.client_id == client_id
    assert codec.decode_request(key, version, view, offset) == obj


def check_response(key: int, version: int, obj: object, expected: bytes) -> None:
    frame = codec.encode_response(key, version, 7, obj)
    assert bytes(frame) == framed(expected)
    corr, back = codec.decode_response(key, version, memoryview(expected))
    assert corr == 7
    assert back == obj


def test_api_versions_v0_request() -> None:
    expected = h("""
        0012 0000          # api_key 18, api_version 0
        00000007           # correlation id
        0003 636c69        # client_id "cli" (int16 length: header v1)
    """)  # v0 body is empty
    check_request(18, 0, ApiVersionsRequest(), expected, "cli")


def test_api_versions_v3_request() -> None:
    expected = h("""
        0012 0003 00000007 # api_key 18, v3, correlation id
        0003 636c69        # client_id: still an int16-length string in header v2
        00                 # header tagged fields: none
        06 6b61666b61      # client_software_name "kafka" compact: varint len+1 = 6
        04 312e30          # client_software_version "1.0"
        00                 # body tagged fields: none
    """)
    req = ApiVersionsRequest(client_software_name="kafka", client_software_version="1.0")
    check_request(18, 3, req, expected, "cli")


def test_api_versions_v0_response() -> None:
    expected = h("""
        00000007           # correlation id (response header v0)
        0000               # error_code 0
        00000002           # api_keys: int32 count 2
        0000 0003 0009     # Produce 3..9
        0012 0000 0003     # ApiVersions 0..3
    """)
    resp = ApiVersionsResponse(api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=9),
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3),
    ])
    check_response(18, 0, resp, expected)


def test_api_versions_v3_response_header_v0_and_tagged_fields() -> None:
    expected = h("""
        00000007           # correlation id; header v0 even though v3 is flexible (no tag byte)
        0000               # error_code
        02                 # api_keys: compact count 1+1
        0012 0000 0003 00  # ApiVersions 0..3, element tagged fields: none
        00000000           # throttle_time_ms
        02                 # tagged fields: 2 present (SupportedFeatures tag 0, epoch tag 1)
        00 11              #   tag 0, 17 bytes:
           02                  # compact array, 1 element
           0b 6d657461646174612e76 # "metadata.v" (10 bytes, varint 11)
           0001 0014 00        # min 1, max 20, element tags none
        01 08              #   tag 1, 8 bytes:
           0000000000000005    # finalized_features_epoch 5
    """)
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)],
        supported_features=[ApiVersionsResponse.SupportedFeatureKey(
            name="metadata.v", min_version=1, max_version=20)],
        finalized_features_epoch=5,
    )
    check_response(18, 3, resp, expected)
    # a default-valued tagged field (zk_migration_ready False, finalized_features []) is not sent;
    # with everything default the tagged section is a single 00
    plain = codec.encode_response(18, 3, 7, ApiVersionsResponse())
    assert bytes(plain) == framed(h("00000007 0000 01 00000000 00"))


def test_api_versions_unsupported_version_error_v0() -> None:
    frame = codec.encode_api_versions_error_v0(99, [(18, 0, 3)])
    assert bytes(frame) == framed(h("""
        00000063           # correlation id 99, header v0
        0023               # error 35 UNSUPPORTED_VERSION
        00000001 0012 0000 0003
    """))
    corr, resp = codec.decode_response(18, 0, memoryview(frame)[4:])
    assert corr == 99 and resp.error_code == 35 and resp.api_keys[0].max_version == 3


def test_produce_v3_request_with_record_set() -> None:
    # a magic-2 record batch header + one record; the codec treats it as opaque bytes
    batch = h("""
        0000000000000000 00000040 ffffffff 02 1b4f6c34 0000 00000000
        0000018b2f4c8a00 0000018b2f4c8a00 ffffffffffffffff ffff ffffffff 00000001
        1c 00 00 00 01 0a 68656c6c6f 00
    """)
    expected = h("""
        0000 0003 00000007 # Produce v3
        0006 70726f647563  # client_id "produc"
        ffff               # transactional_id null
        ffff               # acks -1
        00007530           # timeout_ms 30000
        00000001           # topic_data: 1
        0005 746f706963    # name "topic"
        00000001           # partition_data: 1
        00000002           # index 2
    """) + struct.pack(">i", len(batch)) + batch
    req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="topic", partition_data=[ProduceRequest.PartitionProduceData(index=2, records=batch)])])
    check_request(0, 3, req, expected, "produc")


def test_metadata_v1_response() -> None:
    expected = h("""
        00000007           # correlation id
        00000001           # brokers: 1
        00000001           #   node_id 1
        0009 3132372e302e302e31 # host "127.0.0.1"
        00002384           #   port 9092
        ffff               #   rack null (nullable from v1)
        00000001           # controller_id 1 (v1+); no cluster_id before v2
        00000001           # topics: 1
        0000               #   error_code
        0001 74            #   name "t"
        00                 #   is_internal false (v1+)
        00000001           #   partitions: 1
        0000 00000000 00000001 # error, partition_index 0, leader_id 1 (no leader_epoch before v7)
        00000001 00000001  #     replica_nodes [1]
        00000001 00000001  #     isr_nodes [1]
    """)
    M = MetadataResponse
    resp = M(
        brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092)],
        controller_id=1,
        topics=[M.MetadataResponseTopic(name="t", partitions=[M.MetadataResponsePartition(
            partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])])],
    )
    check_response(3, 1, resp, expected)


def test_fetch_v12_request_with_tagged_cluster_id() -> None:
    expected = h("""
        0001 000c 00000007 # Fetch v12 (flexible: header v2)
        ffff 00            # client_id null, header tags none
        ffffffff           # replica_id -1
        000001f4 00000001 00100000 # max_wait 500, min_bytes 1, max_bytes 1 MiB
        01                 # isolation_level read_committed
        00000000 ffffffff  # session_id 0, session_epoch -1
        02                 # topics: compact 1
          02 74            #   topic "t"
          02               #   partitions: 1
            00000000 ffffffff 000000000000000a ffffffff ffffffffffffffff 00100000 00
                           #   partition 0, current_leader_epoch -1, fetch_offset 10,
                           #   last_fetched_epoch -1, log_start_offset -1, max bytes, tags
          00               #   topic tags
        01                 # forgotten_topics_data: compact 0
        01                 # rack_id "" (compact length 0+1)
        01 00 03 03 6331   # tagged: 1 field, tag 0 (cluster_id), 3 bytes: compact "c1"
    """)
    req = FetchRequest(
        cluster_id="c1", max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
        topics=[FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=10, partition_max_bytes=1 << 20)])],
    )
    check_request(1, 12, req, expected, None)


def test_fetch_v12_response_with_tagged_struct() -> None:
    expected = h("""
        00000007 00        # correlation id, response header v1 tags none
        00000000 0000 00000000 # throttle, error_code, session_id
        02                 # responses: 1
          02 74            #   topic "t"
          02               #   partitions: 1
            00000000 0000 0000000000000005 0000000000000005 0000000000000000
                           #   index 0, error 0, high_watermark 5, last_stable 5, log_start 0
            00             #   aborted_transactions null (compact 0)
            ffffffff       #   preferred_read_replica -1
            04 616263      #   records "abc" (compact 3+1)
            01             #   tagged: 1 field
              01 09        #     tag 1 (current_leader), 9 bytes
              00000002 00000003 00 # leader_id 2, leader_epoch 3, struct tags
          00               #   topic tags
        00                 # top-level tags
    """)
    F = FetchResponse
    resp = F(responses=[F.FetchableTopicResponse(topic="t", partitions=[F.PartitionData(
        high_watermark=5, last_stable_offset=5, log_start_offset=0, aborted_transactions=None,
        current_leader=F.LeaderIdAndEpoch(leader_id=2, leader_epoch=3), records=b"abc")])])
    check_response(1, 12, resp, expected)


def test_describe_cluster_v0_is_flexible_from_v0() -> None:
    expected = h("""
        003c 0000 00000007 0001 63 00 # DescribeCluster v0: header v2
        01 00                         # include_cluster_authorized_operations true, tags
    """)
    check_request(60, 0, messages.DescribeClusterRequest(include_cluster_authorized_operations=True),
                  expected, "c")
