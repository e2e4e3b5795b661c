"""Authentication: the server side of Kafka's SASL mechanisms and their configuration.

``sasl`` holds what every mechanism shares (the failure exceptions that carry the client-facing
text, the ``SaslServer`` shape); ``plain`` is SASL/PLAIN, ``scram`` SCRAM-SHA-256/512 with Kafka's
credential format; ``jaas`` parses Kafka's ``sasl.jaas.config`` values. Nothing here does I/O:
a mechanism's server is fed one client token at a time and answers the next server token.
"""
