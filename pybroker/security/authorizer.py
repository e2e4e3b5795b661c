"""Who may do what: Kafka's authorization vocabulary and the seam every handler asks.

Kafka's model (KIP-11): a principal (``User:alice``) on a client host performs an operation
(READ, WRITE, DELETE, …) on a resource (a TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID … with its
name). The enums carry Kafka's wire codes (``AclOperation``, ``ResourceType``, ``PatternType``,
``AclPermissionType``), as CreateAcls/DescribeAcls/DeleteAcls send them.

`Authorizer` is what the broker holds: `AllowAllAuthorizer` when ``authorizer.class.name`` is
empty (Kafka's default: everything allowed), otherwise the ACL authorizer. Handlers never call it
directly; they ask through their `RequestContext`, which knows the connection's principal and
host.
"""

from __future__ import annotations

import enum
from typing import Protocol

from pybroker.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = [
    "ANONYMOUS", "CLUSTER_NAME", "WILDCARD_RESOURCE", "AclOperation", "AclPermissionType", "AllowAllAuthorizer",
    "Authorizer", "PatternType", "ResourceType", "SUPPORTED_OPERATIONS", "to_32_bit_field",
]

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource
WILDCARD_RESOURCE = "*"  # a LITERAL resource name matching every name


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_OP = AclOperation
#: What each resource type supports (Kafka's ``AclEntry.supportedOperations``): the bits of an
#: authorized-operations field, and what a CreateAcls binding may name.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_OP.READ, _OP.WRITE, _OP.CREATE, _OP.DESCRIBE, _OP.DELETE, _OP.ALTER,
                                   _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_OP.READ, _OP.DESCRIBE, _OP.DELETE}),
    ResourceType.CLUSTER: frozenset({_OP.CREATE, _OP.CLUSTER_ACTION, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
                                     _OP.IDEMPOTENT_WRITE, _OP.ALTER, _OP.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_OP.DESCRIBE, _OP.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_OP.DESCRIBE}),
    ResourceType.USER: frozenset({_OP.CREATE_TOKENS, _OP.DESCRIBE_TOKENS}),
}


def to_32_bit_field(operations: frozenset[AclOperation] | set[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


class Authorizer(Protocol):
    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` connected from ``host`` (Java's address string) may perform
        ``operation`` on the LITERAL resource ``resource_type``/``name``."""
        ...

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """KIP-679: whether ``operation`` is allowed on at least one resource of the type."""
        ...


class AllowAllAuthorizer:
    """No authorizer configured: everything is allowed."""

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        return True

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return True
