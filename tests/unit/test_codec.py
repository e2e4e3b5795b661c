"""Codec round trips: every API × every supported version × request and response.

Sample messages are generated from the specs themselves: every field present in a version gets a
non-default value (nested structs, arrays, tagged fields included), and fields *absent* from the
version are set to non-default values too, which the encoder must drop and the decoder must
bring back as defaults.
"""

from __future__ import annotations

import itertools
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from pybroker import _native
from pybroker.protocol import codec, messages
from pybroker.protocol.codec import MalformedRequestError
from pybroker.protocol.schema import Field, Message, Struct
from pybroker.protocol.specs import REQUESTS, RESPONSES
from tests.unit import batches

INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


class Sampler:
    """Builds message objects with a distinct non-default value in every field."""

    def __init__(self, msg: Message, version: int, nulls: bool = False) -> None:
        self.msg = msg
        self.version = version
        self.nulls = nulls
        self.counter = itertools.count(1)
        self.cls = (messages.REQUEST_CLASSES if msg.kind == "request" else messages.RESPONSE_CLASSES)[
            msg.api_key
        ]

    def class_of(self, st: Struct) -> type:
        return self.cls if st is self.msg.struct else getattr(self.cls, st.name)

    def value(self, f: Field, present: bool) -> Any:
        """A non-default value for ``f`` (null where allowed and ``nulls`` is set)."""
        k = next(self.counter)
        if present and self.nulls and f.nullable_in(self.version):
            return None
        if f.is_array:
            if f.struct is not None:
                return [self.struct(f.struct, present) for _ in range(2)]
            elem = Field(f.kafka_name, f.name, f.element_type, f.versions, f.nullable_versions,
                         f.tagged_versions, None, None, False)
            elem.nullable_versions = type(f.versions)(1, 0)
            return [self.scalar(elem, k + i) for i in range(3)]
        if f.struct is not None:
            return self.struct(f.struct, present)
        return self.scalar(f, k)

    def scalar(self, f: Field, k: int) -> Any:
        t = f.type
        if t in INT_RANGES:
            lo, hi = INT_RANGES[t]
            candidates = [hi - k, lo + k, k * 7919 % hi, 1]
            return next(c for c in candidates if c != f.default and lo <= c <= hi)
        if t == "float64":
            return 0.5 + k
        if t == "bool":
            return not f.default
        if t == "string":
            # non-ASCII so byte length != character length
            return f"{f.name}-é-{k}" * (1 + k % 3)
        if t == "bytes":
            return bytes((k + i) % 256 for i in range(5 + k % 7))
        if t == "records":
            return bytes((k * 3 + i) % 256 for i in range(200 + k))  # > 127: multi-byte varints
        if t == "uuid":
            return uuid.UUID(int=(k * 0x9E3779B97F4A7C15) % (1 << 128) or 1)
        raise AssertionError(t)

    def struct(self, st: Struct, present: bool = True) -> Any:
        """An instance with every field set (present in version → encodable value).

        Fields absent from the version get non-default values too, except non-ignorable ones of
        requests (encoding those must fail: see test_non_ignorable_absent_field_is_refused).
        """
        obj = self.class_of(st)()
        for f in st.fields:
            here = present and f.present_in(self.version)
            if not here and self.msg.kind == "request" and not f.ignorable:
                continue
            setattr(obj, f.name, self.value(f, here))
        return obj

    def expected(self, obj: Any, st: Struct) -> Any:
        """What decoding the encoding of ``obj`` must give: absent fields → defaults."""
        out = self.class_of(st)()
        for f in st.fields:
            if not f.present_in(self.version):
                continue  # keeps the constructor default
            val = getattr(obj, f.name)
            if f.struct is not None and val is not None:
                val = [self.expected(x, f.struct) for x in val] if f.is_array else self.expected(
                    val, f.struct
                )
            setattr(out, f.name, val)
        return out


