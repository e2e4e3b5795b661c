"""Describing configs the way DescribeConfigs and CreateTopics (v5+) report them.

Owns Kafka's ConfigSource and ConfigType codes and the rules for a config entry's value, source,
read-only flag and synonyms, for topics (overrides over broker defaults) and for this broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from pybroker.log.config import TOPIC_CONFIGS, ConfigDef, format_value
from pybroker.server.config import BROKER_CONFIGS

if TYPE_CHECKING:
    from pybroker.server.broker import Broker


class ConfigSource(IntEnum):
    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ResourceType(IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    type: ConfigType
    documentation: str
    synonyms: list[tuple[str, str | None, ConfigSource]]

    @property
    def is_sensitive(self) -> bool:
        """A PASSWORD config: Kafka never shows its value."""
        return self.type == ConfigType.PASSWORD


def _type(definition: ConfigDef) -> ConfigType:
    return ConfigType[definition.type]


def describe_topic(broker: Broker, topic: str, keys: list[str] | None = None) -> list[ConfigEntry]:
    """Every topic config (or those named in ``keys``) with value, source and synonyms."""
    overrides = broker.admin_manager.topic_configs(topic)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        if keys is not None and name not in keys:
            continue
        definition = TOPIC_CONFIGS[name]
        broker_synonyms = broker.config.topic_default_synonyms(name)
        synonyms = [(n, v, ConfigSource.STATIC_BROKER_CONFIG if set_ else ConfigSource.DEFAULT_CONFIG)
                    for n, v, set_ in broker_synonyms]
        if name in overrides:
            value, source = overrides[name], ConfigSource.TOPIC_CONFIG
            synonyms.insert(0, (name, value, ConfigSource.TOPIC_CONFIG))
        else:
            value = format_value(broker.config.topic_default(name))
            explicit = any(set_ for _, _, set_ in broker_synonyms)
            source = ConfigSource.STATIC_BROKER_CONFIG if explicit else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, _type(definition), definition.doc, synonyms))
    return entries


def describe_broker(broker: Broker, keys: list[str] | None = None) -> list[ConfigEntry]:
    """This broker's static configuration (read-only: pybroker has no dynamic broker configs)."""
    entries: list[ConfigEntry] = []
    for name in sorted(BROKER_CONFIGS):
        if keys is not None and name not in keys:
            continue
        definition = BROKER_CONFIGS[name]
        value = broker.config.get(name)
        rendered = None if value is None or definition.type == "PASSWORD" else format_value(value)
        source = ConfigSource.STATIC_BROKER_CONFIG if broker.config.is_set(name) else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(name, rendered, source, True, _type(definition), definition.doc, [(name, rendered, source)])
        )
    return entries
