"""How a client connection secures itself: Kafka's client-side ``security.protocol``, TLS and SASL settings.

`ClientSecurity` is what `BrokerConnection` is given: the protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), the TLS context and host name check for SSL and SASL_SSL, and the SASL
mechanism and credentials for SASL_*. The broker's own connections to other brokers build one from
its inter-broker listener; the project's clients and CLI build one from Kafka's client properties.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None  # SSL and SASL_SSL
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (SASL_*)
    sasl_username: str | None = None
    sasl_password: str | None = None

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ClientSecurity()
