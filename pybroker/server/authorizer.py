"""Who may do what: the seam every handler asks before acting on a resource.

Kafka's model: a principal (``User:NAME``), an operation (READ, WRITE, DELETE, DESCRIBE, …) and a
resource (a TOPIC, GROUP, CLUSTER … with its name). Until SASL and ACLs land every connection is
``User:ANONYMOUS`` and ``AllowAllAuthorizer`` grants everything; handlers already ask, in Kafka's
order, so adding ACLs changes no handler.
"""

from __future__ import annotations

import enum
from typing import Protocol

ANONYMOUS = "User:ANONYMOUS"


class Operation(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    CLUSTER_ACTION = "CLUSTER_ACTION"


class ResourceType(enum.Enum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"


class Authorizer(Protocol):
    def authorize(self, principal: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` may perform ``operation`` on the named resource."""
        ...


class AllowAllAuthorizer:
    """No ACLs: everything is allowed."""

    def authorize(self, principal: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return True
