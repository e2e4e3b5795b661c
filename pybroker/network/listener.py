"""Listening sockets: accept connections on each configured listener and track them.

Owns the asyncio servers for ``listeners`` (TLS on SSL and SASL_SSL listeners, with the
listener's server context, through `ServerTlsProtocol`: a failed handshake sends the peer its TLS
alert and is logged) and the set of open connections, so a shutdown can stop accepting, then
close every connection; a connection whose TLS handshake does not complete leaves the set when it
ends. Each connection knows the listener it arrived on and its protocol; on SSL listeners its
principal comes from the client certificate; on a listener given an authenticator factory (the
SASL listeners), each new connection gets its own authenticator, which sees every frame before
the dispatcher.

Also the loop's handling of ``accept()`` failing for want of descriptors (`AcceptErrorReporter`):
asyncio (up to CPython's gh-151615 fix) reports it once per connection waiting in the backlog,
each time with a traceback and a retry a second later, and those retries raise once the server is
closed; here it is one ERROR line per second while it lasts, and nothing after a close.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from pybroker.common.cluster import Endpoint
from pybroker.network.connection import Authenticator, Dispatcher, KafkaConnection
from pybroker.network.tls_server import ServerTlsProtocol
from pybroker.security.principal import KafkaPrincipal

log = logging.getLogger(__name__)

ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"  # asyncio's message


class AcceptErrorReporter:
    """An event-loop exception handler in front of the loop's own: `ACCEPT_OUT_OF_RESOURCE`
    is logged once per second (asyncio retries accepting after a second), and the ValueError
    of a retry that finds its server closed is dropped; anything else goes to the previous
    handler (or the loop's default)."""

    def __init__(self, previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None) -> None:
        self.previous = previous
        self._last_report = float("-inf")

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_OUT_OF_RESOURCE:
            now = loop.time()
            if now - self._last_report >= 1.0:
                self._last_report = now
                log.error("Cannot accept connections (%s): they wait in the backlog; retrying every second",
                          context.get("exception"))
            return
        callback = getattr(context.get("handle"), "_callback", None)
        if isinstance(context.get("exception"), ValueError) and getattr(callback, "__name__", "") == "_start_serving":
            return  # the accept retry of a server closed meanwhile
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)

    @classmethod
    def install(cls, loop: asyncio.AbstractEventLoop) -> None:
        """Put a reporter in front of ``loop``'s exception handler (once)."""
        current = loop.get_exception_handler()
        if not isinstance(current, cls):
            loop.set_exception_handler(cls(current))


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

    def _new_tls_connection(self, endpoint: Endpoint, context: ssl.SSLContext) -> ServerTlsProtocol:
        return ServerTlsProtocol(asyncio.get_running_loop(), self._new_connection(endpoint), context,
                                 endpoint.listener_name, self.connections.discard)

    async def start(self, start_serving: bool = True) -> None:
        """Bind every listener; without ``start_serving`` connections wait in the backlog until
        `enable_request_processing` (Kafka binds early and processes requests once started)."""
        loop = asyncio.get_running_loop()
        AcceptErrorReporter.install(loop)
        for endpoint in self.endpoints:
            context = self._ssl_contexts.get(endpoint.listener_name) if endpoint.uses_tls else None
            if endpoint.uses_tls and context is None:
                raise RuntimeError(f"listener {endpoint.listener_name} ({endpoint.security_protocol}) has no TLS context")
            factory: Callable[[], asyncio.BaseProtocol] = (
                functools.partial(self._new_tls_connection, endpoint, context) if context is not None
                else functools.partial(self._new_connection, endpoint))
            server = await loop.create_server(
                factory, endpoint.host or None, endpoint.port,
                reuse_address=True, backlog=1024, start_serving=start_serving,
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
