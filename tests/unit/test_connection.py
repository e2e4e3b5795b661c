"""KafkaConnection writing replies that hold log regions (zero-copy fetch), over real loopback
sockets with small buffers: order with pipelined replies when the socket fills up mid-region
(sendfile goes on once it is writable, later replies wait), and a region whose file shrank (the
connection closes rather than send a short frame)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from pathlib import Path
from typing import Any

from pybroker._native import Segment
from pybroker.network import connection as connection_module
from pybroker.network.connection import KafkaConnection
from pybroker.protocol import codec, messages
from tests.unit import batches

SMALL_BUFFER = 4096


def fetch_response(records: Any) -> messages.FetchResponse:
    partition = messages.FetchResponse.PartitionData(partition_index=0, records=records)
    topic = messages.FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])
    return messages.FetchResponse(responses=[topic])


def fill_segment(tmp_path: Path, total_bytes: int) -> Segment:
    segment = Segment(str(tmp_path), 0)
    batch = batches.build_batch([(None, os.urandom(1000))] * 64, timestamps=list(range(64)))
    while segment.size < total_bytes:
        segment.append(batch, segment.next_offset, 0, -1)
    return segment


async def exchange(replies: list[Any], requests: int) -> tuple[bytes, bool]:
    """Serve ``replies`` (one per request, in order) to a client that sends ``requests`` frames
    at once and reads until EOF or until it has every reply; returns (bytes read, saw EOF)."""
    pending = list(replies)

    def dispatch(frame: bytearray, connection: KafkaConnection) -> Any:
        sock = connection.transport.get_extra_info("socket")  # type: ignore[union-attr]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
        return pending.pop(0)

    server = await asyncio.get_running_loop().create_server(
        lambda: KafkaConnection(dispatch, 1 << 20), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=client)
    try:
        writer.write(b"\x00\x00\x00\x01x" * requests)
        expected = sum(len(r) for r in replies)
        data = bytearray()
        eof = False
        async with asyncio.timeout(30):
            while len(data) < expected:
                chunk = await reader.read(1 << 16)
                if not chunk:
                    eof = True
                    break
                data += chunk
        return bytes(data), eof
    finally:
        writer.close()
        server.close()
        await server.wait_closed()


def test_regions_are_sent_in_order_when_the_socket_fills_up(tmp_path: Path) -> None:
    segment = fill_segment(tmp_path, 3 << 20)  # far more than both socket buffers hold
    region = segment.read_region(0, 8 << 20, 1 << 62, False)
    assert region is not None and len(region) >= 3 << 20
    with_region = codec.encode_response(1, 12, 1, fetch_response(region))
    assert isinstance(with_region, codec.FrameWithRegions)
    plain = codec.encode_response(1, 12, 2, fetch_response(b""))
    small = segment.read_region(0, 5000, 1 << 62, True)
    with_small_region = codec.encode_response(1, 11, 3, fetch_response(small))

    data, eof = asyncio.run(exchange([with_region, plain, with_small_region], 3))

    assert not eof
    assert data == bytes(with_region) + bytes(plain) + bytes(with_small_region)
    segment.close()


def test_a_region_truncated_under_the_reply_closes_the_connection(tmp_path: Path) -> None:
    segment = fill_segment(tmp_path, 1 << 20)
    region = segment.read_region(0, 2 << 20, 1 << 62, False)
    assert region is not None
    frame = codec.encode_response(1, 12, 1, fetch_response(region))
    segment.truncate_to(1)  # the log loses the region's bytes before the reply is written

    data, eof = asyncio.run(exchange([frame], 1))

    assert eof
    assert len(data) < len(frame)
    segment.close()


def test_without_a_descriptor_to_watch_the_rest_of_a_region_is_buffered(tmp_path: Path, monkeypatch: Any) -> None:
    def no_descriptor(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(connection_module.os, "dup", no_descriptor)
    segment = fill_segment(tmp_path, 3 << 20)
    region = segment.read_region(0, 8 << 20, 1 << 62, False)
    assert region is not None
    with_region = codec.encode_response(1, 12, 1, fetch_response(region))
    plain = codec.encode_response(1, 12, 2, fetch_response(b""))

    data, eof = asyncio.run(exchange([with_region, plain], 2))

    assert not eof
    assert data == bytes(with_region) + bytes(plain)
    segment.close()
