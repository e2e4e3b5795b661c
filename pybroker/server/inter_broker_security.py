"""The security of a broker's own connections to other brokers, built from its configuration.

Owns `inter_broker_client`: the inter-broker listener (``inter.broker.listener.name``, else the
listener named after ``security.inter.broker.protocol``) and a `ClientSecurity` for its protocol:
a client TLS context for SSL and SASL_SSL (`pybroker.security.tls.client_context`), and for
SASL_PLAINTEXT and SASL_SSL the mechanism ``sasl.mechanism.inter.broker.protocol`` with the
``username`` and ``password`` of that listener's JAAS entry
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``), as Kafka's brokers log in.
"""

from __future__ import annotations

from pybroker.client.inter_broker import InterBrokerClient
from pybroker.client.security import ClientSecurity
from pybroker.common.config import ConfigError
from pybroker.security.jaas import JaasConfigError, parse_jaas_entry
from pybroker.security.tls import client_context
from pybroker.server.config import BrokerConfig


def inter_broker_client(config: BrokerConfig) -> InterBrokerClient:
    endpoint = config.inter_broker_listener
    listener, protocol = endpoint.listener_name, endpoint.security_protocol
    context = client_context(config, listener) if endpoint.uses_tls else None
    mechanism = username = password = None
    if endpoint.uses_sasl:
        mechanism = config.get("sasl.mechanism.inter.broker.protocol")
        raw = config.listener_get(listener, "sasl.jaas.config", mechanism)
        if raw is None:
            raise ConfigError(f"No JAAS configuration for the inter-broker listener {listener}: set "
                              f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config "
                              "with username and password")
        try:
            options = parse_jaas_entry(raw).options
        except JaasConfigError as e:
            raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config: {e}") from None
        username, password = options.get("username"), options.get("password")
        if username is None or password is None:
            raise ConfigError(f"The JAAS configuration of listener {listener} ({mechanism}) has no username and "
                              "password for the broker's own connections")
    security = ClientSecurity(protocol, context, mechanism, username, password)
    return InterBrokerClient(listener, security)
