"""How a client connection secures itself: Kafka's client-side ``security.protocol``, TLS and SASL settings.

`ClientSecurity` is what `BrokerConnection` is given: the protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), the TLS context and host name check for SSL and SASL_SSL, and the SASL
mechanism and credentials for SASL_*. The broker's own connections to other brokers build one from
its inter-broker listener; the project's clients and CLI build one from Kafka's client properties
(`security_from_properties`).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
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


class ClientSecurityError(ValueError):
    """Kafka client security properties that cannot be used (a bad value or an unsupported feature)."""


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The login module each mechanism's sasl.jaas.config names (Kafka's client classes).
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

# The client security properties that are applied; any other ``ssl.*``/``sasl.*`` name is reported
# by `ignored_security_properties`.
APPLIED_SECURITY_PROPERTIES = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.password",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.keystore.password", "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols",
    "ssl.protocol",
})


def ignored_security_properties(props: Mapping[str, object]) -> list[str]:
    """The ``ssl.*``/``sasl.*``/``security.providers`` names of ``props`` this client does not apply."""
    return [name for name in props
            if (name.startswith(("ssl.", "sasl.")) or name == "security.providers")
            and name not in APPLIED_SECURITY_PROPERTIES]


def security_from_properties(props: Mapping[str, object]) -> ClientSecurity:
    """A `ClientSecurity` from Kafka's client properties: ``security.protocol`` (default
    PLAINTEXT); for SSL and SASL_SSL the PEM forms of ``ssl.truststore.*``/``ssl.keystore.*``,
    ``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (default https) and
    ``ssl.enabled.protocols``; for SASL_* ``sasl.mechanism`` (Kafka's default GSSAPI is not
    supported) and ``sasl.jaas.config`` with the mechanism's login module and its ``username`` and
    ``password`` options. Raises `ClientSecurityError` with the reason."""
    from pybroker.security.jaas import JaasConfigError, parse_jaas_entry
    from pybroker.security.tls import SslConfigError, client_context_from

    text = {k: str(v) for k, v in props.items() if v is not None}
    protocol = text.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ClientSecurityError(f"Invalid value {text['security.protocol']} for configuration security.protocol: "
                                  f"String must be one of: {', '.join(SECURITY_PROTOCOLS)}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = client_context_from(lambda name: text.get(name))
        except SslConfigError as e:
            raise ClientSecurityError(f"Failed to load SSL client settings: {e}") from None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, context)
    mechanism = text.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ClientSecurityError(f"sasl.mechanism {mechanism} is not supported by pybroker's clients "
                                  f"(supported: {', '.join(SASL_MECHANISMS)})")
    raw = text.get("sasl.jaas.config")
    if raw is None:
        raise ClientSecurityError(f"sasl.jaas.config is required for {protocol} with {mechanism}: "
                                  f'{LOGIN_MODULES[mechanism]} required username="..." password="...";')
    try:
        entry = parse_jaas_entry(raw)
    except JaasConfigError as e:
        raise ClientSecurityError(f"sasl.jaas.config: {e}") from None
    if entry.login_module != LOGIN_MODULES[mechanism]:
        raise ClientSecurityError(f"sasl.jaas.config: {mechanism} needs the login module {LOGIN_MODULES[mechanism]}, "
                                  f"not {entry.login_module}")
    username, password = entry.options.get("username"), entry.options.get("password")
    if username is None or password is None:
        raise ClientSecurityError("sasl.jaas.config: the username and password options are required")
    return ClientSecurity(protocol, context, mechanism, username, password)
