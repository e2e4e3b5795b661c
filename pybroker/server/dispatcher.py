"""Routes a request frame to its API handler and encodes the reply (Kafka's ``KafkaApis`` entry).

Owns the per-frame pipeline: decode the header, check the API and version against the handler
registry (an unknown ApiVersions version gets error 35 in the v0 layout so clients retry lower;
anything else unsupported closes the connection, as Kafka does), decode the body (malformed →
close with one log line), call the handler, and encode its response — now, or when its future
completes (a `DeferredResponse` is answered after the client quotas decided). Returns to the
connection the encoded frame, a future of it, or None. A handler whose future is completed by a
callback says so through its context (`RequestContext.responded`): the reply is then encoded
and handed to the connection in that step, not through the futures' done callbacks a loop turn
each (Kafka sends a response from the callback that completes it).

A handler that fails (raises, or its future does) is an internal error, never a deliberate close:
as Kafka's ``KafkaApis.handle`` does, the stack trace is logged at ERROR and the client gets the
handler's ``error_response`` with UNKNOWN_SERVER_ERROR (Kafka's ``getErrorResponse``); only an
API with no error answer (Produce with acks=0) closes the connection instead.

The handler's context carries its module's ``AUTHORIZES`` declaration: a handler asking the
authorizer about an undeclared pair raises, and is answered as any other internal error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pybroker.common.errors import ErrorCode
from pybroker.metrics.stats import RequestMetrics
from pybroker.network.connection import CloseConnection, KafkaConnection
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.server.apis import HANDLERS
from pybroker.server.quota.throttling import RequestThrottler, resolved
from pybroker.server.request_context import RequestContext

if TYPE_CHECKING:
    from pybroker.server.services import BrokerServices

log = logging.getLogger(__name__)


def handler_error_response(header: Any, view: memoryview, body_offset: int, error: ErrorCode) -> Any:
    """The error response the request's handler gives (Kafka's ``getErrorResponse``), None when
    its API answers none; CloseConnection for an API or version no handler serves, or a body that
    does not parse. The SASL authenticator answers with it a request sent during authentication."""
    name = ApiKey(header.api_key).name if header.api_key in ApiKey._value2member_map_ else f"key {header.api_key}"
    handler = HANDLERS.get(header.api_key)
    if handler is None or not handler.VERSIONS[0] <= header.api_version <= handler.VERSIONS[1] or body_offset < 0:
        raise CloseConnection(f"unsupported {name} v{header.api_version} request during SASL authentication")
    try:
        request = codec.decode_request(header.api_key, header.api_version, view, body_offset)
    except codec.MalformedRequestError as e:
        raise CloseConnection(f"malformed {name} request during SASL authentication ({e})") from None
    return handler.error_response(request, header.api_version, error)


def supported_api_versions() -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every registered handler, by key."""
    return sorted((key, module.VERSIONS[0], module.VERSIONS[1]) for key, module in HANDLERS.items())


# What a broker handles before its metadata cache is initialized: the controller's requests
# (they initialize it) and the connection handshake.
_BEFORE_METADATA = frozenset({
    ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION,
})


class RequestDispatcher:
    """Turns request frames into response frames for one broker."""

    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        self.request_metrics = RequestMetrics()  # read by pybroker.server.metrics

    def __call__(self, frame: bytearray, connection: KafkaConnection) -> Any:
        started_ns = time.perf_counter_ns()
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
        call = _Call(handler, header, request, connection, len(frame))
        if api_key not in _BEFORE_METADATA and not self.broker.metadata_cache.initialized.is_set():
            reply = asyncio.ensure_future(self._when_initialized(call))
        else:
            reply = self._handle(call)
        return self.request_metrics.completed(api_key, version, request, started_ns, reply)

    async def _when_initialized(self, call: _Call) -> Any:
        """A client request that arrived before the controller's first UpdateMetadata: handled
        once it is applied (a broker just started would otherwise describe an empty cluster)."""
        await self.broker.metadata_cache.initialized.wait()
        reply = self._handle(call)
        return await reply if asyncio.isfuture(reply) else reply

    def _handle(self, call: _Call) -> Any:
        handler, header, request, connection = call.handler, call.header, call.request, call.connection
        quotas = self.broker.quotas
        if quotas.enabled:  # client quotas (pybroker.server.quota.throttling)
            call.throttler = quotas.throttler
            started = time.perf_counter_ns()
        try:
            ctx = RequestContext(self.broker, header, connection, getattr(handler, "AUTHORIZES", frozenset()))
            response = handler.handle(ctx, request)
            if call.throttler is not None:
                call.handler_ns = time.perf_counter_ns() - started
            if response is None:
                if call.throttler is not None:
                    call.throttled(None)
                return None
            if asyncio.isfuture(response) or asyncio.iscoroutine(response):
                reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                task = asyncio.ensure_future(response)
                task.add_done_callback(lambda done: call.complete(done, reply))
                ctx.on_response = lambda: call.hand_over(task, reply)
                return reply
            return call.encode(response)
        except CloseConnection:
            raise
        except Exception as e:
            return call.error_reply(e)


