"""How a broker reaches the other brokers: the listener it uses and the security it connects with.

Owns `InterBrokerClient`, the one value every broker-to-broker connection is made from (replica
fetchers, the controller's channels and its ListOffsets, ControlledShutdown and AlterPartition to
the controller, transaction markers and verification): it picks a broker's endpoint on the
inter-broker listener (Kafka's ``interBrokerListenerName``) and opens a `BrokerConnection` with the
inter-broker `ClientSecurity`. The broker builds it from its configuration
(`pybroker.server.inter_broker_security.inter_broker_client`); `DIRECT` (a broker's first endpoint,
PLAINTEXT) is the default of code and tests that do not care.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pybroker.client.connection import BrokerConnection
from pybroker.client.security import PLAINTEXT, ClientSecurity

if TYPE_CHECKING:
    from pybroker.common.cluster import BrokerEndpoint, LiveBroker


@dataclass(frozen=True)
class InterBrokerClient:
    listener: str | None = None  # None: a broker's first endpoint
    security: ClientSecurity = PLAINTEXT

    def endpoint(self, broker: LiveBroker) -> BrokerEndpoint | None:
        """``broker``'s endpoint on the inter-broker listener (None if it has none)."""
        return broker.endpoint(self.listener)

    def connection(self, host: str, port: int, client_id: str) -> BrokerConnection:
        """A new, not yet connected, connection to another broker."""
        return BrokerConnection(host, port, client_id, security=self.security)


DIRECT = InterBrokerClient()
