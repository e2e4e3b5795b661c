"""How the transaction coordinator reaches partition leaders with WriteTxnMarkers.

Owns the seam between the marker channel and the network: ``MarkerSender`` (send one
WriteTxnMarkers request to a broker, get its response or an exception when the broker could not
be reached or answered nothing), and ``NetworkMarkerSender``, its implementation over
``BrokerConnection``: one connection per destination broker, this broker included (a marker for
a partition led here travels over the network like any other, one code path), opened on first
use, reopened when the broker's advertised endpoint changed, and dropped when a request on it
fails. Requests are sent as WriteTxnMarkers v1 when the destination supports it (Kafka's version
since 2.8), else v0.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.client.inter_broker import DIRECT, InterBrokerClient
from pybroker.common.cluster import LiveBroker
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1

# What a sender raises when a request did not get an answer (Kafka's "disconnected" response).
SEND_FAILURES = (KafkaClientError, OSError, TimeoutError)


class MarkerSender(Protocol):
    async def send(self, destination: LiveBroker, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """Send ``request`` to ``destination``; raises one of ``SEND_FAILURES`` if no answer came."""
        ...

    async def close(self) -> None:
        ...


class NetworkMarkerSender:
    """WriteTxnMarkers over one ``BrokerConnection`` per destination broker."""

    def __init__(self, broker_id: int, request_timeout_ms: int, inter_broker: InterBrokerClient = DIRECT) -> None:
        self._inter_broker = inter_broker
        self.client_id = f"broker-{broker_id}-txn-marker-sender"
        self.timeout_s = request_timeout_ms / 1000
        self._connections: dict[int, tuple[tuple[str, int], BrokerConnection]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def send(self, destination: LiveBroker, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        connection = await self._connection(destination)
        try:
            version = connection.version_for(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
            return await connection.send(ApiKey.WRITE_TXN_MARKERS, request, version=version, timeout=self.timeout_s)
        except BaseException:
            await self._drop(destination.broker_id, connection)
            raise

    async def _connection(self, destination: LiveBroker) -> BrokerConnection:
        endpoint = self._inter_broker.endpoint(destination)
        if endpoint is None:
            raise KafkaClientError(f"broker {destination.broker_id} has no endpoint")
        address = (endpoint.host, endpoint.port)
        async with self._locks.setdefault(destination.broker_id, asyncio.Lock()):
            current = self._connections.get(destination.broker_id)
            if current is not None:
                if current[0] == address:
                    return current[1]
                await self._drop(destination.broker_id, current[1])
            connection = self._inter_broker.connection(endpoint.host, endpoint.port, self.client_id)
            await connection.connect(self.timeout_s)
            self._connections[destination.broker_id] = (address, connection)
            return connection

    async def _drop(self, broker_id: int, connection: BrokerConnection) -> None:
        current = self._connections.get(broker_id)
        if current is not None and current[1] is connection:
            del self._connections[broker_id]
        await connection.close()

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        await asyncio.gather(*(connection.close() for _, connection in connections.values()), return_exceptions=True)
