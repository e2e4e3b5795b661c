"""What a request handler is given: the broker's services (`BrokerServices`), the request header,
and the connection, and the one way a handler asks the broker's authorizer (as the connection's
principal, from its host).

A handler may ask only the (operation, resource type) pairs its module declares in ``AUTHORIZES``
(`pybroker.server.apis`); the dispatcher hands the declaration to the context, and asking an
undeclared pair raises `UndeclaredAuthorization` (a broker bug: the dispatcher answers
UNKNOWN_SERVER_ERROR), so a handler's declaration is a complete list of what it checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_32_bit_field,
)
from pybroker.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from pybroker.network.connection import KafkaConnection
    from pybroker.server.services import BrokerServices

log = logging.getLogger(__name__)

Authorization = tuple[AclOperation, ResourceType]


class UndeclaredAuthorization(RuntimeError):
    """A handler asked the authorizer about a pair its module's ``AUTHORIZES`` does not list."""


@dataclass
class RequestContext:
    services: BrokerServices
    header: Any  # the decoded request header (api_key, api_version, correlation_id, client_id)
    connection: KafkaConnection
    # The handler module's AUTHORIZES, handed over by the dispatcher.
    authorizes: frozenset[Authorization]
    # Set by the dispatcher when the handler returned a future: encodes that future's response
    # and hands it to the connection (see `responded`).
    on_response: Callable[[], None] | None = None

    def responded(self) -> None:
        """The future the handler returned has just been completed (by a callback, e.g. the
        group coordinator's): its reply goes to the connection in this step, before any request
        handled from now on is answered, as Kafka sends a response from the callback that
        completes it. Nothing to do when the future was completed before the handler returned
        (the dispatcher answers it then). A failure to hand the reply over is logged, not raised
        into the code that completed the future."""
        hand_over, self.on_response = self.on_response, None
        if hand_over is None:
            return
        try:
            hand_over()
        except Exception:
            log.exception("Handing the reply to a request (API key %s, correlation id %s) to its connection "
                          "failed", getattr(self.header, "api_key", "?"), getattr(self.header, "correlation_id", "?"))

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

    def _check_declared(self, operation: AclOperation, resource_type: ResourceType) -> None:
        if (operation, resource_type) not in self.authorizes:
            raise UndeclaredAuthorization(
                f"API key {getattr(self.header, 'api_key', '?')} asked {operation.name} on {resource_type.name}, "
                f"which its handler's AUTHORIZES does not declare"
            )

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether this request's principal may perform ``operation`` on the named resource."""
        self._check_declared(operation, resource_type)
        connection = self.connection
        return self.services.authorizer.authorize(
            connection.principal, connection.client_address, operation, resource_type, name
        )

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """KIP-679: whether ``operation`` is allowed on some resource of ``resource_type``."""
        self._check_declared(operation, resource_type)
        connection = self.connection
        return self.services.authorizer.authorize_by_resource_type(
            connection.principal, connection.client_address, operation, resource_type
        )

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bitfield of a resource (``Utils.to32BitField``): the
        supported operations of its type this principal may perform, each asked of the
        authorizer (so the handler declares every supported pair of the type)."""
        return to_32_bit_field({
            operation for operation in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(operation, resource_type, name)
        })


def supported(resource_type: ResourceType) -> frozenset[Authorization]:
    """Every (operation, ``resource_type``) pair an authorized-operations bitfield asks."""
    return frozenset((operation, resource_type) for operation in SUPPORTED_OPERATIONS[resource_type])
