"""What a request handler is given: the broker, the request header, and the connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pybroker.network.connection import KafkaConnection
    from pybroker.server.broker import Broker


@dataclass
class RequestContext:
    broker: Broker
    header: Any  # the decoded request header (api_key, api_version, correlation_id, client_id)
    connection: KafkaConnection

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
