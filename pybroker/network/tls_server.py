"""The server side of one TLS connection: asyncio's TLS protocol, ending a failed handshake as Kafka does.

When OpenSSL fails a handshake (an untrusted or missing client certificate on a listener with
``ssl.client.auth=required``, a client that speaks no TLS), it leaves a fatal alert for the peer in
the TLS protocol's outgoing buffer. asyncio's ``SSLProtocol`` then closes the socket without
writing that buffer, so the client sees the connection drop (an unexpected EOF, a transport
error) instead of the alert that says why. Kafka writes the alert, then closes, and its clients
report an SSL handshake failure. With TLS 1.3 the server verifies the client's certificate after
the client's Finished: the client already takes the handshake for complete and reads the alert as
the answer to what it sends next.

`ServerTlsProtocol` is asyncio's protocol with three changes on the server side:

- what OpenSSL has for the peer when the handshake fails (the alert) is written before the
  socket is closed;
- the failure is logged at INFO with Kafka's words ("Failed authentication with /127.0.0.1 (SSL
  handshake failed)"), followed by the listener, the peer and OpenSSL's reason; a peer that
  leaves in the middle of the handshake is only a DEBUG line, as in Kafka;
- a connection whose handshake never completed is handed to ``never_connected``: asyncio calls
  neither ``connection_made`` nor ``connection_lost`` of the application protocol then, so
  whoever tracks application protocols from their creation learns of the end here.

The alert is OpenSSL's, chosen from its verification error; which alert Kafka's JDK sends for the
same failure, and why the two differ, is in docs/differences.md.

It relies on ``asyncio.sslproto`` as Python 3.11 rewrote it (the handshake's completion callback,
the outgoing memory BIO, the application protocol's state); tests/unit/test_tls.py and
tests/differential/test_tls_alerts.py fail if that changes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class ServerTlsProtocol(sslproto.SSLProtocol):
    """TLS for one accepted connection of listener ``listener_name``; ``app_protocol`` gets the
    decrypted stream once the handshake completes."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        app_protocol: asyncio.BaseProtocol,
        context: ssl.SSLContext,
        listener_name: str,
        never_connected: Callable[[Any], object],
    ) -> None:
        """``never_connected(app_protocol)`` is called when the connection ends before its
        handshake completed (a failed handshake, a peer gone, the handshake timeout)."""
        super().__init__(loop, app_protocol, context, None, server_side=True)  # type: ignore[arg-type]  # no waiter
        self._listener_name = listener_name
        self._never_connected = never_connected

    @property
    def _internals(self) -> Any:
        """asyncio.sslproto's own state of this protocol (its outgoing BIO, the application
        protocol's state), which typeshed does not declare."""
        return self

    def _on_handshake_complete(self, handshake_exc: BaseException | type[BaseException] | None) -> None:
        if handshake_exc is not None:
            self._handshake_failed(handshake_exc)
        super()._on_handshake_complete(handshake_exc)  # type: ignore[arg-type]  # asyncio passes a class too

    def _handshake_failed(self, exc: BaseException | type[BaseException]) -> None:
        transport = self._transport
        if not isinstance(transport, asyncio.WriteTransport):
            return
        alert = self._internals._outgoing.read()
        if alert:
            transport.write(alert)  # before asyncio's close, which drops anything not yet sent
        peer = transport.get_extra_info("peername")
        host = f"/{peer[0]}" if peer else "/"
        where = f"{peer[0]}:{peer[1]}" if peer else "?"
        if isinstance(exc, ssl.SSLError):
            log.info("Failed authentication with %s (SSL handshake failed) on listener %s from %s: %s",
                     host, self._listener_name, where, exc)
        else:  # the peer closed the connection (asyncio passes ConnectionResetError)
            log.debug("Connection from %s on listener %s closed during the SSL handshake", where, self._listener_name)

    def connection_lost(self, exc: BaseException | None) -> None:
        app_protocol = self._app_protocol
        never_connected = self._internals._app_state == sslproto.AppProtocolState.STATE_INIT
        super().connection_lost(exc)
        if never_connected and app_protocol is not None:
            self._never_connected(app_protocol)
