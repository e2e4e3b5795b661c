"""Describing configs the way DescribeConfigs and CreateTopics (v5+) report them.

Owns Kafka's ConfigSource and ConfigType codes and the rules for a config entry's value, source,
read-only flag and synonyms (Kafka's ``ConfigHelper``), for topics (overrides over broker
defaults), for this broker (dynamic per-broker configs over the cluster defaults over
``server.properties`` over the built-in defaults), the cluster-wide defaults, and this broker's
loggers. A topic config's synonyms start, as Kafka's do, at its first broker name: the names of
its chain that come before it are dropped, so ``retention.ms`` shows ``log.retention.hours``
only behind a ``log.retention.ms`` that is set somewhere, and none at all otherwise (its source
is then DEFAULT_CONFIG, whichever broker name gave its value).

A broker lists, as Kafka's does, every config Kafka defines but its internal ones (`LISTED`) and
every name set in ``server.properties`` or dynamically. A name Kafka does not define (the
authorizer's ``super.users``, a custom one) has no type and is sensitive: no value is shown. A
listener's own setting (``listener.name.<l>.ssl.client.auth``) takes its base name's type and has
it as a synonym.

The replication throttles (``leader.replication.throttled.rate`` and the two others of Kafka's
``DynamicConfig.Broker``) are not KafkaConfig definitions in Kafka: a broker lists them only
where they are set (dynamically or in ``server.properties``), without a DEFAULT_CONFIG synonym.

Entries come in Kafka's order (`kafka_order`): ConfigHelper gathers a resource's configs into a
Scala ``mutable.HashMap`` and, when keys are requested, filters them into a new one; the answer
lists that map's iteration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from pybroker.common.config import AS_CUSTOM, LISTED, ConfigDef, format_value
from pybroker.jvm_collections import java_string_hash, scala_hash_map_order
from pybroker.log.config import TOPIC_CONFIGS
from pybroker.server import broker_loggers
from pybroker.server.config import BROKER_CONFIGS, LISTENER_PREFIX, SYNONYM_CHAINS
from pybroker.server.dynamic_broker_config import THROTTLE_CONFIGS, broker_synonyms, is_dynamic

if TYPE_CHECKING:
    from pybroker.server.services import BrokerServices


class ConfigSource(IntEnum):
    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


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
    #: Kafka never shows its value: a PASSWORD, or a broker name of no type Kafka knows.
    is_sensitive: bool = False


def kafka_order(names: Iterable[str], keys: list[str] | None = None) -> list[str]:
    """``names`` (those among ``keys`` when given) in the order Kafka's ConfigHelper lists a
    resource's configs: the iteration order of the Scala ``mutable.HashMap`` holding them (its
    filter by requested keys builds a new, smaller map, so the order depends on ``keys``)."""
    wanted = [name for name in names if keys is None or name in keys]
    return scala_hash_map_order(wanted, java_string_hash)


def _type(definition: ConfigDef) -> ConfigType:
    return ConfigType[definition.type]


def _synonym_layers(broker: BrokerServices, names: tuple[str, ...], sensitive: bool) -> list[tuple[str, str | None, ConfigSource]]:
    """Kafka's ``configSynonyms``: every name of ``names`` with a value, layer by layer — this
    broker's dynamic configs, the cluster defaults (both as stored, custom names included),
    ``server.properties`` (as written), the built-in defaults of the names Kafka defines (None
    when sensitive)."""
    layers: list[tuple[Mapping[str, Any], ConfigSource]] = [
        (broker.dynamic_config.broker_props, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker.dynamic_config.default_props, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker.config.originals, ConfigSource.STATIC_BROKER_CONFIG),
    ]
    out: list[tuple[str, str | None, ConfigSource]] = []
    for layer, source in layers:
        for name in names:
            if name in layer:
                out.append((name, None if sensitive else format_value(layer[name]), source))
    for name in names:
        definition = BROKER_CONFIGS.get(name)
        if (definition is not None and definition.default is not None and definition.listing != AS_CUSTOM
                and name not in THROTTLE_CONFIGS):
            out.append((name, None if sensitive else format_value(definition.default), ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic(broker: BrokerServices, topic: str, keys: list[str] | None = None,
                   overrides: Mapping[str, str] | None = None) -> list[ConfigEntry]:
    """Every topic config (or those named in ``keys``) with value, source and synonyms: the
    topic's override, then the broker names behind its default layer by layer (a dynamic broker
    default shows as DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG), from the first
    entry of its first broker name on (Kafka's ``configSynonyms``). ``overrides`` stands for the
    topic's stored ones (a topic CreateTopics only validates)."""
    if overrides is None:
        overrides = broker.admin_manager.topic_configs(topic)
    entries = []
    for name in kafka_order(TOPIC_CONFIGS, keys):
        definition = TOPIC_CONFIGS[name]
        chain: tuple[str, ...] = ()
        if definition.synonym is not None:
            chain = tuple(n for n in SYNONYM_CHAINS.get(definition.synonym, (definition.synonym,)) if n in BROKER_CONFIGS)
        synonyms = _synonym_layers(broker, chain, definition.type == "PASSWORD")
        while synonyms and synonyms[0][0] != definition.synonym:  # Kafka's dropWhile
            synonyms.pop(0)
        if name in overrides:
            value = overrides[name]
            synonyms.insert(0, (name, value, ConfigSource.TOPIC_CONFIG))
        else:
            value = format_value(broker.config.topic_default(name))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, _type(definition), definition.doc, synonyms,
                                   definition.type == "PASSWORD"))
    return entries


