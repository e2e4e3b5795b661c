"""A client connection to one broker: framed requests, correlation ids, version negotiation.

Owns one TCP connection (TLS over it for SSL and SASL_SSL, the host name checked as the
`ClientSecurity`'s context says), the ApiVersions exchange on connect (ApiVersions v3 first; on
UNSUPPORTED_VERSION retry with v0, as librdkafka does), choosing for each request the highest
version both sides support, and matching responses to pending requests by correlation id.

A follower's fetches from its leader come through here, so responses are read as the broker reads
requests (`FrameReader`): a large response lands, in one copy from the socket, in a buffer of its
own, which the decoded response's records then point into (writable, so the follower's log
appends them in place).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from pybroker.client.security import PLAINTEXT, ClientSecurity
from pybroker.network.framing import FrameReader
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import ApiVersionsRequest


class KafkaClientError(Exception):
    """A request that failed as a whole (connection, negotiation)."""


class UnsupportedVersionError(KafkaClientError):
    """The broker supports no version of this API that this client can send."""


# The largest response accepted (librdkafka's receive.message.max.bytes default); a larger size
# prefix is taken for a broken stream and ends the connection.
MAX_RESPONSE_SIZE = 100_000_000
CLOSE_TIMEOUT_S = 5.0  # for the write buffer to drain on close(), before the socket is aborted


class _Channel(FrameReader):
    """The socket of a `BrokerConnection`: response frames in, request bytes out with the
    transport's flow control."""

    def __init__(self, on_frame: Callable[[bytearray], None], on_lost: Callable[[BaseException | None], None]) -> None:
        super().__init__(MAX_RESPONSE_SIZE)
        self.transport: asyncio.Transport | None = None
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._writable: asyncio.Future[None] | None = None  # set while the transport is paused
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        if not self.lost.done():
            self.lost.set_result(None)
        self._on_lost(exc)

    def eof_received(self) -> bool:
        return False

    def frame_received(self, frame: bytearray) -> None:
        self._on_frame(frame)

    def frame_size_invalid(self, size: int) -> None:
        self.closed = True
        self._on_lost(KafkaClientError(f"response size {size} is outside 0..{self.max_frame_size}"))
        assert self.transport is not None
        self.transport.abort()

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def write(self, data: bytes | bytearray) -> None:
        if self.closed or self.transport is None:
            raise KafkaClientError("not connected")
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark. Every writer
        waits on the same future, shielded: one that is cancelled (its request timed out) must
        not cancel the others' wait."""
        if self._writable is not None:
            await asyncio.shield(self._writable)


class BrokerConnection:
    """A connection to one broker, usable by many concurrent requests."""

    def __init__(
        self, host: str, port: int, client_id: str = "pybroker-client", security: ClientSecurity = PLAINTEXT
    ) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._channel: _Channel | None = None
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}

    async def connect(self, timeout: float = 10.0) -> None:
        """Connect and negotiate versions, within ``timeout`` seconds for both (a broker that
        accepts but never answers, e.g. a stopped process, fails here instead of hanging). A
        failed connect leaves nothing open."""
        try:
            async with asyncio.timeout(timeout):
                tls = self.security.ssl_context if self.security.uses_tls else None
                if self.security.uses_tls and tls is None:
                    raise KafkaClientError(f"{self.security.security_protocol} needs an SSL context")
                _, self._channel = await asyncio.get_running_loop().create_connection(
                    lambda: _Channel(self._response_received, self._connection_lost), self.host, self.port,
                    ssl=tls, server_hostname=self.host if tls is not None else None,
                )
                await self._negotiate()
                if self.security.uses_sasl:
                    await self._authenticate()
        except BaseException:
            await self.close()
            raise

    async def _negotiate(self) -> None:
        request = ApiVersionsRequest(client_software_name="pybroker", client_software_version="0.1.0")
        response = await self._send(ApiKey.API_VERSIONS, 3, request)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = await self._send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        if response.error_code != ErrorCode.NONE:
            raise KafkaClientError(f"ApiVersions failed: {ErrorCode(response.error_code).name}")
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    async def _authenticate(self) -> None:
        """SASL: SaslHandshake then SaslAuthenticate with ``self.security``'s mechanism and
        credentials (the saslwire change fills this in)."""
        raise NotImplementedError("client-side SASL is not implemented yet")

    def version_for(self, api_key: int, max_wanted: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support (capped at ``max_wanted``)."""
        ours = codec.supported_versions(api_key)
        theirs = self.api_versions.get(api_key)
        high = min(ours[1], theirs[1] if theirs else -1, max_wanted if max_wanted is not None else ours[1])
        low = max(ours[0], theirs[0] if theirs else ours[0])
        if theirs is None or high < low:
            raise UnsupportedVersionError(
                f"{ApiKey(api_key).name}: broker {self.host}:{self.port} supports "
                f"{'none' if theirs is None else f'v{theirs[0]}-v{theirs[1]}'}, this client v{ours[0]}-v{ours[1]}"
            )
        return high

    async def send(self, api_key: int, request: Any, version: int | None = None, timeout: float = 30.0) -> Any:
        """Send ``request`` at ``version`` (default: the best common one) and await the response."""
        chosen = self.version_for(api_key) if version is None else version
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation of the
        # caller that coincides with the answer, and controllers and fetchers are stopped by it.
        async with asyncio.timeout(timeout):
            return await self._send(api_key, chosen, request)

    async def send_without_response(self, api_key: int, request: Any, version: int) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        if self._channel is None:
            raise KafkaClientError("not connected")
        self._channel.write(codec.encode_request(api_key, version, next(self._correlation), self.client_id, request))
        await self._channel.drain()

    async def _send(self, api_key: int, version: int, request: Any) -> Any:
        if self._channel is None:
            raise KafkaClientError("not connected")
        correlation_id = next(self._correlation)
        encoded = codec.encode_request(api_key, version, correlation_id, self.client_id, request)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._channel.write(encoded)
        self._pending[correlation_id] = (api_key, version, future)
        await self._channel.drain()
        return await future

    def _response_received(self, frame_buffer: bytearray) -> None:
        frame = memoryview(frame_buffer)
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        api_key, version, future = self._pending.pop(correlation_id, (None, 0, None))
        if future is None or future.done():
            return
        try:
            if api_key == ApiKey.API_VERSIONS and len(frame) >= 6 and int.from_bytes(frame[4:6], "big") == ErrorCode.UNSUPPORTED_VERSION:
                version = 0  # the broker answers an unsupported ApiVersions in the v0 layout
            future.set_result(codec.decode_response(api_key, version, frame)[1])
        except Exception as e:  # a response we cannot decode fails that request only
            future.set_exception(KafkaClientError(f"undecodable {ApiKey(api_key).name} response: {e}"))

    def _connection_lost(self, exc: BaseException | None) -> None:
        """Every request still waiting fails: the connection is gone."""
        if isinstance(exc, KafkaClientError):
            error = exc
        elif exc is None:
            error = KafkaClientError(f"connection to {self.host}:{self.port} closed")
        else:
            error = KafkaClientError(f"connection to {self.host}:{self.port} lost: {exc}")
        pending, self._pending = self._pending, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None and channel.transport is not None:
            channel.transport.close()  # after what is still buffered (acks=0 produce requests)
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await channel.lost
            except TimeoutError:
                channel.transport.abort()  # a peer that stopped reading must not hold the close
                await channel.lost
