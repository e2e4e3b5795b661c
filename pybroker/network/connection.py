"""One client connection: Kafka's requests in, replies out in request order.

Owns, over the frames that `FrameReader` cuts from the socket: handing each frame to the request
dispatcher in arrival order, and writing responses back **in request order** however they
complete: replies ready at the end of a read are written with one ``writelines`` call.
Pipelining is unbounded on the client side but bounded here: reading pauses while too many
replies are pending, while the transport's write buffer is full, or while a log region is only
partly sent.

A reply may be a `FrameWithRegions` (a Fetch response whose records are left in the log): its
bytes go through the transport and its log regions straight from the file to the socket with
``sendfile``, as Kafka's zero-copy fetch does. A region waits until the transport has nothing
buffered (so bytes stay in order); when the socket takes only part of it, the rest, and every
reply after it, waits until the socket is writable again, and ``sendfile`` goes on from there:
like Kafka, which mutes a channel until its send is complete, nothing is read into memory to
finish a region. (Over TLS a region is read and written through the transport.)

It knows nothing of Kafka's APIs: the dispatcher returns, per frame, the encoded reply, a future
of it, or None (no reply, e.g. Produce with acks=0). A future's reply is written from its done
callback, which asyncio runs a loop turn after the future completes: frames that other
connections read in that turn are answered first. Whoever completes a reply may call
`reply_done` at once to have it written in that step; the dispatcher does for the answers a
coordinator gives through a callback (`RequestContext.responded`), so that, as in Kafka, a group
leader's SyncGroup answer leaves before any request handled after the group's write is answered.

A client over its quota is throttled (`throttle`, KIP-219): the connection reads no more frames
for that long (frames already read wait, in order) while replies owed are still written.

On a SASL listener an `Authenticator` (``pybroker.network.sasl_authenticator``) stands in front of the
dispatcher: every frame goes to it first, and it answers like the dispatcher, or says `FORWARD`
(pass the frame to the dispatcher), or raises `CloseConnection`. It detaches itself
(``connection.authenticator = None``) once nothing more is to be checked. For Kafka's delayed close
after a failed authentication the connection offers `finish`: read nothing more, write every reply
owed, then close.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, TypeGuard

from pybroker._native import LogRegion
from pybroker.network.framing import FrameReader
from pybroker.protocol.codec import FrameWithRegions
from pybroker.security.principal import ANONYMOUS, KafkaPrincipal, java_host_address

log = logging.getLogger(__name__)

_MAX_PENDING = 1000  # replies owed before reading pauses

# What the connection still has to write, in order: replies, or the parts of one after a region
# that the socket did not take whole.
_Output = bytes | bytearray | memoryview | FrameWithRegions | LogRegion


def _only_bytes(out: list[_Output]) -> TypeGuard[list[bytes | bytearray | memoryview]]:
    """No reply in ``out`` has a log region: the transport writes them all."""
    return not any(item.__class__ is FrameWithRegions or item.__class__ is LogRegion for item in out)


class CloseConnection(Exception):
    """Raised by the dispatcher when the connection must be closed (Kafka closes, not errors)."""


class Dispatcher(Protocol):
    def __call__(self, frame: bytearray, connection: KafkaConnection) -> Any: ...


#: What an `Authenticator` returns for a frame that the dispatcher is to handle.
FORWARD: Any = object()


class Authenticator(Protocol):
    def frame_received(self, frame: bytearray) -> Any:
        """A reply as the dispatcher gives one (bytes, a future, None), or `FORWARD`."""
        ...


class KafkaConnection(FrameReader):
    """Frames in, ordered replies out, for one socket."""

    def __init__(
        self,
        dispatch: Dispatcher,
        max_request_size: int,
        on_close: Callable[[KafkaConnection], None] | None = None,
        listener_name: str = "PLAINTEXT",
        security_protocol: str = "PLAINTEXT",
        tls_principal: Callable[[bytes | None], KafkaPrincipal] | None = None,
    ) -> None:
        super().__init__(max_request_size)
        self._dispatch = dispatch
        self._on_close = on_close
        self._pending: deque[Any] = deque()  # replies owed, in request order (bytes or futures)
        self._out: list[_Output] = []
        self._socket_fd: int | None = None  # for sendfile; None when the transport wraps the socket
        self._region: LogRegion | None = None  # being sent, the socket took part of it
        self._region_sent = 0
        self._writable_fd: int | None = None  # a dup of the socket, watched while a region waits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading_paused = False
        self._writing_paused = False
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "/"
        self.attributes: dict[str, Any] = {}  # per-connection state for handlers
        self.listener_name = listener_name  # the listener it arrived on (client-facing answers use it)
        self.security_protocol = security_protocol
        self.principal: KafkaPrincipal = ANONYMOUS  # set by TLS client certificates and SASL
        self.client_address = ""  # Java's InetAddress.getHostAddress form, matched against ACL hosts
        self._tls_principal = tls_principal  # SSL listeners: the principal of a client certificate
        self.authenticator: Authenticator | None = None  # SASL listeners: sees every frame first
        self._finishing = False  # `finish` was called: close once every reply owed is written
        self._muted_until: float | None = None  # throttled (monotonic ms): frames wait in _held
        self._mute_timer: Any = None
        self._held: deque[bytearray] = deque()

    # --- asyncio callbacks ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = f"/{peer[0]}" if peer else "/"  # how Kafka shows a client's address
        self.client_address = java_host_address(peer[0]) if peer else ""
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self._socket_fd = sock.fileno()
        if self._tls_principal is not None:
            self._principal_from_certificate(transport)

    def _principal_from_certificate(self, transport: asyncio.BaseTransport) -> None:
        """SSL listeners: the principal of the client certificate (the TLS handshake is complete
        when asyncio calls connection_made); a DN that no mapping rule applies to ends the
        connection, as Kafka fails its authentication."""
        assert self._tls_principal is not None
        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        try:
            self.principal = self._tls_principal(certificate)
        except Exception as e:  # NoMatchingRule, or a certificate that cannot be read
            log.warning("Closing connection from %s: no principal for its client certificate: %s", self.peer, e)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None
        self._held.clear()
        self._stop_watching_writable()
        for item in self._pending:
            if isinstance(item, asyncio.Future):
                item.cancel()
                _discard(item)
        self._pending.clear()
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def buffer_updated(self, nbytes: int) -> None:
        super().buffer_updated(nbytes)
        self._flush()

    def eof_received(self) -> bool:
        return False

    # --- requests ------------------------------------------------------------------------------

    def frame_size_invalid(self, size: int) -> None:
        log.warning(
            "Closing connection from %s: frame size %d is outside 0..%d (%s)", self.peer, size, self.max_frame_size,
            "socket.request.max.bytes" if self.authenticator is None else "the authenticator's limit",
        )
        self.close()

    def frame_received(self, frame: bytearray) -> None:
        if self._finishing:
            return
        if self._muted_until is not None:
            self._held.append(frame)  # read with the frame that got throttled: handled after
            return
        try:
            authenticator = self.authenticator
            reply = FORWARD if authenticator is None else authenticator.frame_received(frame)
            if reply is FORWARD:
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
            reply.add_done_callback(self.reply_done)
            self._update_reading()
        elif self._pending:
            self._pending.append(reply)
        else:
            self._out.append(reply)

    # --- throttling (client quotas) ------------------------------------------------------------

    def throttle(self, delay_ms: float, scheduler: Any, now_ms: float) -> None:
        """Kafka's channel muting for a quota violation: read and handle nothing more from this
        client for ``delay_ms`` from ``now_ms`` (a later end extends it), timed by ``scheduler``
        (``pybroker.scheduler.Scheduler.call_later``; ``now_ms`` is its clock's monotonic ms)."""
        if self.closed or delay_ms <= 0:
            return
        until = now_ms + delay_ms
        if self._muted_until is not None and self._muted_until >= until:
            return
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._muted_until = until
        self._mute_timer = scheduler.call_later(delay_ms, self._end_throttle)
        self._update_reading()

    @property
    def throttled(self) -> bool:
        return self._muted_until is not None

    def _end_throttle(self) -> None:
        self._muted_until = None
        self._mute_timer = None
        held = self._held
        while held and self._muted_until is None and not self.closed:
            self.frame_received(held.popleft())
        self._flush()
        self._update_reading()

    # --- replies -------------------------------------------------------------------------------

    def reply_done(self, future: asyncio.Future[Any]) -> None:
        """``future``, a reply owed, is done: write every reply now ready, in request order. Each
        reply future's done callback; may be called earlier, by what completed it (a second call
        finds nothing more to write)."""
        if self.closed:
            _discard(future)
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

    def finish(self) -> None:
        """Read nothing more; close once every reply owed so far (and any returned for the frame
        being handled) is written (Kafka's close after a failed authentication)."""
        self._finishing = True
        if self.transport is not None and not self.closed and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _flush(self) -> None:
        if self._pending:
            self._collect_ready()
        if self._out and self.transport is not None and not self.closed and self._region is None:
            out, self._out = self._out, []
            if not _only_bytes(out):
                self._write_with_regions(out)
            elif len(out) == 1:
                self.transport.write(out[0])
            else:
                self.transport.writelines(out)
        if self._finishing and not self._pending and not self._out and self._region is None:
            self.close()  # after what the transport still buffers

    def _write_with_regions(self, out: list[_Output]) -> None:
        """Write in order: bytes in as few transport writes as possible, each log region sent
        from its file in between. A region the socket does not take whole holds back what
        follows it until the socket drains."""
        assert self.transport is not None
        chunks: list[Any] = []
        for i, item in enumerate(out):
            parts: list[Any] = item.parts if item.__class__ is FrameWithRegions else [item]
            for j, part in enumerate(parts):
                if part.__class__ is not LogRegion:
                    chunks.append(part)
                    continue
                if chunks:
                    self.transport.writelines(chunks)
                    chunks = []
                self._send_region(part)
                if self.closed:
                    return
                if self._region is not None:
                    self._out[:0] = [*parts[j + 1 :], *out[i + 1 :]]
                    self._update_reading()
                    return
        if chunks:
            self.transport.writelines(chunks)

    def _send_region(self, region: LogRegion) -> None:
        """Send ``region`` with sendfile once the transport has nothing buffered; whatever the
        socket does not take now is sent when it is writable again (``self._region`` is set
        until then). Over TLS the region is read and written through the transport."""
        assert self.transport is not None
        if self._socket_fd is None:
            try:
                data = region.read()
            except OSError as e:
                self._region_failed(region, e)
                return
            self.transport.write(data)
            return
        self._region, self._region_sent = region, 0
        self._continue_region()

    def _continue_region(self) -> None:
        region = self._region
        assert region is not None and self.transport is not None and self._socket_fd is not None
        if not self.transport.get_write_buffer_size():
            try:
                self._region_sent = region.send_to(self._socket_fd, self._region_sent)
            except OSError as e:
                self._region_failed(region, e)
                return
            if self._region_sent == len(region):
                self._region = None
                self._stop_watching_writable()
                return
        self._watch_writable()

    def _on_writable(self) -> None:
        if self.closed or self._region is None:
            self._stop_watching_writable()
            return
        self._continue_region()
        if self._region is None and not self.closed:
            self._flush()
            self._update_reading()

    def _watch_writable(self) -> None:
        """Be called back when the socket can take more. The transport owns the socket's own
        descriptor in the event loop, so a duplicate of it is watched (epoll keys on both). If
        that cannot be set up (no descriptor left), the rest of the region goes through the
        transport instead."""
        if self._writable_fd is not None or self._socket_fd is None:
            return
        self._loop = asyncio.get_running_loop()
        try:
            self._writable_fd = os.dup(self._socket_fd)
            self._loop.add_writer(self._writable_fd, self._on_writable)
        except OSError as e:
            log.warning("Connection from %s: cannot watch its socket (%s); buffering the rest of a reply", self.peer, e)
            self._stop_watching_writable()
            region, self._region = self._region, None
            assert region is not None and self.transport is not None
            try:
                self.transport.write(region.read(self._region_sent))
            except OSError as read_error:
                self._region_failed(region, read_error)

    def _stop_watching_writable(self) -> None:
        if self._writable_fd is not None:
            fd, self._writable_fd = self._writable_fd, None
            if self._loop is not None:
                self._loop.remove_writer(fd)
            os.close(fd)

    def _region_failed(self, region: LogRegion, error: OSError) -> None:
        # The peer went away, or the log was truncated under the region: the frame cannot be
        # completed, so the connection ends (as Kafka ends it).
        level = logging.INFO if isinstance(error, ConnectionError) else logging.WARNING
        log.log(level, "Closing connection from %s: cannot send %r: %s", self.peer, region, error)
        self._region = None
        self.close()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = (self._writing_paused or self._region is not None or self._finishing
                        or len(self._pending) >= _MAX_PENDING or self._muted_until is not None)
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self._stop_watching_writable()
            self.transport.close()


def _discard(reply: asyncio.Future[Any]) -> None:
    """A reply owed to a connection that is gone: its outcome, an error too (a request that
    failed while the broker shut down), is read and dropped, so asyncio does not report it as
    never retrieved."""
    if reply.done() and not reply.cancelled():
        error = reply.exception()
        if error is not None:
            log.debug("A request of a closed connection failed: %r", error)
