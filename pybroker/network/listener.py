"""Listening sockets: accept connections on each configured listener and track them.

Owns the asyncio servers for ``listeners`` and the set of open connections, so a shutdown can stop
accepting, then close every connection.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from pybroker.network.connection import Dispatcher, KafkaConnection
from pybroker.server.config import Endpoint

log = logging.getLogger(__name__)


class SocketServer:
    """All listeners of a broker."""

    def __init__(self, endpoints: list[Endpoint], dispatch: Dispatcher, max_request_size: int) -> None:
        self.endpoints = endpoints
        self._dispatch = dispatch
        self._max_request_size = max_request_size
        self._servers: list[asyncio.base_events.Server] = []
        self.connections: set[KafkaConnection] = set()
        self.bound: list[tuple[str, int]] = []

    def _new_connection(self) -> KafkaConnection:
        connection = KafkaConnection(self._dispatch, self._max_request_size, self.connections.discard)
        self.connections.add(connection)
        return connection

    async def start(self, start_serving: bool = True) -> None:
        """Bind every listener; without ``start_serving`` connections wait in the backlog until
        `enable_request_processing` (Kafka binds early and processes requests once started)."""
        loop = asyncio.get_running_loop()
        for endpoint in self.endpoints:
            server = await loop.create_server(
                self._new_connection, endpoint.host, endpoint.port, reuse_address=True, backlog=1024,
                start_serving=start_serving,
            )
            self._servers.append(server)
            for sock in server.sockets:
                if not start_serving:
                    # asyncio listens only once serving starts; listen now so that the kernel
                    # queues connections (the controller's first) meanwhile, as Kafka's bound
                    # acceptors do.
                    raw = socket.socket(sock.family, sock.type, fileno=sock.fileno())
                    raw.listen(1024)
                    raw.detach()
                host, port = sock.getsockname()[:2]
                self.bound.append((host, port))
                log.info("Listening on %s://%s:%d", endpoint.listener_name, host, port)

    async def enable_request_processing(self) -> None:
        for server in self._servers:
            await server.start_serving()

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            await server.wait_closed()
