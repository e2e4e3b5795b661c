"""BrokerConnection reading responses over a real loopback socket from a scripted peer: a large
response arriving in pieces is decoded with its records pointing, writable, into the frame (what a
follower appends in place); a broken size prefix or a closed socket fails the waiting request. And
its channel's flow control: a writer cancelled while the transport is paused leaves the others
waiting."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

import pytest

from pybroker.client.connection import BrokerConnection, KafkaClientError, _Channel
from pybroker.protocol import codec, messages
from pybroker.protocol.api_keys import ApiKey

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[int, int, int]:
    """(api key, version, correlation id) of the next request."""
    size = int.from_bytes(await reader.readexactly(4), "big")
    frame = memoryview(await reader.readexactly(size))
    header, _ = codec.decode_request_header(frame)
    return header.api_key, header.api_version, header.correlation_id


async def answer_api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    api_key, version, correlation_id = await read_request(reader)
    assert api_key == ApiKey.API_VERSIONS
    keys = [
        messages.ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=v)
        for k, v in ((ApiKey.API_VERSIONS, 3), (ApiKey.FETCH, 12))
    ]
    writer.write(codec.encode_response(api_key, version, correlation_id, messages.ApiVersionsResponse(api_keys=keys)))
    await writer.drain()


def fetch_request() -> messages.FetchRequest:
    partition = messages.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 24)
    return messages.FetchRequest(replica_id=1, topics=[messages.FetchRequest.FetchTopic(topic="t", partitions=[partition])])


async def with_peer(script: Script, client: Callable[[BrokerConnection], Awaitable[None]]) -> None:
    done = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await answer_api_versions(reader, writer)
            await script(reader, writer)
        finally:
            writer.close()
            if not done.done():
                done.set_result(None)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    connection = BrokerConnection("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        async with asyncio.timeout(30):
            await connection.connect()
            await client(connection)
    finally:
        await connection.close()
        server.close()
        await server.wait_closed()


def test_a_large_response_arriving_in_pieces_is_decoded_in_place() -> None:
    records = os.urandom(3 << 20)

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        api_key, version, correlation_id = await read_request(reader)
        partition = messages.FetchResponse.PartitionData(partition_index=0, high_watermark=7, records=records)
        topic = messages.FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])
        frame = bytes(codec.encode_response(api_key, version, correlation_id, messages.FetchResponse(responses=[topic])))
        for start in range(0, len(frame), 100_003):  # pieces that cut the size prefix and header too
            writer.write(frame[start : start + 100_003])
            await writer.drain()
            await asyncio.sleep(0)

    async def client(connection: BrokerConnection) -> None:
        response = await connection.send(ApiKey.FETCH, fetch_request(), version=12)
        got = response.responses[0].partitions[0]
        assert got.high_watermark == 7
        assert isinstance(got.records, memoryview) and not got.records.readonly
        assert bytes(got.records) == records

    asyncio.run(with_peer(script, client))


def test_a_negative_size_prefix_fails_the_waiting_request_and_closes() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write((-5).to_bytes(4, "big", signed=True))
        await writer.drain()
        await reader.read()  # until the client closes

    async def client(connection: BrokerConnection) -> None:
        with pytest.raises(KafkaClientError, match="response size -5"):
            await connection.send(ApiKey.FETCH, fetch_request(), version=12)

    asyncio.run(with_peer(script, client))


def test_a_peer_closing_mid_response_fails_the_waiting_request() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write((1000).to_bytes(4, "big") + b"\x00" * 10)  # 10 of 1000 bytes, then EOF
        await writer.drain()

    async def client(connection: BrokerConnection) -> None:
        with pytest.raises(KafkaClientError, match="closed|lost"):
            await connection.send(ApiKey.FETCH, fetch_request(), version=12)

    asyncio.run(with_peer(script, client))


def test_a_cancelled_writer_does_not_cancel_the_others_waiting_to_write() -> None:
    async def scenario() -> None:
        channel = _Channel(lambda frame: None, lambda exc: None)
        channel.pause_writing()  # the transport's buffer is over its high-water mark
        first = asyncio.create_task(channel.drain())
        second = asyncio.create_task(channel.drain())
        await asyncio.sleep(0)
        first.cancel()  # e.g. its request timed out
        await asyncio.sleep(0)
        channel.resume_writing()
        await asyncio.wait_for(second, 5)
        assert first.cancelled() and second.done() and not second.cancelled()

    asyncio.run(scenario())
