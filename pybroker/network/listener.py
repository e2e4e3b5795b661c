"""Listening sockets: accept connections on each configured listener and track them.

Owns the asyncio servers for ``listeners`` and the set of open connections, so a shutdown can stop
accepting, then close every connection. Each connection knows its listener and security protocol;
on a listener given an authenticator factory (the SASL listeners), each new connection gets its
own authenticator, which sees every frame before the dispatcher.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Mapping

from pybroker.network.connection import Authenticator, Dispatcher, KafkaConnection
from pybroker.server.config import Endpoint

log = logging.getLogger(__name__)


class SocketServer:
    """All listeners of a broker."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        dispatch: Dispatcher,
        max_request_size: int,
        security_protocols: Mapping[str, str] | None = None,
        authenticators: Mapping[str, Callable[[KafkaConnection], Authenticator]] | None = None,
    ) -> None:
        self.endpoints = endpoints
        self._dispatch = dispatch
        self._max_request_size = max_request_size
        self._security_protocols = dict(security_protocols or {})  # listener → protocol (default PLAINTEXT)
        self._authenticators = dict(authenticators or {})  # listener → per-connection authenticator factory
        self._servers: list[asyncio.base_events.Server] = []
        self.connections: set[KafkaConnection] = set()
        self.bound: list[tuple[str, int]] = []

    def _new_connection(self, listener_name: str) -> KafkaConnection:
        connection = KafkaConnection(
            self._dispatch, self._max_request_size, self.connections.discard, listener_name,
            self._security_protocols.get(listener_name, "PLAINTEXT"),
        )
        authenticator = self._authenticators.get(listener_name)
        if authenticator is not None:
            connection.authenticator = authenticator(connection)
        self.connections.add(connection)
        return connection

    async def start(self, start_serving: bool = True) -> None:
        """Bind every listener; without ``start_serving`` connections wait in the backlog until
        `enable_request_processing` (Kafka binds early and processes requests once started)."""
        loop = asyncio.get_running_loop()
        for endpoint in self.endpoints:
            server = await loop.create_server(
                lambda name=endpoint.listener_name: self._new_connection(name), endpoint.host, endpoint.port, reuse_address=True, backlog=1024,
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
