"""Authentication: the server side of Kafka's SASL mechanisms and their configuration.

``sasl`` holds what every mechanism shares (the failure exceptions that carry the client-facing
text, the ``SaslServer`` shape); ``plain`` is SASL/PLAIN, ``scram`` SCRAM-SHA-256/512 with Kafka's
credential format; ``jaas`` parses Kafka's ``sasl.jaas.config`` values. Nothing there does I/O:
a mechanism's server is fed one client token at a time and answers the next server token.
``authenticator`` puts them on the wire: the per-connection state machine of a SASL listener
(SaslHandshake, SaslAuthenticate, KIP-368), in front of the request dispatcher; ``sasl_client``
is the client side of the same mechanisms, for ``BrokerConnection``.
"""
