"""Request frames captured from real clients (aiokafka, kafka-python, confluent-kafka/librdkafka,
kcat) by ``tests/tools/capture.py``: each must decode, re-encode to the identical bytes, and
every truncation of it must fail with MalformedRequestError and nothing else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.protocol import codec
from pybroker.protocol.codec import MalformedRequestError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FRAMES = sorted(GOLDEN.glob("*/*.bin"))


def frame_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def test_captures_present() -> None:
    clients = {p.parent.name for p in FRAMES}
    assert {"aiokafka", "kafka-python", "confluent-kafka", "kcat"} <= clients


@pytest.mark.parametrize("path", FRAMES, ids=frame_id)
def test_captured_frame_roundtrips(path: Path) -> None:
    frame = path.read_bytes()
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    view = memoryview(bytearray(frame))[4:]
    header, offset = codec.decode_request_header(view)
    name, version = path.stem.rsplit("_", 2)[:2]
    assert f"v{header.api_version}" == version
    if offset < 0:
        # a version we do not implement (kafka-python opens with ApiVersions v4): the header's
        # fixed part is still readable so the server can answer UNSUPPORTED_VERSION
        lo, hi = codec.supported_versions(header.api_key)
        assert not lo <= header.api_version <= hi
        return
    request = codec.decode_request(header.api_key, header.api_version, view, offset)
    again = codec.encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, request
    )
    assert bytes(again) == frame


@pytest.mark.parametrize("path", FRAMES, ids=frame_id)
def test_captured_frame_truncations(path: Path) -> None:
    body = path.read_bytes()[4:]
    header, offset = codec.decode_request_header(memoryview(body))
    if offset < 0:
        return
    for cut in range(len(body)):
        view = memoryview(bytearray(body[:cut]))
        with pytest.raises(MalformedRequestError):
            h, off = codec.decode_request_header(view)
            codec.decode_request(h.api_key, h.api_version, view, off)


def test_produce_records_are_views_into_the_frame() -> None:
    for path in GOLDEN.glob("*/Produce_v*_0.bin"):
        frame = bytearray(path.read_bytes())
        view = memoryview(frame)[4:]
        header, offset = codec.decode_request_header(view)
        request = codec.decode_request(header.api_key, header.api_version, view, offset)
        records = request.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and not records.readonly
        assert records[16] == 2  # magic byte of a v2 record batch
