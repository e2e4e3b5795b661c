"""What a request handler is given: the broker, the request header, and the connection, and
the one way a handler asks the broker's authorizer (as the connection's principal, from its host)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from pybroker.security.principal import KafkaPrincipal

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

    @property
    def principal(self) -> KafkaPrincipal:
        return self.connection.principal

    @property
    def listener_name(self) -> str:
        return self.connection.listener_name

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether this request's principal may perform ``operation`` on the named resource."""
        connection = self.connection
        return self.broker.authorizer.authorize(
            connection.principal, connection.client_address, operation, resource_type, name
        )

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """KIP-679: whether ``operation`` is allowed on some resource of ``resource_type``."""
        connection = self.connection
        return self.broker.authorizer.authorize_by_resource_type(
            connection.principal, connection.client_address, operation, resource_type
        )