class _Call:
    """One decoded request on its way to a reply: encoding, and Kafka's answer to an internal error."""

    __slots__ = ("handler", "header", "request", "connection", "size", "throttler", "handler_ns")

    def __init__(
        self, handler: ModuleType, header: Any, request: Any, connection: KafkaConnection, size: int = 0,
    ) -> None:
        self.handler = handler
        self.header = header
        self.request = request
        self.connection = connection
        self.size = size  # the request frame's bytes (Kafka's request.sizeInBytes)
        self.throttler: RequestThrottler | None = None  # set while client quotas are enabled
        self.handler_ns = 0

    def throttled(self, response: Any) -> Any:
        """The response after the client quotas recorded this request (throttle_time_ms set)."""
        assert self.throttler is not None
        header = self.header
        return self.throttler.complete(header.api_key, self.request, response, self.connection, header.client_id,
                                       self.size, self.handler_ns)

    def encode(self, response: Any) -> bytearray | codec.FrameWithRegions:
        header = self.header
        if self.throttler is not None:
            response = self.throttled(response)
        response = resolved(response)  # a DeferredResponse nothing throttled: answered in full
        return codec.encode_response(header.api_key, header.api_version, header.correlation_id, response)

    def complete(self, task: asyncio.Future[Any], reply: asyncio.Future[Any]) -> None:
        """The handler's future is done: resolve ``reply`` with its encoded response (once). A
        reply already done (its connection closed, as at shutdown) still has the handler's error
        retrieved, so that asyncio does not report it as never retrieved."""
        if not task.done():
            return
        if reply.done():
            if not task.cancelled() and (error := task.exception()) is not None:
                log.debug("%s after its connection went away: %r", self.handler.__name__, error)
            return
        if task.cancelled():
            reply.cancel()
            return
        error = task.exception()
        if isinstance(error, CloseConnection):
            reply.set_exception(error)
            return
        if error is None:
            try:
                response = task.result()
                reply.set_result(None if response is None else self.encode(response))
                return
            except Exception as e:
                error = e
        try:
            reply.set_result(self.error_reply(error))
        except CloseConnection as e:
            reply.set_exception(e)

    def hand_over(self, task: asyncio.Future[Any], reply: asyncio.Future[Any]) -> None:
        """The handler's future has just been completed: resolve ``reply`` and have the connection
        write it now, rather than in the done callbacks' loop turns."""
        self.complete(task, reply)
        self.connection.reply_done(reply)

    def error_reply(self, error: BaseException) -> bytearray | codec.FrameWithRegions:
        """Log the internal error with its stack trace, then answer UNKNOWN_SERVER_ERROR; raise
        CloseConnection when this request has no error answer (or it cannot be built)."""
        header = self.header
        name = ApiKey(header.api_key).name
        frame: bytearray | codec.FrameWithRegions | None = None
        try:
            response = self.handler.error_response(self.request, header.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
            frame = None if response is None else self.encode(response)
        except Exception:
            log.exception("Building the error response to %s v%d failed", name, header.api_version)
        log.error(
            "Unexpected error handling %s v%d request (correlation id %d, client %r) from %s; %s",
            name, header.api_version, header.correlation_id, header.client_id, self.connection.peer,
            "closing the connection" if frame is None else "answering UNKNOWN_SERVER_ERROR",
            exc_info=error,
        )
        if frame is None:
            raise CloseConnection(f"{name} v{header.api_version} failed and has no error response")
        return frame
