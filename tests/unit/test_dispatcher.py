"""The dispatcher's answer to an internal error (Kafka's ``KafkaApis.handle`` + ``getErrorResponse``).

A handler that raises, or whose future fails, is a broker bug, not a deliberate close: the stack
trace is logged at ERROR and the client gets UNKNOWN_SERVER_ERROR in the API's own error layout,
which every handler module provides as ``error_response``; Produce with acks=0 has no response to
carry it, so its connection is closed. A malformed request is a deliberate close and logs no
error.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.network.connection import CloseConnection
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ApiVersionsRequest, MetadataRequest, ProduceRequest
from pybroker.protocol.schema import Field, Struct
from pybroker.protocol.specs import REQUESTS
from pybroker.server import dispatcher as dispatcher_module
from pybroker.server.apis import HANDLERS
from pybroker.server.dispatcher import RequestDispatcher

E = ErrorCode
CONNECTION = SimpleNamespace(peer="127.0.0.1:4242")

_SAMPLES = {"string": "s", "bool": False, "bytes": b"", "records": None, "float64": 0.0}


def _sample(field: Field, version: int) -> Any:
    """A value for ``field`` with one element in every array, so that per-topic and per-partition
    error codes appear in the error response."""
    if field.is_array:
        element = field.element_type
        if field.struct is not None:
            return [_populated(field.struct, version)]
        return [_SAMPLES.get(element, 0)]
    if field.struct is not None:
        return _populated(field.struct, version)
    if field.type in _SAMPLES:
        return _SAMPLES[field.type]
    return field.default


def _populated(struct: Struct, version: int) -> Any:
    from pybroker.protocol import messages

    values = {f.name: _sample(f, version) for f in struct.fields if f.present_in(version)}
    return _class_of(messages, struct)(**values)


def _class_of(messages: ModuleType, struct: Struct) -> type:
    for top in messages.REQUEST_CLASSES.values():
        if top._spec is struct:
            return top
        nested = top._structs.get(struct.name)
        if nested is not None and nested._spec is struct:
            return nested
    raise LookupError(struct.name)


def _request(api_key: int, version: int) -> Any:
    """A request with every array populated, as the broker decodes it at ``version``."""
    request = _populated(REQUESTS[api_key].struct, version)
    if api_key == ApiKey.PRODUCE:
        request.acks = 1
    frame = memoryview(codec.encode_request(api_key, version, 7, "test", request))[4:]
    _, offset = codec.decode_request_header(frame)
    return codec.decode_request(api_key, version, frame, offset)


def _error_codes(message: Any, struct: Struct, version: int) -> list[int]:
    codes = []
    for f in struct.fields:
        if not f.present_in(version):
            continue
        value = getattr(message, f.name)
        if f.name in ("error_code", "partition_error_code"):  # AddPartitionsToTxn names it so
            codes.append(value)
        elif f.struct is not None and value is not None:
            for item in value if f.is_array else [value]:
                codes += _error_codes(item, f.struct, version)
    return codes


# Kafka's DescribeLogDirs error response lists no dirs, and v0-2 have no top-level error code:
# the error cannot reach the client (it sees no dirs), in Kafka as here.
_NO_ERROR_FIELD = {(ApiKey.DESCRIBE_LOG_DIRS, v) for v in range(3)}
CASES = [(key, version) for key, module in sorted(HANDLERS.items())
         for version in range(module.VERSIONS[0], module.VERSIONS[1] + 1) if (key, version) not in _NO_ERROR_FIELD]


@pytest.mark.parametrize("api_key,version", CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES])
def test_every_api_has_an_error_response_that_carries_the_error_everywhere(api_key, version):
    request = _request(api_key, version)
    response = HANDLERS[api_key].error_response(request, version, E.UNKNOWN_SERVER_ERROR)
    frame = codec.encode_response(api_key, version, 7, response)
    correlation_id, decoded = codec.decode_response(api_key, version, memoryview(frame)[4:])
    codes = _error_codes(decoded, codec.RESPONSES[api_key].struct, version)
    assert correlation_id == 7
    assert codes and set(codes) == {E.UNKNOWN_SERVER_ERROR}, codes


def test_produce_with_acks_0_has_no_error_response():
    request = _request(ApiKey.PRODUCE, 9)
    request.acks = 0
    assert HANDLERS[ApiKey.PRODUCE].error_response(request, 9, E.UNKNOWN_SERVER_ERROR) is None


# --- the dispatcher -------------------------------------------------------------------------------


def _failing_handler(monkeypatch, api_key: int, handle: Any) -> None:
    real = HANDLERS[api_key]
    fake = SimpleNamespace(API_KEY=real.API_KEY, VERSIONS=real.VERSIONS, handle=handle,
                           error_response=real.error_response)
    monkeypatch.setitem(dispatcher_module.HANDLERS, api_key, fake)


def _metadata_frame() -> bytearray:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    return codec.encode_request(ApiKey.METADATA, 9, 11, "test", request)[4:]


def ready_broker(initialized: bool = True) -> Any:
    """A broker as far as the dispatcher needs it: its metadata cache, initialized or not."""
    event = asyncio.Event()
    if initialized:
        event.set()
    return SimpleNamespace(metadata_cache=SimpleNamespace(initialized=event), quotas=SimpleNamespace(enabled=False))


def _metadata_answer(frame: Any) -> Any:
    correlation_id, response = codec.decode_response(ApiKey.METADATA, 9, memoryview(frame)[4:])
    assert correlation_id == 11
    return response


def test_a_handler_that_raises_gets_unknown_server_error_and_a_logged_stack_trace(monkeypatch, caplog):
    def broken(ctx, request):
        raise KeyError("a bug")

    _failing_handler(monkeypatch, ApiKey.METADATA, broken)
    with caplog.at_level(logging.ERROR, logger=dispatcher_module.__name__):
        frame = RequestDispatcher(broker=ready_broker())(_metadata_frame(), CONNECTION)  # type: ignore[arg-type]
    response = _metadata_answer(frame)
    assert [(t.name, t.error_code) for t in response.topics] == [("orders", E.UNKNOWN_SERVER_ERROR)]
    [record] = caplog.records
    assert record.levelno == logging.ERROR and "answering UNKNOWN_SERVER_ERROR" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is KeyError


def test_a_handler_whose_future_fails_gets_unknown_server_error(monkeypatch, caplog):
    async def broken(ctx, request):
        await asyncio.sleep(0)
        raise RuntimeError("a bug after waiting")

    _failing_handler(monkeypatch, ApiKey.METADATA, broken)

    async def scenario() -> Any:
        return await RequestDispatcher(broker=ready_broker())(_metadata_frame(), CONNECTION)  # type: ignore[arg-type]

    with caplog.at_level(logging.ERROR, logger=dispatcher_module.__name__):
        frame = asyncio.run(scenario())
    assert [t.error_code for t in _metadata_answer(frame).topics] == [E.UNKNOWN_SERVER_ERROR]
    assert [r.exc_info[0] for r in caplog.records] == [RuntimeError]


def test_acks_0_produce_that_fails_closes_the_connection_after_logging(monkeypatch, caplog):
    def broken(ctx, request):
        raise ValueError("a bug")

    _failing_handler(monkeypatch, ApiKey.PRODUCE, broken)
    request = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
    frame = codec.encode_request(ApiKey.PRODUCE, 9, 3, "test", request)[4:]
    with caplog.at_level(logging.ERROR, logger=dispatcher_module.__name__), pytest.raises(CloseConnection):
        RequestDispatcher(broker=ready_broker())(frame, CONNECTION)  # type: ignore[arg-type]
    assert "closing the connection" in caplog.records[0].getMessage()


def test_a_malformed_request_is_a_deliberate_close_without_an_error_log(caplog):
    frame = _metadata_frame()[:-3]
    with caplog.at_level(logging.DEBUG), pytest.raises(CloseConnection, match="malformed METADATA v9"):
        RequestDispatcher(broker=ready_broker())(frame, CONNECTION)  # type: ignore[arg-type]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_client_requests_wait_for_the_first_update_metadata(monkeypatch):
    """A broker just started has no metadata yet: a client's Metadata waits until the controller's
    first UpdateMetadata has been applied; ApiVersions is answered at once."""
    seen: list[str] = []

    def metadata(ctx, request):
        seen.append("metadata")
        raise KeyError("answered")

    _failing_handler(monkeypatch, ApiKey.METADATA, metadata)

    async def scenario() -> None:
        broker = ready_broker(initialized=False)
        dispatcher = RequestDispatcher(broker=broker)
        reply = dispatcher(_metadata_frame(), CONNECTION)
        versions = dispatcher(codec.encode_request(ApiKey.API_VERSIONS, 3, 5, "test", ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))[4:], CONNECTION)
        assert not asyncio.isfuture(versions)  # answered at once
        await asyncio.sleep(0.01)
        assert not reply.done() and seen == []
        broker.metadata_cache.initialized.set()
        frame = await reply
        assert seen == ["metadata"]
        assert [t.error_code for t in _metadata_answer(frame).topics] == [E.UNKNOWN_SERVER_ERROR]

    asyncio.run(scenario())


def test_a_handler_failing_after_its_connection_went_away_is_not_reported_as_lost():
    """At shutdown a handler can fail (its ZooKeeper client closed) after the connection cancelled
    its reply: the error is retrieved and logged at DEBUG, not left for asyncio to report as an
    ERROR ("Task exception was never retrieved")."""
    async def main() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: reported.append(context))

        async def fails() -> None:
            raise ConnectionError("the ZooKeeper client is closed")

        task = asyncio.ensure_future(fails())
        reply = loop.create_future()
        reply.cancel()  # the connection closed first
        await asyncio.sleep(0)
        call = dispatcher_module._Call(ModuleType("handler"), SimpleNamespace(), None, CONNECTION)  # type: ignore[arg-type]
        call.complete(task, reply)
        del task
        gc.collect()
        return reported

    assert asyncio.run(main()) == []