def all_cases() -> list[tuple[str, int, int]]:
    cases = []
    for kind, registry in (("request", REQUESTS), ("response", RESPONSES)):
        for key, msg in sorted(registry.items()):
            for v in msg.versions():
                cases.append((kind, key, v))
    return cases


CASES = all_cases()


def case_id(case: tuple[str, int, int]) -> str:
    kind, key, v = case
    registry = REQUESTS if kind == "request" else RESPONSES
    return f"{registry[key].name}-v{v}"


def roundtrip(kind: str, key: int, version: int, obj: Any) -> tuple[bytearray, Any]:
    if kind == "request":
        frame = codec.encode_request(key, version, 1234, "test-client", obj)
        view = memoryview(bytearray(frame))[4:]
        header, offset = codec.decode_request_header(view)
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 1234)
        assert header.client_id == "test-client"
        assert offset > 0
        return frame, codec.decode_request(key, version, view, offset)
    frame = codec.encode_response(key, version, 4321, obj)
    corr, back = codec.decode_response(key, version, memoryview(frame)[4:])
    assert corr == 4321
    return frame, back


def reencode(kind: str, key: int, version: int, obj: Any) -> bytearray:
    if kind == "request":
        return codec.encode_request(key, version, 1234, "test-client", obj)
    return codec.encode_response(key, version, 4321, obj)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_roundtrip_every_field(case: tuple[str, int, int], nulls: bool) -> None:
    kind, key, version = case
    msg = (REQUESTS if kind == "request" else RESPONSES)[key]
    sampler = Sampler(msg, version, nulls=nulls)
    obj = sampler.struct(msg.struct)
    frame, back = roundtrip(kind, key, version, obj)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    expected = sampler.expected(obj, msg.struct)
    assert back == expected
    # decoding then encoding again gives the same bytes
    assert reencode(kind, key, version, back) == frame


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_roundtrip_defaults(case: tuple[str, int, int]) -> None:
    kind, key, version = case
    msg = (REQUESTS if kind == "request" else RESPONSES)[key]
    cls = (messages.REQUEST_CLASSES if kind == "request" else messages.RESPONSE_CLASSES)[key]
    obj = cls()
    frame, back = roundtrip(kind, key, version, obj)
    assert back == obj
    if msg.is_flexible(version):
        # tagged fields left at their defaults are not written: the body ends with an empty
        # tagged-field section
        assert frame[-1] == 0


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_truncation_and_corruption_only_raise_malformed(case: tuple[str, int, int]) -> None:
    kind, key, version = case
    msg = (REQUESTS if kind == "request" else RESPONSES)[key]
    obj = Sampler(msg, version).struct(msg.struct)
    frame = reencode(kind, key, version, obj)
    body = bytes(frame[4:])
    step = max(1, len(body) // 300)
    for cut in range(0, len(body), step):
        view = memoryview(bytearray(body[:cut]))
        with pytest.raises(MalformedRequestError):
            decode(kind, key, version, view)
    rng = random.Random(key * 100 + version)
    for _ in range(60):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        try:
            decode(kind, key, version, memoryview(mutated))
        except MalformedRequestError:
            pass


def decode(kind: str, key: int, version: int, view: memoryview) -> Any:
    if kind == "request":
        header, offset = codec.decode_request_header(view)
        if offset < 0:
            raise MalformedRequestError("header says unknown api")
        return codec.decode_request(key, version, view, offset)
    return codec.decode_response(key, version, view)


# ---- specific behaviours -----------------------------------------------------------------


def test_class_names_and_nested_structs() -> None:
    from pybroker.protocol.messages import (
        FetchResponse,
        MetadataResponse,
        ProduceRequest,
        ProduceResponse,
    )

    assert ProduceResponse.TopicProduceResponse.__qualname__ == "ProduceResponse.TopicProduceResponse"
    assert ProduceResponse.PartitionProduceResponse.__name__ == "PartitionProduceResponse"
    req = ProduceRequest(
        acks=-1,
        topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=b"x")])],
    )
    assert req.topic_data[0].partition_data[0].records == b"x"
    assert req.timeout_ms == 0 and req.transactional_id is None
    p = FetchResponse.PartitionData()
    assert (p.last_stable_offset, p.log_start_offset, p.preferred_read_replica) == (-1, -1, -1)
    assert p.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    part = MetadataResponse.MetadataResponsePartition(partition_index=3, replica_nodes=[1, 2])
    assert "partition_index=3" in repr(part) and "replica_nodes=[1, 2]" in repr(part)
    assert MetadataResponse.MetadataResponseTopic().topic_authorized_operations == -2147483648


