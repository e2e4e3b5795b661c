"""The ``__consumer_offsets`` record formats and ``partitionFor`` (pure; no broker).

Expected bytes are built by hand from Kafka's schemas (OffsetCommitKey/Value,
GroupMetadataKey/Value, ConsumerProtocolSubscription), independently of the code under test.
"""

from __future__ import annotations

import struct

import pytest

from pybroker.protocol.consumer_protocol import decode_subscription
from pybroker.server.group.records import (
    GroupMetadataKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    RecordFormatError,
    decode_key,
    partition_for,
)


def subscription_topics(data: bytes) -> set[str]:
    return set(decode_subscription(data).topics)

# --- hand-built primitives (Kafka's non-flexible encoding) -------------------------------------


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode("utf-8")
    return i16(len(raw)) + raw


def b(v: bytes | None) -> bytes:
    return i32(-1) if v is None else i32(len(v)) + v


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


# --- partitionFor ----------------------------------------------------------------------------


@pytest.mark.parametrize("group,partitions,expected", [
    ("my-group", 50, 12),
    ("test-consumer-group", 50, 31),
    ("", 50, 0),                      # hashCode 0
    ("a", 50, 47),                    # hashCode 97
    ("ab", 50, 5),                    # 97 * 31 + 98 = 3105
    ("console-consumer-12345", 50, 6),
    ("my-group", 7, 1),
    ("test-consumer-group", 1, 0),
])
def test_partition_for_known_values(group, partitions, expected):
    assert partition_for(group, partitions) == expected


def test_partition_for_integer_min_value_hash_maps_to_zero():
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Kafka's Utils.abs maps it to 0
    # (Math.abs would stay negative).
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0


@pytest.mark.parametrize("group", ["été", "\U0001F600grp", "grüße-gruppe", "x" * 300, "negative-hash-zzzz"])
def test_partition_for_hashes_utf16_code_units(group):
    # Non-ASCII and supplementary characters (surrogate pairs) hash like Java does.
    h = java_string_hash(group)
    for n in (1, 7, 50, 64):
        assert partition_for(group, n) == abs(h) % n


def test_partition_for_negative_hash():
    assert java_string_hash("my-group") < 0
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50


# --- keys ------------------------------------------------------------------------------------


def test_offset_commit_key_bytes_and_round_trip():
    key = OffsetCommitKey("grp", "topic", 3)
    assert key.encode() == i16(1) + s("grp") + s("topic") + i32(3)
    assert decode_key(key.encode()) == key


def test_offset_commit_key_v0_is_read():
    assert decode_key(i16(0) + s("g") + s("t") + i32(7)) == OffsetCommitKey("g", "t", 7)


def test_group_metadata_key_bytes_and_round_trip():
    key = GroupMetadataKey("grp")
    assert key.encode() == i16(2) + s("grp")
    assert decode_key(key.encode()) == key


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 100])
def test_keys_of_other_record_kinds_are_ignored(version):
    # e.g. the new consumer protocol's ConsumerGroupMetadataKey (3) and friends.
    assert decode_key(i16(version) + s("grp")) is None


def test_unicode_key_round_trip():
    key = OffsetCommitKey("grüppe-😀", "tópic", 0)
    assert decode_key(key.encode()) == key


@pytest.mark.parametrize("data", [
    b"\x00",
    i16(1),
    i16(1) + s("g"),
    i16(1) + s("g") + s("t"),
    i16(1) + s("g") + s("t") + b"\x00\x00",
    i16(1) + i16(10) + b"abc",          # string longer than the data
    i16(2),
    i16(2) + i16(5) + b"ab",
])
def test_truncated_key_raises(data):
    with pytest.raises(RecordFormatError):
        decode_key(data)


@pytest.mark.parametrize("data", [
    i16(1) + s(None) + s("t") + i32(0),     # null group
    i16(2) + s(None),
    i16(1) + i16(2) + b"\xff\xfe" + s("t") + i32(0),  # invalid UTF-8
    i16(1) + i16(-5) + s("t") + i32(0),     # negative length other than -1
])
def test_invalid_key_raises(data):
    with pytest.raises(RecordFormatError):
        decode_key(data)