def _described_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's ``brokerConfigSynonyms`` as DescribeConfigs uses it: a listener's own setting
    (``listener.name.<l>.<base>``) is followed by ``<base>`` and, for a mechanism's
    (``listener.name.<l>.plain.sasl.jaas.config``), by what follows the mechanism."""
    if name.startswith(LISTENER_PREFIX) and "." in name[len(LISTENER_PREFIX):]:
        base = name[len(LISTENER_PREFIX):].split(".", 1)[1]
        return (name, base, base.split(".", 1)[1]) if "." in base else (name, base)
    return broker_synonyms(name)


def _broker_entry(broker: BrokerServices, name: str, per_broker: bool) -> ConfigEntry:
    """Kafka's ``createBrokerConfigEntry``: the type of the name, else of the first synonym Kafka
    defines (a name with none is UNKNOWN, and so sensitive: no value shown), the resolved value,
    synonyms from the most specific layer (those of more specific synonym names before ``name``
    itself dropped, as Kafka drops them), read-only unless dynamic."""
    names = _described_synonyms(name)
    definition = next((d for n in (name, *names)
                       if (d := BROKER_CONFIGS.get(n)) is not None and d.listing != AS_CUSTOM), None)
    config_type = ConfigType[definition.described_type or definition.type] if definition else ConfigType.UNKNOWN
    sensitive = config_type in (ConfigType.PASSWORD, ConfigType.UNKNOWN)
    synonyms = _synonym_layers(broker, names, sensitive)
    if not per_broker:
        synonyms = [s for s in synonyms if s[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    while synonyms and synonyms[0][0] != name:
        synonyms.pop(0)
    value: str | None
    if sensitive:
        value = None
    elif not per_broker:
        value = broker.dynamic_config.default_props.get(name)
    elif name in BROKER_CONFIGS:
        resolved = broker.config.get(name)
        value = None if resolved is None else format_value(resolved)
    else:  # a listener's own setting, as written
        value = synonyms[0][1] if synonyms else None
    source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(name, value, source, not is_dynamic(name), config_type,
                       definition.doc if definition else "", synonyms, sensitive)


def describe_broker(broker: BrokerServices, keys: list[str] | None = None) -> list[ConfigEntry]:
    """This broker's configuration (the resource named by its id), as Kafka lists it: every
    broker config Kafka defines (its internal ones, pybroker's own and the replication throttles
    only where set) and every name set in ``server.properties`` or dynamically, with Kafka's
    sources and synonyms."""
    dynamic = broker.dynamic_config
    listed = {name for name, d in BROKER_CONFIGS.items() if d.listing == LISTED and name not in THROTTLE_CONFIGS}
    names = listed | set(broker.config.originals) | set(dynamic.broker_props) | set(dynamic.default_props)
    return [_broker_entry(broker, name, True) for name in kafka_order(sorted(names), keys)]


def describe_broker_defaults(broker: BrokerServices, keys: list[str] | None = None) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (the resource named ""): only the names set there."""
    return [_broker_entry(broker, name, False) for name in kafka_order(broker.dynamic_config.default_props, keys)]


def describe_broker_loggers(keys: list[str] | None = None) -> list[ConfigEntry]:
    """Every logger with its effective level (Kafka: DYNAMIC_BROKER_LOGGER_CONFIG, not
    read-only, no synonyms, no type)."""
    levels = broker_loggers.loggers()
    return [ConfigEntry(name, levels[name], ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, ConfigType.UNKNOWN, "", [])
            for name in kafka_order(levels, keys)]