def test_fresh_mutable_defaults() -> None:
    a, b = messages.ProduceRequest(), messages.ProduceRequest()
    a.topic_data.append(1)
    assert b.topic_data == []
    x, y = messages.ProduceResponse.PartitionProduceResponse(), messages.ProduceResponse.PartitionProduceResponse()
    assert x.current_leader is not y.current_leader


def test_equality_and_slots() -> None:
    a = messages.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    b = messages.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert a == b and a != messages.HeartbeatRequest(group_id="g")
    with pytest.raises(AttributeError):
        a.not_a_field = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        messages.HeartbeatRequest(nope=1)  # type: ignore[call-arg]


def test_snake_case_names() -> None:
    from pybroker.protocol.schema import snake_case

    assert snake_case("PartitionIndex") == "partition_index"
    assert snake_case("TopicID") == "topic_id"
    assert snake_case("timeoutMs") == "timeout_ms"
    assert snake_case("IsrNodes") == "isr_nodes"
    assert messages.CreateTopicsRequest().timeout_ms == 60000


def test_every_top_level_class_is_exported() -> None:
    for registry in (REQUESTS, RESPONSES):
        for msg in registry.values():
            cls = getattr(messages, msg.name)
            assert cls.__name__ == msg.name
            assert msg.name in messages.__all__


def test_records_decode_to_writable_memoryview_slice() -> None:
    records = bytes(range(100))
    req = messages.ProduceRequest(acks=1, timeout_ms=5, topic_data=[
        messages.ProduceRequest.TopicProduceData(name="t", partition_data=[
            messages.ProduceRequest.PartitionProduceData(index=0, records=records),
            messages.ProduceRequest.PartitionProduceData(index=1, records=None),
        ])])
    for version in (3, 9):
        frame = bytearray(codec.encode_request(0, version, 1, None, req))
        view = memoryview(frame)[4:]
        header, offset = codec.decode_request_header(view)
        assert header.client_id is None
        got = codec.decode_request(0, version, view, offset)
        rec = got.topic_data[0].partition_data[0].records
        assert isinstance(rec, memoryview) and not rec.readonly and rec == records
        assert got.topic_data[0].partition_data[1].records is None
        rec[0] = 0xAB  # patches the frame in place
        assert frame[frame.index(bytes(range(1, 100))) - 1] == 0xAB
        ro = codec.decode_request(0, version, memoryview(bytes(frame))[4:], offset)
        assert ro.topic_data[0].partition_data[0].records.readonly


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "cast"])
def test_records_encode_from_any_bytes_like(kind: str) -> None:
    raw = bytes(range(256)) * 2
    value: Any = {
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(bytearray(b"xx" + raw))[2:],
        "cast": memoryview(raw).cast("I"),
    }[kind]
    resp = messages.FetchResponse(responses=[messages.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[messages.FetchResponse.PartitionData(partition_index=0, records=value)])])
    for version in (4, 12):
        frame = codec.encode_response(1, version, 9, resp)
        _, back = codec.decode_response(1, version, memoryview(frame)[4:])
        assert back.responses[0].partitions[0].records == raw