# --- offset commit values --------------------------------------------------------------------


def test_offset_value_v3_bytes_and_round_trip():
    value = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1_700_000_000_000)
    encoded = value.encode()
    assert encoded == i16(3) + i64(42) + i32(5) + s("meta") + i64(1_700_000_000_000)
    assert OffsetAndMetadata.decode(encoded) == value


def test_offset_value_with_expire_timestamp_is_v1():
    # OffsetCommit v2-v4's retention time: Kafka writes the v1 layout (no leader epoch).
    value = OffsetAndMetadata(offset=7, leader_epoch=9, metadata="", commit_timestamp=1000, expire_timestamp=61000)
    encoded = value.encode()
    assert encoded == i16(1) + i64(7) + s("") + i64(1000) + i64(61000)
    decoded = OffsetAndMetadata.decode(encoded)
    assert (decoded.offset, decoded.metadata, decoded.commit_timestamp, decoded.expire_timestamp) == (7, "", 1000, 61000)
    assert decoded.leader_epoch == -1  # v1 has no leader epoch


def test_offset_value_v0_and_v2_are_read():
    v0 = OffsetAndMetadata.decode(i16(0) + i64(10) + s("m0") + i64(123))
    assert v0 == OffsetAndMetadata(offset=10, leader_epoch=-1, metadata="m0", commit_timestamp=123)
    v2 = OffsetAndMetadata.decode(i16(2) + i64(11) + s("m2") + i64(456))
    assert v2 == OffsetAndMetadata(offset=11, leader_epoch=-1, metadata="m2", commit_timestamp=456)
    assert v2.expire_timestamp is None


def test_offset_value_v1_with_negative_expire_timestamp_has_none():
    decoded = OffsetAndMetadata.decode(i16(1) + i64(1) + s("") + i64(5) + i64(-1))
    assert decoded.expire_timestamp is None


def test_offset_value_null_metadata_reads_as_empty():
    assert OffsetAndMetadata.decode(i16(3) + i64(1) + i32(-1) + s(None) + i64(5)).metadata == ""


def test_offset_value_unicode_metadata_round_trip():
    value = OffsetAndMetadata(offset=1, metadata="métadonnées 😀", commit_timestamp=2)
    assert OffsetAndMetadata.decode(value.encode()) == value


def test_offset_value_trailing_bytes_are_ignored():
    # Kafka reads the fields it knows; later versions may append tagged data.
    value = OffsetAndMetadata(offset=1, commit_timestamp=2)
    assert OffsetAndMetadata.decode(value.encode() + b"\x00\x00") == value


@pytest.mark.parametrize("data", [
    b"",
    i16(3),
    i16(3) + i64(1),
    i16(3) + i64(1) + i32(0),
    i16(3) + i64(1) + i32(0) + s("m"),
    i16(3) + i64(1) + i32(0) + s("m") + b"\x00\x00\x00",
    i16(1) + i64(1) + s("") + i64(5),                    # v1 without its expire timestamp
    i16(4) + i64(1) + i32(0) + s("") + i64(5),           # unknown version
    i16(-1) + i64(1) + s("") + i64(5),
    i16(0) + i64(1) + i16(3) + b"\xc3\x28x" + i64(5),    # invalid UTF-8
])
def test_bad_offset_value_raises(data):
    with pytest.raises(RecordFormatError):
        OffsetAndMetadata.decode(data)


# --- group metadata values -------------------------------------------------------------------


def _member_v0(member_id: str, client_id: str, host: str, session: int, subscription: bytes, assignment: bytes) -> bytes:
    return s(member_id) + s(client_id) + s(host) + i32(session) + b(subscription) + b(assignment)


def _member_v1(member_id: str, client_id: str, host: str, rebalance: int, session: int,
               subscription: bytes, assignment: bytes) -> bytes:
    return s(member_id) + s(client_id) + s(host) + i32(rebalance) + i32(session) + b(subscription) + b(assignment)


