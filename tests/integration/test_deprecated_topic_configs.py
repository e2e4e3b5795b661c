"""Kafka 3.x's deprecated topic configs through a real admin client (confluent-kafka): a topic
created with ``message.format.version=2.8`` exists and describes it, Kafka's validator refuses an
unknown version, an old format is warned about as Kafka warns, and none of it changes what the
log does."""

from __future__ import annotations

import pytest

from tests.integration import clients

TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def describe(bootstrap: str, topic: str) -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = admin_client(bootstrap)  # kept alive until the answer is in
    return admin.describe_configs([resource])[resource].result(30)


def test_create_with_message_format_version_then_describe(broker, topic_name):
    from confluent_kafka.admin import NewTopic

    configs = {"message.format.version": "2.8", "message.downconversion.enable": "false", "preallocate": "true"}
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1, config=configs)])[topic_name].result(30)
    described = describe(broker.bootstrap, topic_name)
    version = described["message.format.version"]
    assert (version.value, int(version.source), version.is_default) == ("2.8", TOPIC_CONFIG, False)
    assert [(s.name, s.value) for s in version.synonyms.values()] == [
        ("message.format.version", "2.8"), ("log.message.format.version", "3.0-IV1")]
    assert described["message.downconversion.enable"].value == "false"
    assert described["preallocate"].value == "true"
    # Without effect: records go in and come out as on any topic.
    pairs = [(b"k", b"v"), (None, b"w")]
    clients.produce_confluent(broker.bootstrap, topic_name, pairs)
    assert [(k, v) for _, k, v, _ in clients.consume_confluent(broker.bootstrap, topic_name, 2)] == pairs


def test_defaults_are_described(broker, topic_name):
    from confluent_kafka.admin import NewTopic

    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    described = describe(broker.bootstrap, topic_name)
    version = described["message.format.version"]
    assert (version.value, int(version.source), version.is_default) == ("3.0-IV1", DEFAULT_CONFIG, True)
    assert (described["message.downconversion.enable"].value, described["preallocate"].value) == ("true", "false")


def test_an_unknown_version_is_an_invalid_config(broker, topic_name):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    topic = NewTopic(topic_name, 1, 1, config={"message.format.version": "9.9"})
    admin = admin_client(broker.bootstrap)
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([topic])[topic_name].result(30)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Version 9.9 is not a valid version" in error.str()


def test_an_old_format_set_later_is_warned_about(broker, topic_name):
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    mark = broker.log_mark()
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("message.format.version", "0.10.2", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    line = broker.wait_for_log(r"message\.format\.version", since=mark)
    assert " WARNING " in line or " WARN " in line, line
    assert (f"Topic configuration message.format.version with value `0.10.2` is ignored for `{topic_name}` because "
            "the inter-broker protocol version `3.9-IV0` is greater or equal than 3.0.") in line
    assert describe(broker.bootstrap, topic_name)["message.format.version"].value == "0.10.2"
