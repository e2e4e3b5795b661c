"""What CreateAcls, DescribeAcls and DeleteAcls share (Kafka's ``AclApis`` and the request classes'
validation): reading the wire's enum codes, the parse-time checks that close the connection,
and the broker's ACL authorizer, if it has one.

As in Kafka, a request naming an UNKNOWN (or undefined) resource type, pattern type, operation or
permission type, or a v0 request with a pattern type other than LITERAL (v0 Describe and Delete
read ANY as LITERAL first), fails to parse: the connection is closed (`CloseConnection`), before
any authorization.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, TypeVar

from pybroker.network.connection import CloseConnection
from pybroker.security.acl import AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter
from pybroker.security.acl_authorizer import AclAuthorizer
from pybroker.security.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType

if TYPE_CHECKING:
    from pybroker.server.services import BrokerServices

E = TypeVar("E", bound=enum.IntEnum)

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."


def acl_authorizer(broker: BrokerServices) -> AclAuthorizer | None:
    """The broker's ACL authorizer; None when ``authorizer.class.name`` is empty."""
    authorizer = broker.authorizer
    return authorizer if isinstance(authorizer, AclAuthorizer) else None


def from_code(enum_type: type[E], code: int) -> E:
    """Java's ``fromCode``: a code the enum does not define reads as UNKNOWN (0)."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type(0)


def not_authorized_message(api_name: str, ctx_principal: object, client_address: str) -> str:
    """Kafka's ``authorizeClusterOperation`` message is the Java request's toString; ours names the
    request, principal and address."""
    return f"Request {api_name} from {ctx_principal} at {client_address} is not authorized."


def check_v0_pattern_type(version: int, code: int, what: str) -> int:
    """v0 knows only LITERAL: ANY reads as LITERAL in filters, anything else closes."""
    if version == 0:
        if code == PatternType.ANY and what != "creation":
            return int(PatternType.LITERAL)
        if code != PatternType.LITERAL:
            raise CloseConnection(f"{what}: version 0 only supports literal resource pattern types")
    return code


def binding_filter(
    version: int, resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
    operation: int, permission_type: int, what: str,
) -> AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter from its wire fields; closes on UNKNOWN elements."""
    pattern_type = check_v0_pattern_type(version, pattern_type, what)
    resource = from_code(ResourceType, resource_type)
    pattern = from_code(PatternType, pattern_type)
    op = from_code(AclOperation, operation)
    permission = from_code(AclPermissionType, permission_type)
    if resource == ResourceType.UNKNOWN or pattern == PatternType.UNKNOWN or op == AclOperation.UNKNOWN \
            or permission == AclPermissionType.UNKNOWN:
        raise CloseConnection(f"{what} contains UNKNOWN elements")
    return AclBindingFilter(ResourcePatternFilter(resource, name, pattern),
                            AccessControlEntryFilter(principal, host, op, permission))