def test_records_from_log_regions_are_left_in_place(tmp_path: Path) -> None:
    """A response whose records are log regions encodes to the same bytes, split around them."""
    segment = _native.Segment(str(tmp_path), 0)
    batch = batches.build_batch([(None, b"v" * 40)] * 3, timestamps=[1, 2, 3])
    for _ in range(4):
        segment.append(batch, segment.next_offset, 0, -1)
    region = segment.read_region(0, 1 << 20, 1 << 62, False)
    other = segment.read_region(6, 1 << 20, 1 << 62, False)
    assert region is not None and other is not None

    def response(first: Any, second: Any) -> messages.FetchResponse:
        partitions = [
            messages.FetchResponse.PartitionData(partition_index=0, records=first),
            messages.FetchResponse.PartitionData(partition_index=1, records=second),
        ]
        topic = messages.FetchResponse.FetchableTopicResponse(topic="t", partitions=partitions)
        return messages.FetchResponse(responses=[topic])

    for version in (4, 11, 12):
        frame = codec.encode_response(1, version, 9, response(region, other))
        assert isinstance(frame, codec.FrameWithRegions)
        assert [p for p in frame.parts if isinstance(p, _native.LogRegion)] == [region, other]
        expected = codec.encode_response(1, version, 9, response(region.read(), other.read()))
        assert bytes(frame) == expected and len(frame) == len(expected)
    segment.close()


def test_unknown_api_or_version_header() -> None:
    # ApiVersions v9 from a future client: header v2 layout, unknown to us
    frame = bytearray(b"\x00\x12\x00\x09\x00\x00\x00\x2a\x00\x03abc\x00\x05hello")
    header, offset = codec.decode_request_header(memoryview(frame))
    assert offset == -1
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 9, 42)
    assert header.client_id == "abc"
    header, offset = codec.decode_request_header(memoryview(b"\x03\xe7\x00\x00\x00\x00\x00\x01"))
    assert (header.api_key, header.correlation_id, offset) == (999, 1, -1)
    with pytest.raises(MalformedRequestError):
        codec.decode_request_header(memoryview(b"\x00\x12\x00"))
    with pytest.raises(MalformedRequestError):
        codec.decode_request(18, 99, memoryview(frame), 10)


def test_supported_versions_and_flexibility() -> None:
    assert codec.supported_versions(0) == (0, 9)
    assert codec.supported_versions(1) == (0, 12)
    assert codec.supported_versions(18) == (0, 4)
    assert codec.supported_versions(21) == (0, 3)
    assert codec.is_flexible(18, 3) and not codec.is_flexible(18, 2)
    assert codec.is_flexible(60, 0)
    assert codec.request_header_version(0, 9) == 2
    assert codec.request_header_version(0, 8) == 1
    assert codec.request_header_version(7, 0) == 0
    assert codec.response_header_version(18, 3) == 0
    assert codec.response_header_version(3, 9) == 1
    assert codec.supported_versions(4) == (4, 5)
    assert codec.request_header_version(7, 3) == 2
    assert codec.is_flexible(56, 0)
    with pytest.raises(KeyError):
        codec.supported_versions(58)  # Envelope: no spec


def test_large_counts_use_multibyte_varints() -> None:
    M = messages.MetadataResponse
    topic = M.MetadataResponseTopic(name="x" * 300, partitions=[
        M.MetadataResponsePartition(partition_index=i, replica_nodes=list(range(150)))
        for i in range(200)
    ])
    resp = M(brokers=[M.MetadataResponseBroker(node_id=1, host="h" * 200, port=9092)], topics=[topic])
    for version in (8, 9, 12):
        frame = codec.encode_response(3, version, 1, resp)
        _, back = codec.decode_response(3, version, memoryview(frame)[4:])
        assert back.topics[0].name == "x" * 300
        assert len(back.topics[0].partitions) == 200
        assert back.topics[0].partitions[199].replica_nodes == list(range(150))


