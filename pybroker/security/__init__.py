"""Security below the network: Kafka's SASL mechanisms, TLS contexts, principals and ACLs.

``sasl`` holds what every mechanism shares (the failure exceptions that carry the client-facing
text, the ``SaslServer`` shape); ``plain`` is SASL/PLAIN, ``scram`` SCRAM-SHA-256/512 with Kafka's
credential format; ``jaas`` parses Kafka's ``sasl.jaas.config`` values. Nothing there does I/O:
a mechanism's server is fed one client token at a time and answers the next server token.
``pybroker.network.sasl_authenticator`` puts them on the wire: the per-connection state machine
of a SASL listener (SaslHandshake, SaslAuthenticate, KIP-368), in front of the request
dispatcher; ``sasl_client`` is the client side of the same mechanisms, for ``BrokerConnection``.
``tls`` builds TLS contexts from a listener's settings; ``principal`` and ``ssl_principal`` name
the client; ``authorizer``, ``acl_authorizer`` and ``acl_store`` hold Kafka's ACLs, and
``credential_cache`` the SCRAM credentials a listener checks.
"""
