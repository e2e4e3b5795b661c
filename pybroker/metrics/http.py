"""``GET /metrics`` over HTTP/1.1, served on the broker's event loop.

Owns the Prometheus endpoint's socket: an ``asyncio.start_server`` that answers each request
with ``prometheus_client.generate_latest(registry)``, computed on the loop (the collectors read
broker state that only the loop mutates; prometheus_client's own server would read it from
another thread). Minimal HTTP: one request per connection is enough for Prometheus, but
keep-alive requests are answered in turn; ``GET``/``HEAD`` of ``/metrics`` (or ``/``) only,
anything else 404 or 405; a request line or headers longer than 8 KiB, or not received within
10 s, close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 8192
READ_TIMEOUT_S = 10.0


class MetricsServer:
    """Serves ``registry`` at ``http://host:port/metrics``; port 0 picks a free one (``port``
    tells which once started)."""

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = registry
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port,
                                                  limit=MAX_HEADER_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", _url_host(self.host), self.port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._answer(reader, writer):
                pass
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; False when the connection is to close."""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split()
        if len(parts) != 3:
            await _respond(writer, 400, b"bad request\n", close=True)
            return False
        method, target, protocol = parts
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
        keep_alive = protocol == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        path = target.split("?", 1)[0]
        if path not in ("/metrics", "/"):
            await _respond(writer, 404, b"not found: try /metrics\n", close=not keep_alive)
        elif method not in ("GET", "HEAD"):
            await _respond(writer, 405, b"method not allowed\n", close=not keep_alive, allow="GET, HEAD")
        else:
            body = generate_latest(self.registry)
            await _respond(writer, 200, body, close=not keep_alive, content_type=CONTENT_TYPE_LATEST,
                           head_only=method == "HEAD")
        return keep_alive


async def _respond(
    writer: asyncio.StreamWriter, status: int, body: bytes, *, close: bool,
    content_type: str = "text/plain; charset=utf-8", allow: str | None = None, head_only: bool = False,
) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}[status]
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    if allow is not None:
        lines.append(f"Allow: {allow}")
    if close:
        lines.append("Connection: close")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if not head_only:
        writer.write(body)
    await writer.drain()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
