"""Routes a request frame to its API handler and encodes the reply (Kafka's ``KafkaApis`` entry).

Owns the per-frame pipeline: decode the header, check the API and version against the handler
registry (an unknown ApiVersions version gets error 35 in the v0 layout so clients retry lower;
anything else unsupported closes the connection, as Kafka does), decode the body (malformed →
close with one log line), call the handler, and encode its response — now, or when its future
completes. Returns to the connection the encoded frame, a future of it, or None.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pybroker.network.connection import CloseConnection, KafkaConnection
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.server.apis import HANDLERS
from pybroker.server.request_context import RequestContext

if TYPE_CHECKING:
    from pybroker.server.broker import Broker

log = logging.getLogger(__name__)


def supported_api_versions() -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every registered handler, by key."""
    return sorted((key, module.VERSIONS[0], module.VERSIONS[1]) for key, module in HANDLERS.items())


class RequestDispatcher:
    """Turns request frames into response frames for one broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def __call__(self, frame: bytearray, connection: KafkaConnection) -> Any:
        view = memoryview(frame)
        try:
            header, body_offset = codec.decode_request_header(view)
        except codec.MalformedRequestError as e:
            raise CloseConnection(f"malformed request header ({e})") from None
        api_key, version = header.api_key, header.api_version
        handler = HANDLERS.get(api_key)
        if handler is None or not handler.VERSIONS[0] <= version <= handler.VERSIONS[1] or body_offset < 0:
            if api_key == ApiKey.API_VERSIONS:
                return codec.encode_api_versions_error_v0(header.correlation_id, supported_api_versions())
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"key {api_key}"
            raise CloseConnection(f"unsupported API {name} version {version}")
        try:
            request = codec.decode_request(api_key, version, view, body_offset)
        except codec.MalformedRequestError as e:
            raise CloseConnection(f"malformed {ApiKey(api_key).name} v{version} request ({e})") from None
        ctx = RequestContext(self.broker, header, connection)
        response = handler.handle(ctx, request)
        if response is None:
            return None
        if asyncio.isfuture(response) or asyncio.iscoroutine(response):
            reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            task = asyncio.ensure_future(response)
            task.add_done_callback(lambda t: self._encode_when_done(t, reply, api_key, version, header.correlation_id))
            return reply
        return codec.encode_response(api_key, version, header.correlation_id, response)

    @staticmethod
    def _encode_when_done(
        task: asyncio.Future[Any], reply: asyncio.Future[Any], api_key: int, version: int, correlation_id: int
    ) -> None:
        if reply.done():
            return
        if task.cancelled():
            reply.cancel()
            return
        error = task.exception()
        if error is not None:
            reply.set_exception(error)
            return
        response = task.result()
        reply.set_result(None if response is None else codec.encode_response(api_key, version, correlation_id, response))
