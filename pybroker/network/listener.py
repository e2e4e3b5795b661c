"""Listening sockets: accept connections on each configured listener and track them.

Owns the asyncio servers for ``listeners`` (TLS on SSL and SASL_SSL listeners, with the
listener's server context) and the set of open connections, so a shutdown can stop accepting,
then close every connection. Each connection knows the listener it arrived on and its protocol;
on SSL listeners its principal comes from the client certificate; on a listener given an
authenticator factory (the SASL listeners), each new connection gets its own authenticator, which
sees every frame before the dispatcher.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
from collections.abc import Callable, Mapping

from pybroker.network.connection import Authenticator, Dispatcher, KafkaConnection
from pybroker.security.principal import KafkaPrincipal
from pybroker.server.config import Endpoint

log = logging.getLogger(__name__)


class SocketServer:
    """All listeners of a broker."""

    def __init__(
        self, endpoints: list[Endpoint], dispatch: Dispatcher, max_request_size: int,
        ssl_contexts: Mapping[str, ssl.SSLContext] | None = None,
        tls_principal: Callable[[bytes | None], KafkaPrincipal] | None = None,
        authenticators: Mapping[str, Callable[[KafkaConnection], Authenticator]] | None = None,
    ) -> None:
        """``ssl_contexts``: the server context of each SSL and SASL_SSL listener, by name;
        ``tls_principal``: the principal of a client certificate on SSL listeners;
        ``authenticators``: the per-connection authenticator factory of each SASL listener."""
        self.endpoints = endpoints
        self._dispatch = dispatch
        self._max_request_size = max_request_size
        self._ssl_contexts = dict(ssl_contexts or {})
        self._tls_principal = tls_principal
        self._authenticators = dict(authenticators or {})
        self._servers: list[asyncio.base_events.Server] = []
        self.connections: set[KafkaConnection] = set()
        self.bound: list[tuple[str, int]] = []
        self.bound_ports: dict[str, int] = {}  # listener name -> the port it is bound to

    def _new_connection(self, endpoint: Endpoint) -> KafkaConnection:
        connection = KafkaConnection(
            self._dispatch, self._max_request_size, self.connections.discard,
            listener_name=endpoint.listener_name, security_protocol=endpoint.security_protocol,
            tls_principal=self._tls_principal if endpoint.security_protocol == "SSL" else None,
        )
        authenticator = self._authenticators.get(endpoint.listener_name)
        if authenticator is not None:
            connection.authenticator = authenticator(connection)
        self.connections.add(connection)
        return connection

    async def start(self, start_serving: bool = True) -> None:
        """Bind every listener; without ``start_serving`` connections wait in the backlog until
        `enable_request_processing` (Kafka binds early and processes requests once started)."""
        loop = asyncio.get_running_loop()
        for endpoint in self.endpoints:
            context = self._ssl_contexts.get(endpoint.listener_name) if endpoint.uses_tls else None
            if endpoint.uses_tls and context is None:
                raise RuntimeError(f"listener {endpoint.listener_name} ({endpoint.security_protocol}) has no TLS context")
            server = await loop.create_server(
                functools.partial(self._new_connection, endpoint), endpoint.host or None, endpoint.port,
                reuse_address=True, backlog=1024, start_serving=start_serving, ssl=context,
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
                self.bound_ports.setdefault(endpoint.listener_name, port)
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
