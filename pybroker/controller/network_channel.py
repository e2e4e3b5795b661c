"""The controller's channel to a broker over a socket (Kafka's RequestSendThread connection).

Owns one connection to one broker's inter-broker listener: each request is encoded
(`controller/wire.py`), sent and answered in turn (the channel manager keeps one in flight).
A broken connection is dropped and made again on the next send; the manager retries the request.
"""

from __future__ import annotations

from pybroker.client.connection import BrokerConnection
from pybroker.client.inter_broker import DIRECT, InterBrokerClient
from pybroker.common.cluster import LiveBroker
from pybroker.controller import wire
from pybroker.controller.requests import ControlResponse

CONTROLLER_CLIENT_ID = "controller"


class NetworkBrokerChannel:
    """`BrokerChannel` to ``broker`` over the inter-broker listener."""

    def __init__(
        self, broker: LiveBroker, controller_id: int, timeout_s: float = 30.0, inter_broker: InterBrokerClient = DIRECT
    ) -> None:
        self.broker = broker
        self._inter_broker = inter_broker
        self._client_id = f"{CONTROLLER_CLIENT_ID}-{controller_id}"
        self._timeout_s = timeout_s
        self._connection: BrokerConnection | None = None

    async def send(self, request: wire.ControlRequest) -> ControlResponse:
        endpoint = self._inter_broker.endpoint(self.broker)
        if endpoint is None:
            raise OSError(f"broker {self.broker.broker_id} advertises no listener {self._inter_broker.listener}")
        if self._connection is None:
            connection = self._inter_broker.connection(endpoint.host, endpoint.port, self._client_id)
            await connection.connect(self._timeout_s)
            self._connection = connection
        api_key, version, message = wire.to_wire(request, self._inter_broker.listener)
        try:
            answer = await self._connection.send(api_key, message, version, timeout=self._timeout_s)
        except BaseException:
            await self.close()
            raise
        return wire.response_from_wire(request, answer)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
