"""Who is on the other end of a connection: Kafka's ``KafkaPrincipal`` and the client's address.

A principal is a type and a name, written ``User:alice``. A PLAINTEXT connection, and an SSL one
without a client certificate, is ``User:ANONYMOUS``; SASL gives ``User:<authorization id>``; a
client certificate gives ``User:<mapped DN>``. ACLs and ``super.users`` name principals in the
same ``Type:name`` form, which `KafkaPrincipal.parse` reads as Kafka's ``SecurityUtils`` does
(the first ``:`` splits; equality is case-sensitive).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

USER_TYPE = "User"


class PrincipalFormatError(ValueError):
    """A principal string without the ``Type:name`` form."""


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` → KafkaPrincipal("User", "alice"); anything without ``:`` is refused."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise PrincipalFormatError(f"expected a string in format principalType:principalName but got {text}")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def java_host_address(host: str) -> str:
    """The client address as Kafka matches it against an ACL's host: Java's
    ``InetAddress.getHostAddress`` (IPv4-mapped IPv6 addresses become IPv4; IPv6 written in full
    without ``::`` compression, lower-case hex without leading zeros)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in address.exploded.split(":"))
    return str(address)