def test_unknown_tagged_fields_are_skipped() -> None:
    # ApiVersions v3 request body with two unknown tags (7 and 300) in its tagged section
    body = b"\x04abc\x041.0" + b"\x02" + b"\x07\x02hi" + b"\xac\x02\x01z"
    header = b"\x00\x12\x00\x03\x00\x00\x00\x05\x00\x01c\x00"
    view = memoryview(header + body)
    h, off = codec.decode_request_header(view)
    req = codec.decode_request(18, 3, view, off)
    assert (req.client_software_name, req.client_software_version) == ("abc", "1.0")


def test_bad_varint_and_negative_lengths() -> None:
    header = b"\x00\x12\x00\x03\x00\x00\x00\x05\x00\x01c\x00"
    with pytest.raises(MalformedRequestError):  # six-byte varint
        codec.decode_request(18, 3, memoryview(header + b"\xff\xff\xff\xff\xff\x01"), len(header))
    # Produce v3: topic_data array with length -2
    body = b"\xff\xff" + b"\x00\x01\x00\x00\x03\xe8" + b"\xff\xff\xff\xfe"
    with pytest.raises(MalformedRequestError):
        codec.decode_request(0, 3, memoryview(body), 0)
    # array count far larger than the bytes left
    body = b"\xff\xff" + b"\x00\x01\x00\x00\x03\xe8" + b"\x7f\xff\xff\xff"
    with pytest.raises(MalformedRequestError):
        codec.decode_request(0, 3, memoryview(body), 0)
    # invalid UTF-8 in a string
    body = b"\x00\x02\xff\xfe" + b"\x00\x01\x00\x00\x03\xe8" + b"\x00\x00\x00\x00"
    with pytest.raises(MalformedRequestError):
        codec.decode_request(0, 3, memoryview(body), 0)


def test_trailing_bytes_are_allowed() -> None:
    req = messages.HeartbeatRequest(group_id="g", generation_id=3, member_id="m")
    frame = codec.encode_request(12, 3, 1, "c", req) + b"\x00garbage"
    view = memoryview(frame)[4:]
    _, off = codec.decode_request_header(view)
    assert codec.decode_request(12, 3, view, off) == req


def test_encode_errors_are_clear() -> None:
    bad = messages.HeartbeatRequest(group_id=None)  # type: ignore[arg-type]
    with pytest.raises(codec.EncodeError):
        codec.encode_request(12, 0, 1, None, bad)
    with pytest.raises(codec.EncodeError):
        codec.encode_response(12, 0, 1, messages.HeartbeatResponse(error_code=1 << 20))
    with pytest.raises(codec.UnsupportedVersionError):
        codec.encode_response(0, 10, 1, messages.ProduceResponse())


def test_non_ignorable_absent_field_is_refused() -> None:
    # MetadataRequest.allow_auto_topic_creation (v4+, default True) is not ignorable
    with pytest.raises(codec.EncodeError, match="allow_auto_topic_creation"):
        codec.encode_request(3, 3, 1, "c", messages.MetadataRequest(allow_auto_topic_creation=False))
    codec.encode_request(3, 3, 1, "c", messages.MetadataRequest(allow_auto_topic_creation=True))
    # FetchRequest.forgotten_topics_data (v7+) is not ignorable; rack_id (v11+) is
    F = messages.FetchRequest
    with pytest.raises(codec.EncodeError):
        codec.encode_request(1, 6, 1, "c", F(forgotten_topics_data=[F.ForgottenTopic(topic="t")]))
    codec.encode_request(1, 6, 1, "c", F(rack_id="rack-1"))
    # responses drop absent fields whatever they hold
    codec.encode_response(1, 4, 1, messages.FetchResponse(session_id=77))


