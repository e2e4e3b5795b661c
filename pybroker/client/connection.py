"""A client connection to one broker: framed requests, correlation ids, version negotiation.

Owns one TCP connection (asyncio streams are fine here: the client is not the broker's hot path),
the ApiVersions exchange on connect (ApiVersions v3 first; on UNSUPPORTED_VERSION retry with v0,
as librdkafka does), choosing for each request the highest version both sides support, and
matching responses to pending requests by correlation id.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import ApiVersionsRequest


class KafkaClientError(Exception):
    """A request that failed as a whole (connection, negotiation)."""


class UnsupportedVersionError(KafkaClientError):
    """The broker supports no version of this API that this client can send."""


class BrokerConnection:
    """A connection to one broker, usable by many concurrent requests."""

    def __init__(self, host: str, port: int, client_id: str = "pybroker-client") -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._read_task: asyncio.Task[None] | None = None

    async def connect(self, timeout: float = 10.0) -> None:
        """Connect and negotiate versions, within ``timeout`` seconds for both (a broker that
        accepts but never answers, e.g. a stopped process, fails here instead of hanging). A
        failed connect leaves nothing open."""
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
                self._read_task = asyncio.create_task(self._read_loop())
                await self._negotiate()
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
        if self._writer is None:
            raise KafkaClientError("not connected")
        self._writer.write(codec.encode_request(api_key, version, next(self._correlation), self.client_id, request))
        await self._writer.drain()

    async def _send(self, api_key: int, version: int, request: Any) -> Any:
        if self._writer is None:
            raise KafkaClientError("not connected")
        correlation_id = next(self._correlation)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, future)
        self._writer.write(codec.encode_request(api_key, version, correlation_id, self.client_id, request))
        await self._writer.drain()
        return await future

    async def _read_loop(self) -> None:
        assert self._reader is not None
        error: BaseException = KafkaClientError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                size = int.from_bytes(await self._reader.readexactly(4), "big")
                frame = memoryview(await self._reader.readexactly(size))
                correlation_id = int.from_bytes(frame[:4], "big", signed=True)
                api_key, version, future = self._pending.pop(correlation_id, (None, 0, None))
                if future is None or future.done():
                    continue
                try:
                    if api_key == ApiKey.API_VERSIONS and len(frame) >= 6 and int.from_bytes(frame[4:6], "big") == ErrorCode.UNSUPPORTED_VERSION:
                        version = 0  # the broker answers an unsupported ApiVersions in the v0 layout
                    future.set_result(codec.decode_response(api_key, version, frame)[1])
                except Exception as e:  # a response we cannot decode fails that request only
                    future.set_exception(KafkaClientError(f"undecodable {ApiKey(api_key).name} response: {e}"))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            error = KafkaClientError(f"connection to {self.host}:{self.port} lost: {e}")
        except asyncio.CancelledError:
            pass
        finally:
            for _, _, future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    async def close(self) -> None:
        if self._read_task is not None:
            self._read_task.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
            self._writer = None
