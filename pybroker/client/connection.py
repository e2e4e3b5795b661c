"""A client connection to one broker: framed requests, correlation ids, version negotiation.

Owns one TCP connection (TLS over it for SSL and SASL_SSL, the host name checked as the
`ClientSecurity`'s context says), the ApiVersions exchange on connect (ApiVersions v3 first; on
UNSUPPORTED_VERSION retry with v0, as librdkafka does), choosing for each request the highest
version both sides support, and matching responses to pending requests by correlation id.

On a SASL_PLAINTEXT or SASL_SSL connection (``security``), negotiation is followed by
authentication (`_authenticate_sasl`): SaslHandshake v1, then SaslAuthenticate rounds of the
mechanism's client (``pybroker.security.sasl_client``: PLAIN, SCRAM-SHA-256/512, the server's
signature verified). A failure raises `SaslAuthenticationFailedError`. When the broker gives a
session lifetime (KIP-368), the connection re-authenticates on the same socket at a random 85-95 %
of it, as Kafka's clients do: new requests wait until it is done (requests already sent are
answered first, in order, by the broker), and a failed re-authentication closes the connection.

A follower's fetches from its leader come through here, so responses are read as the broker reads
requests (`FrameReader`): a large response lands, in one copy from the socket, in a buffer of its
own, which the decoded response's records then point into (writable, so the follower's log
appends them in place).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Callable
from typing import Any

from pybroker.client.security import PLAINTEXT, ClientSecurity
from pybroker.common.errors import ErrorCode
from pybroker.network.framing import FrameReader
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from pybroker.security.sasl_client import SaslClientError, new_client

log = logging.getLogger(__name__)


class KafkaClientError(Exception):
    """A request that failed as a whole (connection, negotiation)."""


class UnsupportedVersionError(KafkaClientError):
    """The broker supports no version of this API that this client can send."""


class SaslAuthenticationFailedError(KafkaClientError):
    """SASL authentication failed: the broker refused (its error and message), or the exchange
    could not go on (e.g. the broker's SCRAM signature did not verify)."""

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(f"authentication failed: {message}")
        self.message = message
        self.error_code = error_code


# Kafka's clients re-authenticate at a random point in this part of the session lifetime.
REAUTH_WINDOW = (0.85, 0.95)
REAUTH_TIMEOUT_S = 30.0  # a re-authentication the broker does not answer closes the connection


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
        self._ready = asyncio.Event()  # cleared while re-authenticating: new requests wait
        self._ready.set()
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Future[None] | None = None
        self.session_lifetime_ms = 0  # the last one the broker gave (KIP-368); 0: none

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
                    await self._authenticate_sasl()
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

    async def _authenticate_sasl(self) -> None:
        """SaslHandshake v1 and SaslAuthenticate rounds with ``self.security``'s mechanism and
        credentials; then, if the broker set a session lifetime, the re-authentication timer."""
        security = self.security
        mechanism = security.sasl_mechanism or "GSSAPI"
        try:
            client = new_client(mechanism, security.sasl_username or "", security.sasl_password or "")
        except SaslClientError as e:
            raise SaslAuthenticationFailedError(str(e)) from None
        if self.version_for(ApiKey.SASL_HANDSHAKE, 1) < 1:
            raise SaslAuthenticationFailedError(f"broker {self.host}:{self.port} lacks SaslHandshake v1")
        authenticate_version = self.version_for(ApiKey.SASL_AUTHENTICATE)
        handshake = await self._send(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism), gated=False)
        if handshake.error_code != ErrorCode.NONE:
            error = ErrorCode(handshake.error_code)
            raise SaslAuthenticationFailedError(
                f"SASL mechanism {mechanism} handshake failed: {error.name} (the broker enables "
                f"{', '.join(handshake.mechanisms) or 'none'})", error)
        token: bytes | None = client.initial_response()
        lifetime_ms = 0
        while token is not None:
            response = await self._send(ApiKey.SASL_AUTHENTICATE, authenticate_version,
                                        SaslAuthenticateRequest(auth_bytes=token), gated=False)
            if response.error_code != ErrorCode.NONE:
                raise SaslAuthenticationFailedError(
                    response.error_message or ErrorCode(response.error_code).name, response.error_code)
            lifetime_ms = response.session_lifetime_ms or 0
            try:
                # SCRAM's salted password costs thousands of hashes: not on the event loop.
                token = await asyncio.to_thread(client.evaluate_challenge, bytes(response.auth_bytes))
            except SaslClientError as e:
                raise SaslAuthenticationFailedError(str(e)) from None
        self.session_lifetime_ms = lifetime_ms
        if lifetime_ms > 0:
            delay_s = lifetime_ms * random.uniform(*REAUTH_WINDOW) / 1000
            self._reauth_timer = asyncio.get_running_loop().call_later(delay_s, self._start_reauthentication)

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._channel is None or self._channel.closed:
            return
        self._ready.clear()  # requests from now on wait; those sent are answered first
        self._reauth_task = asyncio.ensure_future(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        try:
            async with asyncio.timeout(REAUTH_TIMEOUT_S):
                await self._authenticate_sasl()
        except Exception as e:
            log.warning("Re-authentication with %s:%d failed, closing the connection: %s", self.host, self.port, e)
            channel = self._channel
            if channel is not None and channel.transport is not None:
                channel.transport.abort()
        finally:
            self._ready.set()

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
        if not self._ready.is_set():
            await self._ready.wait()
        if self._channel is None:
            raise KafkaClientError("not connected")
        self._channel.write(codec.encode_request(api_key, version, next(self._correlation), self.client_id, request))
        await self._channel.drain()

    async def _send(self, api_key: int, version: int, request: Any, gated: bool = True) -> Any:
        """``gated``: wait while the connection re-authenticates (all but the SASL exchange)."""
        if gated and not self._ready.is_set():
            await self._ready.wait()
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
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            return
        api_key, version, future = pending
        if future.done():
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
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        reauth, self._reauth_task = self._reauth_task, None
        if reauth is not None and not reauth.done() and reauth is not asyncio.current_task():
            reauth.cancel()
        self._ready.set()
        channel, self._channel = self._channel, None
        if channel is not None and channel.transport is not None:
            channel.transport.close()  # after what is still buffered (acks=0 produce requests)
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await channel.lost
            except TimeoutError:
                channel.transport.abort()  # a peer that stopped reading must not hold the close
                await channel.lost
