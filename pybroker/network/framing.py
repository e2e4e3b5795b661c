"""Kafka's length-prefixed frames read from a socket: the receive side of both ends of a connection.

Owns the receive buffer of an asyncio ``BufferedProtocol``. The socket reads straight into a
reusable buffer and frames are cut from it in arrival order; a frame too large for it gets a
buffer of its own, sized from its length prefix once that prefix is checked against the limit,
and the socket then reads the rest of the frame directly into it. Every byte is copied once from
the kernel, whatever the frame's size: a follower's 1 MiB fetch responses and a producer's large
batches arrive in the buffer that is then handed on, writable, to the log. The large-frame buffer
is reused for the next large frame once nothing refers to it any more.

Two users: the broker's `KafkaConnection` (requests) and the client's `BrokerConnection`
(responses, among them a follower's fetches).
"""

from __future__ import annotations

import asyncio
import sys

INITIAL_BUFFER = 256 * 1024


class FrameReader(asyncio.BufferedProtocol):
    """Cuts frames out of the byte stream and passes each one, without its size prefix, to
    ``frame_received``; a size prefix outside ``0..max_frame_size`` goes to ``frame_size_invalid``
    instead (the connection is then expected to close)."""

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self.closed = False
        self._buffer = bytearray(INITIAL_BUFFER)
        self._start = 0  # first unconsumed byte
        self._end = 0  # end of received bytes
        self._large: bytearray | None = None  # a frame bigger than the buffer, being filled
        self._large_filled = 0
        self._spare: bytearray | None = None  # the last large frame, reused once nothing holds it

    def frame_received(self, frame: bytearray) -> None:
        raise NotImplementedError

    def frame_size_invalid(self, size: int) -> None:
        raise NotImplementedError

    # --- asyncio callbacks ---------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._end == len(self._buffer):
            self._compact()
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled < len(self._large):
                return
            frame, self._large = self._large, None
            self.frame_received(frame)
        else:
            self._end += nbytes
        self._cut_frames()

    # --- framing -------------------------------------------------------------------------------

    def _cut_frames(self) -> None:
        buffer = self._buffer
        while not self.closed and self._large is None:
            available = self._end - self._start
            if available < 4:
                break
            size = int.from_bytes(buffer[self._start : self._start + 4], "big", signed=True)
            if size < 0 or size > self.max_frame_size:
                self.frame_size_invalid(size)
                return
            body_start = self._start + 4
            if available - 4 >= size:
                frame = buffer[body_start : body_start + size]
                self._start = body_start + size
                self.frame_received(frame)
                continue
            if size > len(buffer) - body_start:
                # Receive the rest of this frame straight into a buffer of its own.
                large = self._large_buffer(size)
                have = self._end - body_start
                large[:have] = buffer[body_start : self._end]
                self._large, self._large_filled = large, have
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _large_buffer(self, size: int) -> bytearray:
        """A buffer of ``size`` bytes for a large frame: the previous one resized, when nothing
        refers to it any more (no frame, memoryview or decoded message: only ``self._spare``,
        ``spare`` and the argument of ``getrefcount``), else a new one. Large frames come one
        after another (a producer's batches, a follower's fetches), and a fresh buffer each
        time costs zeroing and page faults for every byte."""
        spare = self._spare
        if spare is not None and sys.getrefcount(spare) == 3:
            if len(spare) > size:
                del spare[size:]
            elif len(spare) < size:
                spare.extend(bytes(size - len(spare)))
            return spare
        self._spare = bytearray(size)
        return self._spare

    def _compact(self) -> None:
        remaining = self._end - self._start
        if self._start:
            self._buffer[:remaining] = self._buffer[self._start : self._end]
        self._start, self._end = 0, remaining
        if remaining == len(self._buffer):
            self._buffer.extend(bytes(len(self._buffer)))
