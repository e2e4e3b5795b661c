"""The replica fetcher's connection to its leader: a leader that dies while the connection is
being set up is a transport failure (the fetcher backs off and retries), not an internal error."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from pybroker.common.cluster import BrokerEndpoint
from pybroker.replication.fetcher import FetchRequestData, FetchRequestPartition
from pybroker.replication.remote_endpoint import RemoteLeaderEndPoint
from pybroker.types import TopicPartition


def test_a_connection_reset_during_api_versions_is_a_connection_error():
    async def scenario() -> None:
        async def reset_on_first_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(4)  # the ApiVersions request arrives: reset instead of answering
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

        server = await asyncio.start_server(reset_on_first_request, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        endpoint = RemoteLeaderEndPoint(1, 2, lambda _: BrokerEndpoint("PLAINTEXT", "127.0.0.1", port), 5000)
        request = FetchRequestData(2, 500, 1, 1 << 20, [
            FetchRequestPartition(TopicPartition("t", 0), "AAAAAAAAAAAAAAAAAAAAAA", 0, 0, -1, 0, 1 << 20)])
        try:
            with pytest.raises(ConnectionError, match="connection to broker 1 failed"):
                await endpoint.fetch(request)
        finally:
            await endpoint.close()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
