"""The project's asyncio clients, driven synchronously from a Spark worker's thread.

Owns one private event loop and one connected ``Admin`` (which owns the broker connections) per
use: planning on the driver side, one read or write in a task. Spark calls data sources
synchronously, so each call runs its coroutine to completion on that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from pybroker.client.admin import Admin
from pybroker.client.security import security_from_properties

T = TypeVar("T")


class BlockingClient:
    """``with BlockingClient(servers) as client: client.run(client.admin.list_topics())``."""

    def __init__(self, bootstrap_servers: str, client_id: str = "pybroker-spark", request_timeout_s: float = 30.0,
                 kafka: Mapping[str, str] | None = None) -> None:
        """``kafka``: the source's or sink's ``kafka.*`` options (prefix removed); their security
        settings (``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.mechanism``,
        ``kafka.sasl.jaas.config``) secure the connections. Built here, on the worker, since an
        SSL context cannot travel in pickled options."""
        self.loop = asyncio.new_event_loop()
        self.admin = Admin(bootstrap_servers, client_id=client_id, request_timeout=request_timeout_s,
                           security=security_from_properties(kafka or {}))
        try:
            self.run(self.admin.connect())
        except BaseException:
            self.loop.close()
            raise

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on this client's loop until it completes."""
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        if not self.loop.is_closed():
            self.run(self.admin.close())
            self.loop.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
