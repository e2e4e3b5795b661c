"""The ground floor: the vocabulary every layer shares, with no I/O and no imports from the rest of
pybroker but ``pybroker.types`` (topic partitions, ``ZERO_UUID``). ``topic`` (the topic model, name
rules, internal topics and topic errors), ``errors`` (``ErrorCode`` and ``KafkaError``, the one
exception type an answer turns into its code), ``cluster`` (listeners, registered brokers, partition
state) and ``config`` (Kafka's ``ConfigDef`` framework, and the ``ListenerSettings`` a listener
reads). Kafka keeps the like in
``clients/src/main/java/org/apache/kafka/common/``.
"""
