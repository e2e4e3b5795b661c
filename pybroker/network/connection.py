"""One client connection: Kafka's length-prefixed frames over asyncio ``BufferedProtocol``.

Owns reading (the socket reads straight into a reusable buffer; a frame too large for it gets a
buffer of its own, sized from its length prefix after that prefix is checked against
``socket.request.max.bytes``), cutting frames, handing each frame to the request dispatcher in
arrival order, and writing responses back **in request order** however they complete: replies
ready at the end of a read are written with one ``writelines`` call. Pipelining is unbounded on
the client side but bounded here: reading pauses while too many replies are pending or the
transport's write buffer is full.

A reply may be a `FrameWithRegions` (a Fetch response whose records are left in the log): its
bytes go through the transport and its log regions straight from the file to the socket with
``sendfile``, as Kafka's zero-copy fetch does, whenever the transport has nothing buffered
(otherwise, or for the unsent rest after the socket fills up, the region is read and buffered).

It knows nothing of Kafka's APIs: the dispatcher returns, per frame, the encoded reply, a future
of it, or None (no reply, e.g. Produce with acks=0).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from pybroker._native import LogRegion
from pybroker.protocol.codec import FrameWithRegions

log = logging.getLogger(__name__)

_INITIAL_BUFFER = 256 * 1024
_MAX_PENDING = 1000  # replies owed before reading pauses


class CloseConnection(Exception):
    """Raised by the dispatcher when the connection must be closed (Kafka closes, not errors)."""


class Dispatcher(Protocol):
    def __call__(self, frame: bytearray, connection: KafkaConnection) -> Any: ...


class KafkaConnection(asyncio.BufferedProtocol):
    """Frames in, ordered replies out, for one socket."""

    def __init__(
        self,
        dispatch: Dispatcher,
        max_request_size: int,
        on_close: Callable[[KafkaConnection], None] | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._max_request_size = max_request_size
        self._on_close = on_close
        self._buffer = bytearray(_INITIAL_BUFFER)
        self._start = 0  # first unconsumed byte
        self._end = 0  # end of received bytes
        self._large: bytearray | None = None  # a frame bigger than the buffer, being filled
        self._large_filled = 0
        self._pending: deque[Any] = deque()  # replies owed, in request order (bytes or futures)
        self._out: list[bytes | bytearray | FrameWithRegions] = []
        self._socket_fd: int | None = None  # for sendfile; None when the transport wraps the socket
        self._reading_paused = False
        self._writing_paused = False
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "/"
        self.closed = False
        self.attributes: dict[str, Any] = {}  # per-connection state for handlers (e.g. principal)

    # --- asyncio callbacks ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = f"/{peer[0]}" if peer else "/"  # how Kafka shows a client's address
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self._socket_fd = sock.fileno()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for item in self._pending:
            if isinstance(item, asyncio.Future):
                item.cancel()
        self._pending.clear()
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

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
            self._submit(frame)
        else:
            self._end += nbytes
        self._cut_frames()
        self._flush()

    def eof_received(self) -> bool:
        return False

    # --- framing -------------------------------------------------------------------------------

    def _cut_frames(self) -> None:
        buffer = self._buffer
        while not self.closed and self._large is None:
            available = self._end - self._start
            if available < 4:
                break
            size = int.from_bytes(buffer[self._start : self._start + 4], "big", signed=True)
            if size < 0 or size > self._max_request_size:
                log.warning(
                    "Closing connection from %s: frame size %d is outside 0..%d (socket.request.max.bytes)",
                    self.peer, size, self._max_request_size,
                )
                self.close()
                return
            body_start = self._start + 4
            if available - 4 >= size:
                frame = buffer[body_start : body_start + size]
                self._start = body_start + size
                self._submit(frame)
                continue
            if size > len(buffer) - body_start:
                # Receive the rest of this frame straight into a buffer of its own.
                large = bytearray(size)
                have = self._end - body_start
                large[:have] = buffer[body_start : self._end]
                self._large, self._large_filled = large, have
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _compact(self) -> None:
        remaining = self._end - self._start
        if self._start:
            self._buffer[:remaining] = self._buffer[self._start : self._end]
        self._start, self._end = 0, remaining
        if remaining == len(self._buffer):
            self._buffer.extend(bytes(len(self._buffer)))

    def _submit(self, frame: bytearray) -> None:
        try:
            reply = self._dispatch(frame, self)
        except CloseConnection as e:
            log.warning("Closing connection from %s: %s", self.peer, e)
            self.close()
            return
        except Exception:
            log.exception("Closing connection from %s: request handling failed", self.peer)
            self.close()
            return
        if reply is None:
            return
        if isinstance(reply, asyncio.Future):
            if not self._pending and reply.done() and not reply.cancelled() and reply.exception() is None:
                result = reply.result()
                if result is not None:
                    self._out.append(result)
                return
            self._pending.append(reply)
            reply.add_done_callback(self._reply_done)
            self._update_reading()
        elif self._pending:
            self._pending.append(reply)
        else:
            self._out.append(reply)

    # --- replies -------------------------------------------------------------------------------

    def _reply_done(self, _future: asyncio.Future[Any]) -> None:
        if self.closed:
            return
        self._collect_ready()
        self._flush()
        self._update_reading()

    def _collect_ready(self) -> None:
        pending = self._pending
        while pending:
            head = pending[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    return
                pending.popleft()
                if head.cancelled():
                    self.close()
                    return
                error = head.exception()
                if error is not None:
                    if isinstance(error, CloseConnection):
                        log.warning("Closing connection from %s: %s", self.peer, error)
                    else:
                        log.error("Closing connection from %s: request failed", self.peer, exc_info=error)
                    self.close()
                    return
                result = head.result()
                if result is not None:
                    self._out.append(result)
            else:
                self._out.append(pending.popleft())

    def _flush(self) -> None:
        if self._pending:
            self._collect_ready()
        if self._out and self.transport is not None and not self.closed:
            out, self._out = self._out, []
            if any(item.__class__ is FrameWithRegions for item in out):
                self._write_with_regions(out)
            elif len(out) == 1:
                self.transport.write(out[0])
            else:
                self.transport.writelines(out)

    def _write_with_regions(self, out: list[bytes | bytearray | FrameWithRegions]) -> None:
        """Write replies in order: bytes in as few transport writes as possible, each log region
        sent from its file in between."""
        assert self.transport is not None
        chunks: list[Any] = []
        for item in out:
            if item.__class__ is not FrameWithRegions:
                chunks.append(item)
                continue
            for part in item.parts:  # type: ignore[union-attr]
                if part.__class__ is not LogRegion:
                    chunks.append(part)
                    continue
                if chunks:
                    self.transport.writelines(chunks)
                    chunks = []
                self._send_region(part)
                if self.closed:
                    return
        if chunks:
            self.transport.writelines(chunks)

    def _send_region(self, region: LogRegion) -> None:
        """sendfile while the transport has nothing buffered (so bytes stay in order); the part the
        socket did not take is read from the file and buffered by the transport."""
        assert self.transport is not None
        sent = 0
        try:
            if self._socket_fd is not None and not self.transport.get_write_buffer_size():
                sent = region.send_to(self._socket_fd, 0)
                if sent == len(region):
                    return
            rest = region.read(sent)
        except OSError as e:
            # The peer went away, or the log was truncated under the region: the frame cannot be
            # completed, so the connection ends (as Kafka ends it).
            level = logging.INFO if isinstance(e, ConnectionError) else logging.WARNING
            log.log(level, "Closing connection from %s: cannot send %r: %s", self.peer, region, e)
            self.close()
            return
        self.transport.write(rest)

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = self._writing_paused or len(self._pending) >= _MAX_PENDING
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()