def _member_v3(member_id: str, instance: str | None, client_id: str, host: str, rebalance: int, session: int,
               subscription: bytes, assignment: bytes) -> bytes:
    return (s(member_id) + s(instance) + s(client_id) + s(host) + i32(rebalance) + i32(session)
            + b(subscription) + b(assignment))


def test_group_value_v0_is_read():
    data = (i16(0) + s("consumer") + i32(3) + s("range") + s("m1") + i32(2)
            + _member_v0("m1", "c1", "/10.0.0.1", 10000, b"sub1", b"asg1")
            + _member_v0("m2", "c2", "/10.0.0.2", 20000, b"", b""))
    record = GroupRecord.decode(data)
    assert (record.protocol_type, record.generation_id, record.protocol_name, record.leader_id) == ("consumer", 3, "range", "m1")
    assert record.current_state_timestamp == -1  # v0 has none
    assert record.members == [
        # v0 has no rebalance timeout: it is the session timeout
        MemberRecord("m1", None, "c1", "/10.0.0.1", 10000, 10000, b"sub1", b"asg1"),
        MemberRecord("m2", None, "c2", "/10.0.0.2", 20000, 20000, b"", b""),
    ]


def test_group_value_v1_is_read_rebalance_timeout_first():
    data = (i16(1) + s("consumer") + i32(4) + s("roundrobin") + s("m1") + i32(1)
            + _member_v1("m1", "c1", "/h", 300000, 10000, b"s", b"a"))
    record = GroupRecord.decode(data)
    assert record.current_state_timestamp == -1
    assert record.members == [MemberRecord("m1", None, "c1", "/h", 300000, 10000, b"s", b"a")]


def test_group_value_v2_is_read_with_state_timestamp():
    data = (i16(2) + s("consumer") + i32(5) + s("range") + s("m1") + i64(1_650_000_000_000) + i32(1)
            + _member_v1("m1", "c1", "/h", 60000, 6000, b"s", b"a"))
    record = GroupRecord.decode(data)
    assert record.current_state_timestamp == 1_650_000_000_000
    assert record.members[0].rebalance_timeout_ms == 60000
    assert record.members[0].session_timeout_ms == 6000
    assert record.members[0].group_instance_id is None


def test_group_value_v3_is_read_with_static_members():
    data = (i16(3) + s("consumer") + i32(6) + s("range") + s("m2") + i64(77) + i32(2)
            + _member_v3("m1", None, "c1", "/h1", 1, 2, b"s1", b"a1")
            + _member_v3("m2", "instance-2", "c2", "/h2", 3, 4, b"s2", b"a2"))
    record = GroupRecord.decode(data)
    assert record.leader_id == "m2"
    assert record.members == [
        MemberRecord("m1", None, "c1", "/h1", 1, 2, b"s1", b"a1"),
        MemberRecord("m2", "instance-2", "c2", "/h2", 3, 4, b"s2", b"a2"),
    ]


def test_empty_group_value_with_null_protocol_and_leader():
    # What Kafka stores for a group that became Empty: no protocol, no leader, no members.
    data = i16(3) + s("consumer") + i32(8) + s(None) + s(None) + i64(99) + i32(0)
    record = GroupRecord.decode(data)
    assert (record.protocol_name, record.leader_id, record.members) == (None, None, [])
    assert record.encode() == data


def test_group_value_encodes_v3_and_round_trips():
    record = GroupRecord(
        protocol_type="consumer", generation_id=12, protocol_name="range", leader_id="m1",
        current_state_timestamp=1234,
        members=[
            MemberRecord("m1", "inst", "client", "/127.0.0.1", 45000, 10000, b"\x00\x00sub", b"assign"),
            MemberRecord("m2", None, "client", "/127.0.0.1", 300000, 45000, b"", b""),
        ],
    )
    encoded = record.encode()
    assert encoded == (
        i16(3) + s("consumer") + i32(12) + s("range") + s("m1") + i64(1234) + i32(2)
        + _member_v3("m1", "inst", "client", "/127.0.0.1", 45000, 10000, b"\x00\x00sub", b"assign")
        + _member_v3("m2", None, "client", "/127.0.0.1", 300000, 45000, b"", b"")
    )
    assert GroupRecord.decode(encoded) == record


