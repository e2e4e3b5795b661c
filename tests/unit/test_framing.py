"""FrameReader cutting frames from a byte stream fed in arbitrary pieces: small frames from the
shared buffer, large ones in a buffer of their own, which is reused for the next large frame only
once nothing refers to the previous one."""

from __future__ import annotations

from typing import Any

from pybroker.network.framing import INITIAL_BUFFER, FrameReader


class Collect(FrameReader):
    def __init__(self, keep: bool) -> None:
        super().__init__(1 << 30)
        self.keep = keep
        self.frames: list[Any] = []  # memoryviews of kept frames
        self.ids: list[int] = []
        self.invalid: list[int] = []

    def frame_received(self, frame: bytearray) -> None:
        self.ids.append(id(frame))
        if self.keep:
            self.frames.append(memoryview(frame))

    def frame_size_invalid(self, size: int) -> None:
        self.invalid.append(size)
        self.closed = True


def feed(reader: FrameReader, data: bytes, piece: int) -> None:
    while data:
        buf = reader.get_buffer(-1)
        n = min(len(buf), len(data), piece)
        buf[:n] = data[:n]
        reader.buffer_updated(n)
        data = data[n:]


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_frames_of_every_size_arrive_whole_and_in_order() -> None:
    bodies = [b"a" * 10, b"b" * (INITIAL_BUFFER + 5), b"", b"c" * 3000, b"d" * (3 * INITIAL_BUFFER)]
    reader = Collect(keep=True)
    feed(reader, b"".join(frame(b) for b in bodies), piece=70_001)
    assert [bytes(f) for f in reader.frames] == bodies


def test_a_released_large_frame_buffer_is_reused_and_a_held_one_is_not() -> None:
    sizes = [1_000_000, 1_000_500, 999_000, 1_200_000]
    released = Collect(keep=False)
    feed(released, b"".join(frame(bytes([i]) * n) for i, n in enumerate(sizes)), piece=1 << 20)
    assert len(set(released.ids)) == 1

    held = Collect(keep=True)
    feed(held, b"".join(frame(bytes([i + 1]) * n) for i, n in enumerate(sizes)), piece=1 << 20)
    assert len(set(held.ids)) == len(sizes)
    assert [bytes(f) for f in held.frames] == [bytes([i + 1]) * n for i, n in enumerate(sizes)]


def test_a_size_prefix_out_of_range_is_reported() -> None:
    reader = Collect(keep=False)
    reader.max_frame_size = 100
    feed(reader, frame(b"x" * 101), piece=1000)
    assert reader.invalid == [101] and reader.ids == []
