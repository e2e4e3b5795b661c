"""Dynamic broker configs: which broker configs may change at run time, their checks, and applying them.

Owns Kafka's ``DynamicBrokerConfig`` rules as pybroker can honour them: the set of dynamic names
(`DYNAMIC_CONFIGS`: Kafka's list restricted to what pybroker applies without a restart), the
checks an AlterConfigs / IncrementalAlterConfigs of a BROKER resource makes (`validate`, with
Kafka's messages), reading the stored layers (``/config/brokers/<id>`` and
``/config/brokers/<default>``, or the local metadata file) into `BrokerConfig`'s dynamic
layers (`DynamicBrokerConfig.on_broker_configs`, registered as the broker's "brokers" config
handler), and the reconfigurations a change triggers (`DynamicBrokerConfig.add_reconfigurables`):

- the log config defaults (Kafka's ``DynamicLogConfig``: every broker name a topic config falls
  back to, ``log.message.format.version`` excepted) re-resolve every log's `LogConfig`, so a log
  without an override follows the new default at once; ``unclean.leader.election.enable``
  reaches the controller's default too;
- the log cleaner settings (Kafka's ``LogCleaner.ReconfigurableConfigs``) restart the cleaner
  threads with the new `CleanerConfig`, as Kafka does;
- ``num.replica.fetchers`` resizes the replica fetcher pool (partitions move to their new fetcher
  with their fetch state, Kafka's ``resizeThreadPool``); ``num.recovery.threads.per.data.dir``
  and ``producer.id.expiration.ms`` take effect at their next use;
- the replication throttle rates are only stored and resolved here (the quota code reads them
  through ``broker.config`` and registers its own reconfigurable);
- ``advertised.listeners`` (per broker only, as in Kafka) rewrites the broker's registration, and
  the controller sends the new endpoints to every broker.

Values are stored as given (strings); Kafka's dynamic PASSWORD configs are all SSL/SASL listener
configs, which pybroker refuses (its TLS contexts are built once at start), so nothing stored here
is secret and no ``password.encoder.secret`` is needed. Names pybroker does not know are kept
as Kafka keeps custom configs (stored, listed without their value, without effect); Kafka's
settings for what pybroker has not (`unapplied_configs`) are read-only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.common.config import ConfigError
from pybroker.controller.store import DEFAULT_ENTITY
from pybroker.log.cleaner import CleanerConfig
from pybroker.log.config import TOPIC_CONFIGS
from pybroker.server.config import BROKER_CONFIGS, LISTENER_PREFIX, SYNONYM_CHAINS, BrokerConfig

if TYPE_CHECKING:
    from pybroker.controller.controller import Controller
    from pybroker.log.log_manager import LogManager
    from pybroker.server.replica_manager import ReplicaManager

    class Broker(Protocol):
        """What a dynamic change reconfigures (`DynamicBrokerConfig.add_reconfigurables`)."""

        config: BrokerConfig
        log_manager: LogManager
        replica_manager: ReplicaManager
        controller: Controller

        def update_registration(self) -> None: ...

log = logging.getLogger(__name__)

#: Kafka's DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of every topic config
#: (``log.retention.ms``, not ``log.retention.hours``), ``log.message.format.version`` excepted.
DYNAMIC_LOG_CONFIGS = frozenset(
    d.synonym for d in TOPIC_CONFIGS.values()
    if d.synonym is not None and d.synonym in BROKER_CONFIGS and d.synonym != "log.message.format.version"
)
#: Kafka's LogCleaner.ReconfigurableConfigs (a change restarts the cleaner threads).
CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
})
#: Kafka's DynamicThreadPool.ReconfigurableConfigs, checked as Kafka checks them (at most double,
#: at least half the current count). num.io.threads, num.network.threads and background.threads
#: are accepted and described without effect: an asyncio broker has no such pools.
THREAD_POOL_CONFIGS = frozenset({
    "num.replica.fetchers", "num.recovery.threads.per.data.dir", "num.io.threads", "num.network.threads",
    "background.threads",
})
#: Kafka's ProducerStateManagerConfig.RECONFIGURABLE_CONFIGS that pybroker applies at run time.
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms"})
#: Kafka's DynamicConfig.Broker: settable only dynamically (replication throttles).
THROTTLE_CONFIGS = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
#: Kafka's DynamicListenerConfig.ReconfigurableConfigs that pybroker applies: a new
#: ``advertised.listeners`` rewrites the broker's registration (``listeners`` and the security
#: protocol map stay read-only: pybroker binds its listeners once, at start).
LISTENER_CONFIGS = frozenset({"advertised.listeners"})
#: Kafka's DynamicBrokerConfig.PerBrokerConfigs that pybroker has: settable for one broker only.
PER_BROKER_CONFIGS = LISTENER_CONFIGS
#: Every broker config pybroker lets AlterConfigs / IncrementalAlterConfigs change (the rest of
#: `BROKER_CONFIGS` is read-only: "Cannot update these configs dynamically").
DYNAMIC_CONFIGS = (DYNAMIC_LOG_CONFIGS | CLEANER_CONFIGS | THREAD_POOL_CONFIGS | PRODUCER_STATE_CONFIGS
                   | THROTTLE_CONFIGS | LISTENER_CONFIGS)
#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic in Kafka only per listener
#: (``listener.name.<l>.ssl.keystore.location``); pybroker cannot reload them at all.
_SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})


class DynamicConfigError(ValueError):
    """A dynamic broker config change Kafka refuses; the message is Kafka's."""