def test_delete_records_v3_kip_1343_fields() -> None:
    R = messages.DeleteRecordsRequest
    req = R(topics=[R.DeleteRecordsTopic(name="t", partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=10)])], timeout_ms=100, leader_only=True)
    frame = codec.encode_request(21, 3, 1, "c", req)
    # v3 ends with timeout_ms, leader_only, empty tagged fields
    assert frame[-6:] == b"\x00\x00\x00\x64\x01\x00"
    view = memoryview(frame)[4:]
    _, off = codec.decode_request_header(view)
    assert codec.decode_request(21, 3, view, off).leader_only is True
    # v2 has no LeaderOnly: asking for it there is refused (KIP-1343: no silent downgrade)...
    with pytest.raises(codec.EncodeError, match="leader_only"):
        codec.encode_request(21, 2, 1, "c", req)
    # ...while the default is simply not sent, and decodes as False
    req.leader_only = False
    frame = codec.encode_request(21, 2, 1, "c", req)
    view = memoryview(frame)[4:]
    _, off = codec.decode_request_header(view)
    assert codec.decode_request(21, 2, view, off).leader_only is False
    assert frame[-5:] == b"\x00\x00\x00\x64\x00"
    P = messages.DeleteRecordsResponse.DeleteRecordsPartitionResult
    assert P().leader_log_start_offset == -1
    resp = messages.DeleteRecordsResponse(topics=[messages.DeleteRecordsResponse.DeleteRecordsTopicResult(
        name="t", partitions=[P(partition_index=0, low_watermark=5, leader_log_start_offset=10)])])
    frame = codec.encode_response(21, 3, 7, resp)
    # v3 body: throttle, 1 topic "t", 1 partition (index, low watermark, leader log start
    # offset, error code, tags), topic tags, top-level tags
    assert bytes(frame[4:]) == (
        (7).to_bytes(4, "big") + b"\x00" + b"\x00\x00\x00\x00" + b"\x02" + b"\x02t" + b"\x02"
        + b"\x00\x00\x00\x00" + (5).to_bytes(8, "big") + (10).to_bytes(8, "big") + b"\x00\x00"
        + b"\x00" + b"\x00" + b"\x00"
    )
    _, back = codec.decode_response(21, 2, memoryview(codec.encode_response(21, 2, 7, resp))[4:])
    assert back.topics[0].partitions[0].leader_log_start_offset == -1


def test_kip_253_counts_ride_in_private_tags() -> None:
    """Tag 10000 (and 10001) carry KIP-253's counts; at their default (-1) nothing is written,
    so what a Kafka client receives and sends is unchanged."""
    M = messages.MetadataResponse
    topic = M.MetadataResponseTopic(name="t", initial_partition_count=3, undeleted_partition_count=7)
    frame = codec.encode_response(3, 12, 1, M(topics=[topic]))
    # ... TopicAuthorizedOperations, then the topic's tagged section: 2 fields, tags 10000 and
    # 10001 as 2-byte varints, 4 bytes each.
    tags = b"\x02" + b"\x90\x4e\x04" + (3).to_bytes(4, "big") + b"\x91\x4e\x04" + (7).to_bytes(4, "big")
    assert tags in bytes(frame)
    _, back = codec.decode_response(3, 12, memoryview(frame)[4:])
    assert (back.topics[0].initial_partition_count, back.topics[0].undeleted_partition_count) == (3, 7)
    plain = codec.encode_response(3, 12, 1, M(topics=[M.MetadataResponseTopic(name="t")]))
    assert len(plain) == len(frame) - len(tags) + 1  # an empty tagged section instead

    P = messages.ProduceRequest
    request = P(acks=-1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", undeleted_partition_count=7)])
    view = memoryview(codec.encode_request(0, 9, 1, "c", request))[4:]
    _, off = codec.decode_request_header(view)
    assert codec.decode_request(0, 9, view, off).topic_data[0].undeleted_partition_count == 7
    # Only flexible versions have tagged fields: v8 cannot carry the count.
    with pytest.raises(codec.EncodeError, match="undeleted_partition_count"):
        codec.encode_request(0, 8, 1, "c", request)