def test_group_value_null_subscription_reads_as_empty():
    data = (i16(3) + s("consumer") + i32(1) + s("range") + s("m1") + i64(1) + i32(1)
            + s("m1") + s(None) + s("c") + s("/h") + i32(1) + i32(2) + b(None) + b(None))
    member = GroupRecord.decode(data).members[0]
    assert (member.subscription, member.assignment) == (b"", b"")


_GOOD_V3 = GroupRecord(
    "consumer", 1, "range", "m1", 5,
    [MemberRecord("m1", "i", "c", "/h", 1, 2, b"sub", b"asg")],
).encode()


@pytest.mark.parametrize("cut", [0, 1, 2, 5, 12, 20, 30, 40, len(_GOOD_V3) - 1])
def test_truncated_group_value_raises(cut):
    with pytest.raises(RecordFormatError):
        GroupRecord.decode(_GOOD_V3[:cut])


@pytest.mark.parametrize("data", [
    i16(4) + s("consumer") + i32(1) + s(None) + s(None) + i64(1) + i32(0),   # unknown version
    i16(-1) + s("consumer"),
    i16(3) + s(None) + i32(1) + s(None) + s(None) + i64(1) + i32(0),         # null protocol type
    i16(3) + s("consumer") + i32(1) + s(None) + s(None) + i64(1) + i32(-1),  # negative member count
    i16(3) + s("consumer") + i32(1) + s(None) + s(None) + i64(1) + i32(2**31 - 1),  # absurd count
    i16(3) + s("consumer") + i32(1) + s("range") + s("m") + i64(1) + i32(1)
    + s("m") + s(None) + s("c") + s("/h") + i32(1) + i32(2) + i32(100) + b"short",  # bytes past the end
])
def test_bad_group_value_raises(data):
    with pytest.raises(RecordFormatError):
        GroupRecord.decode(data)


def test_garbage_never_raises_anything_but_record_format_error():
    import random

    rng = random.Random(1234)
    samples = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64))) for _ in range(2000)]
    samples += [_GOOD_V3[:i] + bytes([rng.getrandbits(8)]) + _GOOD_V3[i + 1:] for i in range(len(_GOOD_V3))]
    for data in samples:
        for decode in (decode_key, OffsetAndMetadata.decode, GroupRecord.decode):
            try:
                decode(data)
            except RecordFormatError:
                pass
        try:
            decode_subscription(data)
        except ValueError:
            pass


# --- consumer protocol subscription ----------------------------------------------------------


def subscription_v0(topics: list[str], user_data: bytes | None = None) -> bytes:
    return i16(0) + i32(len(topics)) + b"".join(s(t) for t in topics) + b(user_data)


def test_subscription_topics_v0():
    assert subscription_topics(subscription_v0(["orders", "payments"])) == {"orders", "payments"}
    assert subscription_topics(subscription_v0([])) == set()
    assert subscription_topics(subscription_v0(["a", "a"], b"ud")) == {"a"}


def test_subscription_topics_later_versions_are_read_by_their_v0_prefix():
    # v1 adds owned partitions, v2 the generation, v3 the rack: all after v0's fields.
    owned = i32(1) + s("orders") + i32(2) + i32(0) + i32(1)
    v1 = i16(1) + i32(1) + s("orders") + b(None) + owned
    v3 = i16(3) + i32(2) + s("x") + s("y") + b(b"u") + owned + i32(7) + s("rack")
    assert subscription_topics(v1) == {"orders"}
    assert subscription_topics(v3) == {"x", "y"}


@pytest.mark.parametrize("data", [
    b"\x00",
    i16(0),
    i16(0) + i32(2) + s("only-one"),
    i16(0) + i32(-1),
    i16(0) + i32(1) + s(None),
    i16(-1) + i32(0),
    b"garbage!",
])
def test_bad_subscription_raises(data):
    with pytest.raises(ValueError):
        subscription_topics(data)