def scala_set(names: Iterable[str]) -> str:
    """How Kafka's messages print a set of names: ``Set(a, b)``."""
    return f"Set({', '.join(names)})"


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's ``brokerConfigSynonyms``: the names that set one value, most specific first
    (``log.retention.hours`` → ms, minutes, hours); a name alone otherwise."""
    for chain in SYNONYM_CHAINS.values():
        if name in chain:
            return chain
    return (name,)


def is_dynamic(name: str) -> bool:
    """Whether DescribeConfigs shows ``name`` as not read-only."""
    return name in DYNAMIC_CONFIGS


def _non_dynamic(props: Mapping[str, str]) -> list[str]:
    return [k for k in props if k in BROKER_CONFIGS and k not in DYNAMIC_CONFIGS and k not in _SSL_RECONFIGURABLE]


def parse_value(name: str, raw: str) -> Any:
    """A dynamic value parsed as its definition says; ConfigError with Kafka's text ("Invalid
    value V for configuration N: ...") otherwise."""
    return BROKER_CONFIGS[name].parse(raw)


def check_names_and_types(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's ``DynamicBrokerConfig.validateConfigs``: non-dynamic names, security configs,
    values that do not parse. Raises DynamicConfigError."""
    non_dynamic = _non_dynamic(props)
    if non_dynamic:
        raise DynamicConfigError(f"Cannot update these configs dynamically: {scala_set(non_dynamic)}")
    per_broker_only = [k for k in props if k in PER_BROKER_CONFIGS]
    if per_broker_only and not per_broker:
        raise DynamicConfigError("Cannot update these configs at default cluster level, broker id must be specified: "
                                 f"{scala_set(per_broker_only)}")
    security = [k for k in props if k in _SSL_RECONFIGURABLE]
    if security:
        raise DynamicConfigError("These security configs can be dynamically updated only per-listener using the "
                                 f"listener prefix: {scala_set(security)}")
    listener = [k for k in props if k.startswith(LISTENER_PREFIX)]
    if listener:
        # Kafka reloads a listener's TLS and SASL settings; pybroker builds them once at start.
        raise DynamicConfigError("pybroker cannot update listener configs dynamically (set them in server.properties "
                                 f"and restart the broker): {scala_set(listener)}")
    for name, raw in props.items():
        if name in BROKER_CONFIGS:
            try:
                parse_value(name, raw)
            except ConfigError as e:
                raise DynamicConfigError(str(e)) from None


def _thread_count_check(name: str, new: int, old: int, messages: tuple[str, str, str]) -> None:
    if new == old:
        return
    if new < 1:
        raise DynamicConfigError(messages[0])
    if new < old // 2:
        raise DynamicConfigError(messages[1])
    if new > old * 2:
        raise DynamicConfigError(messages[2])


def _invalid_dynamic(message: str) -> DynamicConfigError:
    """Kafka wraps a reconfigurable's refusal in ``new ConfigException("Invalid dynamic
    configuration", e)``, whose message reads like this."""
    return DynamicConfigError(f"Invalid value org.apache.kafka.common.config.ConfigException: {message} for "
                              "configuration Invalid dynamic configuration")


class DynamicBrokerConfig:
    """This broker's view of the dynamic broker configs: the stored layers as last told, their
    checks, and the reconfigurations a change triggers (Kafka's ``DynamicBrokerConfig``)."""

    def __init__(self, node_id: int, config: BrokerConfig) -> None:
        self.node_id = node_id
        self.config = config
        #: The raw stored maps last applied (invalid and non-dynamic entries dropped).
        self.broker_props: dict[str, str] = {}
        self.default_props: dict[str, str] = {}
        #: Each reconfigurable's check of a candidate config (``get`` of the candidate), run
        #: before anything is stored (Kafka's ``validateReconfiguration``).
        self._checks: list[Callable[[Callable[[str], Any]], None]] = []

    # --- reading what is stored ------------------------------------------------------------

    def from_persistent(self, stored: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """Kafka's ``fromPersistentProps``: the stored map without the entries this broker
        cannot apply (each kind logged as Kafka logs it)."""
        props = dict(stored)
        invalid = []
        for name, raw in props.items():
            if name in BROKER_CONFIGS:
                try:
                    parse_value(name, raw)
                except ConfigError:
                    invalid.append(name)
        if invalid:
            for name in invalid:
                del props[name]
            source = "broker" if per_broker else "default cluster"
            log.error("Dynamic %s config contains invalid values in: %s, these configs will be ignored",
                      source, scala_set(invalid))
        for names, message in (
            (_non_dynamic(props), "Non-dynamic configs configured in ZooKeeper will be ignored"),
            ([k for k in props if k in _SSL_RECONFIGURABLE or k.startswith(LISTENER_PREFIX)],
             "Security configs cannot be updated dynamically by pybroker, they will be ignored"),
        ):
            if names:
                for name in names:
                    del props[name]
                log.error("%s: %s", message, scala_set(names))
        return props

    def on_broker_configs(self, name: str, stored: Mapping[str, str]) -> None:
        """The broker config handler (``Broker.entity_config_handlers["brokers"]``): a change of
        ``/config/brokers/<name>``. This broker follows its own id and ``<default>``."""
        if name == DEFAULT_ENTITY:
            props = self.from_persistent(stored, per_broker=False)
            if props == self.default_props:
                return
            self.default_props = props
            changed = self.config.update_dynamic(cluster_default=props)
            what = "Cluster default configs"
        elif name == str(self.node_id):
            props = self.from_persistent(stored, per_broker=True)
            if props == self.broker_props:
                return
            self.broker_props = props
            changed = self.config.update_dynamic(broker=props)
            what = f"Per-broker configs of {self.node_id}"
        else:
            return
        if changed:
            log.info("%s updated: %s", what, ", ".join(sorted(changed)))

    # --- checking a change -------------------------------------------------------------------

    def candidate(self, props: Mapping[str, str], per_broker: bool) -> Callable[[str], Any]:
        """``get`` of the config this broker would have with ``props`` as its per-broker layer
        (``per_broker``) or as the cluster defaults (Kafka's ``validatedKafkaProps``)."""
        broker_props = props if per_broker else self.broker_props
        default_props = self.default_props if per_broker else props
        known = BROKER_CONFIGS

        def get(name: str) -> Any:
            for layer in (broker_props, default_props):
                if name in layer and name in known:
                    return known[name].parse(layer[name])
            return self.config.static_value(name)

        return get

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's ``DynamicBrokerConfig.validate``: names and values, then every
        reconfigurable's check of the resulting config. Raises DynamicConfigError."""
        check_names_and_types(props, per_broker)
        get = self.candidate(props, per_broker)
        for check in self._checks:
            check(get)

    # --- reconfiguration ---------------------------------------------------------------------

    def add_reconfigurables(self, broker: Broker) -> None:
        """Register what a change reconfigures on ``broker`` (Kafka's ``addReconfigurables``)."""
        config = self.config
        log_manager = broker.log_manager

        def log_defaults_changed(names: set[str]) -> None:
            log_manager.update_all_configs()
            if "unclean.leader.election.enable" in names:
                broker.controller.unclean_leader_election_default = config.get("unclean.leader.election.enable")

        config.add_reconfigurable(DYNAMIC_LOG_CONFIGS, log_defaults_changed)

        cleaner = log_manager.cleaner
        if cleaner is not None:
            def check_cleaner(get: Callable[[str], Any]) -> None:
                new, old = get("log.cleaner.threads"), cleaner.config.threads
                if new < 1:
                    raise _invalid_dynamic("Log cleaner threads should be at least 1")
                if new < old // 2:
                    raise _invalid_dynamic(f"Log cleaner threads cannot be reduced to less than half the current value {old}")
                if new > old * 2:
                    raise _invalid_dynamic(
                        f"Log cleaner threads cannot be increased to more than double the current value {old}")

            self._checks.append(check_cleaner)
            config.add_reconfigurable(CLEANER_CONFIGS, lambda names: log_manager.reconfigure_cleaner(
                CleanerConfig.from_broker_config(config.get)))

        def check_thread_pools(get: Callable[[str], Any]) -> None:
            for name in sorted(THREAD_POOL_CONFIGS):
                new, old = get(name), config.get(name)
                error = f"Dynamic thread count update validation failed for {name}={new}"
                try:
                    _thread_count_check(name, new, old, (
                        f"{error}, value should be at least 1",
                        f"{error}, value should be at least half the current value {old}",
                        f"{error}, value should not be greater than double the current value {old}"))
                except DynamicConfigError as e:
                    raise _invalid_dynamic(str(e)) from None

        self._checks.append(check_thread_pools)

        def thread_pools_changed(names: set[str]) -> None:
            if "num.recovery.threads.per.data.dir" in names:
                log_manager.recovery_threads = config.get("num.recovery.threads.per.data.dir")
            manager = broker.replica_manager.fetcher_manager
            if "num.replica.fetchers" in names and manager is not None:
                manager.resize_thread_pool(config.get("num.replica.fetchers"))

        config.add_reconfigurable(THREAD_POOL_CONFIGS, thread_pools_changed)

        def producer_state_changed(names: set[str]) -> None:
            log_manager.producer_id_expiration_ms = config.get("producer.id.expiration.ms")

        config.add_reconfigurable(PRODUCER_STATE_CONFIGS, producer_state_changed)

        def check_listeners(get: Callable[[str], Any]) -> None:
            # Kafka's DynamicListenerConfig.validateReconfiguration, for what pybroker may change.
            try:
                advertised = config.endpoints_of(get("advertised.listeners"))
            except ConfigError as e:
                raise DynamicConfigError(str(e)) from None  # Kafka's own text, not wrapped
            names = [e.listener_name for e in advertised]
            listeners = [e.listener_name for e in config.listeners]
            if config.inter_broker_listener_name not in names:  # KafkaConfig's own check, first
                raise DynamicConfigError(
                    "requirement failed: inter.broker.listener.name must be a listener name defined in "
                    f"advertised.listeners. The valid options based on currently configured listeners are "
                    f"{','.join(names)}")
            if not set(names) <= set(listeners):
                raise _invalid_dynamic(f"Advertised listeners '{', '.join(names)}' must be a subset of listeners "
                                       f"'{', '.join(listeners)}'")

        self._checks.append(check_listeners)
        config.add_reconfigurable(LISTENER_CONFIGS, lambda names: broker.update_registration())

