"""Broker configuration: Kafka's broker property names, defaults, and how they are read.

Owns ``BrokerConfig``: parsing a ``server.properties``-style file plus ``key=value`` overrides,
Kafka's defaults (with pybroker's few deliberate differences written next to them), listener
parsing with each listener's security protocol and Kafka's listener checks (run at construction, so a bad
configuration stops the start with one line), the inter-broker listener, and the broker-level
defaults that topic configs fall back to.
"""

from __future__ import annotations

import ipaddress
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pybroker.common.cluster import SECURITY_PROTOCOLS, Endpoint
from pybroker.common.config import (
    AS_CUSTOM,
    LONG_MAX,
    WHEN_SET,
    ConfigDef,
    ConfigError,
    format_value,
)
from pybroker.log.config import TOPIC_CONFIGS, LogConfig
from pybroker.server.unapplied_configs import UNAPPLIED_CONFIGS

_BROKER_DEFS = [
    ConfigDef("node.id", "INT", 1, "This broker's id."),
    ConfigDef("broker.id", "INT", -1, "ZooKeeper-mode Kafka's name of node.id (either may be set; both: equal)."),
    ConfigDef("broker.rack", "STRING", None, "The rack of this broker (for rack-aware replica assignment)."),
    # pybroker default: one broker on loopback, so `pybroker serve` just works locally.
    ConfigDef("listeners", "LIST", ["PLAINTEXT://127.0.0.1:9092"], "Listener URIs.", described_type="STRING"),
    ConfigDef("advertised.listeners", "LIST", None, "Listeners given to clients (default: listeners).",
              described_type="STRING"),
    ConfigDef("cluster.id", "STRING", None, "Cluster id (generated on first start, kept in meta.properties).",
              listing=AS_CUSTOM),
    # pybroker default: a data dir under the working directory (Kafka: /tmp/kafka-logs).
    ConfigDef("log.dirs", "LIST", None, "Log directories.", described_type="STRING"),
    ConfigDef("log.dir", "STRING", "./pybroker-data", "Log directory used when log.dirs is unset."),
    ConfigDef("num.partitions", "INT", 1, "Default partition count of new topics.", minimum=1),
    ConfigDef("default.replication.factor", "INT", 1, "Default replication factor.", minimum=1),
    ConfigDef("auto.create.topics.enable", "BOOLEAN", True, "Create topics on first metadata request."),
    ConfigDef("delete.topic.enable", "BOOLEAN", True, "Allow DeleteTopics."),
    ConfigDef("message.max.bytes", "INT", 1048588, "Largest record batch size.", minimum=0),
    ConfigDef("socket.request.max.bytes", "INT", 104857600, "Largest request size.", minimum=1),
    ConfigDef("log.segment.bytes", "INT", 1073741824, "Segment size.", minimum=14),
    ConfigDef("log.roll.ms", "LONG", None, "Segment roll time (ms)."),
    ConfigDef("log.roll.hours", "INT", 168, "Segment roll time (hours).", minimum=1),
    ConfigDef("log.roll.jitter.ms", "LONG", None, "Segment roll jitter (ms; default: log.roll.jitter.hours)."),
    ConfigDef("log.roll.jitter.hours", "INT", 0, "Segment roll jitter (hours).", minimum=0),
    ConfigDef("log.retention.ms", "LONG", None, "Retention time (ms); -1 = unlimited."),
    ConfigDef("log.retention.minutes", "INT", None, "Retention time (minutes)."),
    ConfigDef("log.retention.hours", "INT", 168, "Retention time (hours)."),
    ConfigDef("log.retention.bytes", "LONG", -1, "Retention size per partition; -1 = unlimited."),
    ConfigDef("log.retention.check.interval.ms", "LONG", 300000, "Retention check interval.", minimum=1),
    ConfigDef("log.initial.task.delay.ms", "LONG", 30000, "Delay before the first retention check.", minimum=0,
              listing=WHEN_SET),
    ConfigDef("log.cleanup.policy", "LIST", ["delete"], "Default cleanup policy.", choices=("compact", "delete")),
    ConfigDef("log.cleaner.delete.retention.ms", "LONG", 86400000, "Delete marker retention."),
    ConfigDef("log.cleaner.enable", "BOOLEAN", True, "Run the log cleaner (compaction of compacted topics)."),
    ConfigDef("log.cleaner.threads", "INT", 1, "Log cleaner threads.", minimum=0),
    ConfigDef("log.cleaner.backoff.ms", "LONG", 15000, "Sleep of a cleaner thread that found nothing to clean.",
              minimum=0),
    ConfigDef("log.cleaner.dedupe.buffer.size", "LONG", 134217728,
              "Memory of the cleaners' offset maps, shared by the cleaner threads.", minimum=0),
    ConfigDef("log.cleaner.io.buffer.size", "INT", 524288, "Cleaner I/O buffer memory (accepted; reads are "
              "sized by the cleaner itself).", minimum=0),
    ConfigDef("log.cleaner.io.buffer.load.factor", "DOUBLE", 0.9,
              "How full a cleaner's offset map may get.", minimum=0, maximum=1),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "DOUBLE", 1.7976931348623157e308,
              "Cleaner I/O limit (read and written bytes of all cleaner threads together).", minimum=0),
    ConfigDef("log.cleaner.min.cleanable.ratio", "DOUBLE", 0.5, "Default min.cleanable.dirty.ratio.",
              minimum=0, maximum=1),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "LONG", 0, "Default min.compaction.lag.ms.", minimum=0),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "LONG", 2**63 - 1, "Default max.compaction.lag.ms.", minimum=1),
    ConfigDef("log.segment.delete.delay.ms", "LONG", 60000, "Delay before deleting a .deleted segment.", minimum=0),
    ConfigDef("log.index.interval.bytes", "INT", 4096, "Bytes between index entries.", minimum=0),
    ConfigDef("log.index.size.max.bytes", "INT", 10485760, "Index file size.", minimum=4),
    ConfigDef("log.flush.interval.messages", "LONG", LONG_MAX, "Messages between fsyncs.", minimum=1),
    ConfigDef("log.flush.interval.ms", "LONG", None, "Time between fsyncs (default: flush.scheduler interval)."),
    ConfigDef("log.flush.scheduler.interval.ms", "LONG", LONG_MAX, "Flush check interval."),
    ConfigDef("num.recovery.threads.per.data.dir", "INT", 1,
              "Threads per log dir that load (and after an unclean stop recover) logs at start-up.", minimum=1),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "INT", 60000, "Recovery point checkpoint interval.", minimum=0),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "INT", 60000, "Log start offset checkpoint interval.", minimum=0),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", "LONG", 5000, "High watermark checkpoint interval."),
    ConfigDef("log.message.timestamp.type", "STRING", "CreateTime", "Default timestamp type.",
              choices=("CreateTime", "LogAppendTime")),
    ConfigDef("log.message.timestamp.difference.max.ms", "LONG", LONG_MAX,
              "[DEPRECATED] Default message.timestamp.difference.max.ms.", minimum=0),
    ConfigDef("log.message.timestamp.before.max.ms", "LONG", LONG_MAX,
              "Default message.timestamp.before.max.ms.", minimum=0),
    ConfigDef("log.message.timestamp.after.max.ms", "LONG", LONG_MAX,
              "Default message.timestamp.after.max.ms.", minimum=0),
    # --- defaults of topic configs accepted without effect (see pybroker/log/config.py) ---
    ConfigDef("log.message.format.version", "STRING", "3.0-IV1",
              "[DEPRECATED] Default message.format.version; ignored (record format v2 always).",
              validator=TOPIC_CONFIGS["message.format.version"].validator),
    ConfigDef("log.message.downconversion.enable", "BOOLEAN", True,
              "Default message.downconversion.enable (Fetch v0-v3 from consumers)."),
    ConfigDef("log.preallocate", "BOOLEAN", False, "Default preallocate; without effect."),
    ConfigDef("compression.gzip.level", "INT", -1, "Default compression.gzip.level; without effect.",
              validator=TOPIC_CONFIGS["compression.gzip.level"].validator),
    ConfigDef("compression.lz4.level", "INT", 9, "Default compression.lz4.level; without effect.",
              minimum=1, maximum=17),
    ConfigDef("compression.zstd.level", "INT", 3, "Default compression.zstd.level; without effect.",
              minimum=-131072, maximum=22),
    ConfigDef("log.local.retention.ms", "LONG", -2, "Default local.retention.ms (tiered storage); "
              "without effect.", minimum=-2),
    ConfigDef("log.local.retention.bytes", "LONG", -2, "Default local.retention.bytes (tiered storage); "
              "without effect.", minimum=-2),
    # ---
    ConfigDef("compression.type", "STRING", "producer", "Default topic compression."),
    ConfigDef("min.insync.replicas", "INT", 1, "Default min.insync.replicas.", minimum=1),
    ConfigDef("unclean.leader.election.enable", "BOOLEAN", False, "Default unclean election."),
    ConfigDef("replica.fetch.wait.max.ms", "INT", 500, "Follower fetch max wait."),
    ConfigDef("replica.lag.time.max.ms", "LONG", 30000, "Time before a lagging follower leaves the ISR."),
    ConfigDef("replica.selector.class", "STRING", None,
              "KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector (consumers that send "
              "client.rack are told to fetch from a replica in their rack) or "
              "org.apache.kafka.common.replica.LeaderSelector; unset: always the leader."),
    ConfigDef("replica.fetch.min.bytes", "INT", 1, "Follower fetch min bytes."),
    ConfigDef("replica.fetch.max.bytes", "INT", 1048576, "Follower fetch bytes per partition."),
    ConfigDef("replica.fetch.response.max.bytes", "INT", 10485760, "Follower fetch bytes per response."),
    ConfigDef("fetch.max.bytes", "INT", 57671680, "The most bytes one Fetch answer carries (the request's max_bytes "
              "is lowered to it).", minimum=1024),
    ConfigDef("replica.fetch.backoff.ms", "INT", 1000, "Follower back-off after a fetch error."),
    ConfigDef("replica.socket.timeout.ms", "INT", 30000, "Follower request timeout."),
    ConfigDef("num.replica.fetchers", "INT", 1, "Fetcher tasks per source broker.", minimum=1),
    # Kafka's thread pools, which an asyncio broker has not: accepted and described, without effect.
    ConfigDef("num.io.threads", "INT", 8, "Kafka's request handler threads; without effect.", minimum=1),
    ConfigDef("num.network.threads", "INT", 3, "Kafka's network threads per listener; without effect.", minimum=1),
    ConfigDef("background.threads", "INT", 10, "Kafka's background task threads; without effect.", minimum=1),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", "LONG", LONG_MAX,
              "Bytes per second a replica move between log dirs copies at most.", minimum=1),
    ConfigDef("zookeeper.connect", "STRING", None,
              "ZooKeeper ensemble (host:port[,host:port][/chroot]); set it to run as one broker of a cluster."),
    ConfigDef("zookeeper.session.timeout.ms", "INT", 18000, "ZooKeeper session timeout."),
    ConfigDef("zookeeper.connection.timeout.ms", "INT", None,
              "How long to wait for ZooKeeper at start (unset: the session timeout)."),
    ConfigDef("controller.socket.timeout.ms", "INT", 30000, "Controller-to-broker request timeout."),
    ConfigDef("controlled.shutdown.enable", "BOOLEAN", True, "Move leadership away before a clean stop."),
    ConfigDef("controlled.shutdown.max.retries", "INT", 3, "Controlled shutdown attempts."),
    ConfigDef("controlled.shutdown.retry.backoff.ms", "LONG", 5000, "Wait between controlled shutdown attempts."),
    ConfigDef("auto.leader.rebalance.enable", "BOOLEAN", True, "Move leadership back to preferred replicas."),
    ConfigDef("leader.imbalance.check.interval.seconds", "LONG", 300, "Leader imbalance check period."),
    ConfigDef("partition.deletion.check.interval.ms", "LONG", 1000,
              "KIP-253: how often the controller checks whether partitions marked for deletion are drained.",
              minimum=1, listing=WHEN_SET),
    ConfigDef("leader.imbalance.per.broker.percentage", "INT", 10, "Allowed leader imbalance per broker."),
    ConfigDef("offsets.topic.num.partitions", "INT", 50, "Partitions of __consumer_offsets.", minimum=1),
    # Kafka's built-in default is 3, which a single broker can never satisfy (FindCoordinator would
    # answer COORDINATOR_NOT_AVAILABLE forever); 1 is what Kafka's shipped server.properties sets.
    ConfigDef("offsets.topic.replication.factor", "SHORT", 1, "Replication of __consumer_offsets.", minimum=1),
    ConfigDef("offsets.topic.segment.bytes", "INT", 104857600, "Segment size of __consumer_offsets.", minimum=1),
    ConfigDef("offsets.retention.minutes", "INT", 10080, "How long committed offsets of an empty group are kept.",
              minimum=1),
    ConfigDef("offsets.retention.check.interval.ms", "LONG", 600000, "How often stale offsets are looked for.",
              minimum=1),
    ConfigDef("offsets.commit.timeout.ms", "INT", 5000, "How long an offset commit waits for replication.",
              minimum=1),
    ConfigDef("offset.metadata.max.bytes", "INT", 4096, "Largest metadata string of an offset commit."),
    # Kafka's built-in default is 3000 (production: fewer rebalances while an application's
    # consumers start); Kafka's shipped server.properties sets 0 for development and testing, and
    # so does pybroker: a new group forms at once.
    ConfigDef("group.initial.rebalance.delay.ms", "INT", 0, "Initial rebalance delay."),
    ConfigDef("group.min.session.timeout.ms", "INT", 6000, "Smallest session timeout."),
    ConfigDef("group.max.session.timeout.ms", "INT", 1800000, "Largest session timeout."),
    ConfigDef("group.max.size", "INT", 2147483647, "Most members of one group.", minimum=1),
    ConfigDef("delete.records.purgatory.purge.interval.requests", "INT", 1, "DeleteRecords purgatory purge interval."),
    ConfigDef("fetch.purgatory.purge.interval.requests", "INT", 1000, "Fetch purgatory purge interval."),
    # --- fetch sessions (KIP-227; pybroker.server.fetch_session) ---
    ConfigDef("max.incremental.fetch.session.cache.slots", "INT", 1000,
              "The maximum number of total incremental fetch sessions that we will maintain (divided "
              "equally among the cache's 8 shards, as in Kafka).", minimum=0),
    ConfigDef("producer.purgatory.purge.interval.requests", "INT", 1000, "Produce purgatory purge interval."),
    ConfigDef("transaction.partition.verification.enable", "BOOLEAN", True,
              "KIP-890: leaders verify with the coordinator that a transactional batch's partition is in its transaction."),
    ConfigDef("transactional.id.expiration.ms", "INT", 604800000, "Producer id expiration."),
    # --- transaction coordinator (Kafka's names and defaults) ---
    ConfigDef("transaction.state.log.num.partitions", "INT", 50, "Partitions of __transaction_state.", minimum=1),
    # Kafka's built-in defaults are 3 and 2, which a single broker can never satisfy (FindCoordinator
    # for a transactional id would answer COORDINATOR_NOT_AVAILABLE forever); 1 and 1 are what
    # Kafka's shipped server.properties sets. `pybroker cluster` sets min(3, brokers) and min(2, brokers).
    ConfigDef("transaction.state.log.replication.factor", "SHORT", 1, "Replication of __transaction_state.",
              minimum=1),
    ConfigDef("transaction.state.log.min.isr", "INT", 1, "min.insync.replicas of __transaction_state.", minimum=1),
    ConfigDef("transaction.state.log.segment.bytes", "INT", 104857600, "Segment size of __transaction_state.",
              minimum=1),
    ConfigDef("transaction.state.log.load.buffer.size", "INT", 5242880,
              "How much of __transaction_state one read takes when a partition is loaded.", minimum=1),
    ConfigDef("transaction.max.timeout.ms", "INT", 900000, "Largest transaction timeout a producer may ask for.",
              minimum=1),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "INT", 10000,
              "How often transactions open longer than their timeout are looked for and aborted.", minimum=1),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "INT", 3600000,
              "How often expired transactional ids are looked for and removed.", minimum=1),
    ConfigDef("request.timeout.ms", "INT", 30000,
              "How long the broker's own requests to other brokers (transaction markers) wait for an answer.",
              minimum=0),
    ConfigDef("producer.id.expiration.ms", "INT", 86400000,
              "How long a partition leader keeps the state of a producer that has sent nothing (its last batch's "
              "timestamp) and has no open transaction.", minimum=1),
    ConfigDef("producer.id.expiration.check.interval.ms", "INT", 600000,
              "How often partition leaders look for producers past producer.id.expiration.ms.", minimum=1,
              listing=WHEN_SET),
    # --- security: listeners, TLS, SASL, authorization (Kafka's names and defaults; every ssl.*
    # and sasl.* name may also be set for one listener as listener.name.<listener>.<name>) ---
    # The default in Kafka's order (its map of the security protocols, printed).
    ConfigDef("listener.security.protocol.map", "LIST",
              ["SASL_SSL:SASL_SSL", "PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT"],
              "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
              described_type="STRING"),
    ConfigDef("inter.broker.listener.name", "STRING", None,
              "The listener brokers use to talk to each other (default: the one named after "
              "security.inter.broker.protocol)."),
    ConfigDef("security.inter.broker.protocol", "STRING", "PLAINTEXT",
              "Security protocol between brokers; exclusive with inter.broker.listener.name.",
              choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigDef("sasl.enabled.mechanisms", "LIST", ["GSSAPI"],
              "SASL mechanisms a SASL listener accepts (pybroker: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", "STRING", "GSSAPI",
              "SASL mechanism a broker uses on the inter-broker listener."),
    ConfigDef("sasl.jaas.config", "PASSWORD", None,
              "Ignored on a broker (as in Kafka): set listener.name.<listener>.<mechanism>.sasl.jaas.config."),
    ConfigDef("sasl.server.max.receive.size", "INT", 524288, "Largest frame read before authentication."),
    ConfigDef("connections.max.reauth.ms", "LONG", 0,
              "KIP-368: SASL session lifetime; a client must re-authenticate within it (0: never)."),
    ConfigDef("connection.failed.authentication.delay.ms", "INT", 100,
              "Delay before closing a connection whose authentication failed.", minimum=0),
    ConfigDef("ssl.keystore.type", "STRING", "JKS", "Key store format (pybroker reads PEM)."),
    ConfigDef("ssl.keystore.location", "STRING", None, "PEM file with the private key and certificate chain."),
    ConfigDef("ssl.keystore.password", "PASSWORD", None, "Not allowed with PEM key stores."),
    ConfigDef("ssl.keystore.certificate.chain", "PASSWORD", None, "PEM certificate chain, inline."),
    ConfigDef("ssl.keystore.key", "PASSWORD", None, "PEM private key (PKCS#8), inline."),
    ConfigDef("ssl.key.password", "PASSWORD", None, "Password of an encrypted private key."),
    ConfigDef("ssl.truststore.type", "STRING", "JKS", "Trust store format (pybroker reads PEM)."),
    ConfigDef("ssl.truststore.location", "STRING", None, "PEM file of trusted certificates."),
    ConfigDef("ssl.truststore.password", "PASSWORD", None, "Not allowed with PEM trust stores."),
    ConfigDef("ssl.truststore.certificates", "PASSWORD", None, "PEM trusted certificates, inline."),
    ConfigDef("ssl.client.auth", "STRING", "none", "Client certificates: none, requested or required.",
              choices=("none", "requested", "required")),
    ConfigDef("ssl.endpoint.identification.algorithm", "STRING", "https",
              "Host name check of the broker's own TLS connections (empty: none)."),
    ConfigDef("ssl.enabled.protocols", "LIST", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted."),
    ConfigDef("ssl.protocol", "STRING", "TLSv1.3", "TLS protocol."),
    ConfigDef("ssl.cipher.suites", "LIST", [], "Cipher suites (default: the TLS library's)."),
    ConfigDef("ssl.principal.mapping.rules", "STRING", "DEFAULT",
              "Rules mapping a client certificate's distinguished name to a principal name."),
    ConfigDef("authorizer.class.name", "STRING", "",
              "The authorizer (kafka.security.authorizer.AclAuthorizer or "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer); empty: everything allowed."),
    # The authorizer's own settings: Kafka describes them as names it does not define.
    ConfigDef("super.users", "STRING", "", "Principals allowed everything, ';'-separated (User:admin;User:bob).",
              listing=AS_CUSTOM),
    ConfigDef("allow.everyone.if.no.acl.found", "BOOLEAN", False,
              "Allow an operation on a resource that has no ACL at all.", listing=AS_CUSTOM),
    # --- quotas and replication throttles (Kafka's names and defaults; the three rates are
    # dynamic broker configs, set per broker by kafka-reassign-partitions --throttle) ---
    ConfigDef("leader.replication.throttled.rate", "LONG", LONG_MAX,
              "Bytes per second a leader sends to followers of its throttled replicas.", minimum=0),
    ConfigDef("follower.replication.throttled.rate", "LONG", LONG_MAX,
              "Bytes per second a follower fetches for its throttled replicas.", minimum=0),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", "LONG", LONG_MAX,
              "Bytes per second of replica moves between this broker's log dirs.", minimum=0),
    ConfigDef("quota.window.num", "INT", 11, "Samples kept for client quotas.", minimum=1),
    ConfigDef("quota.window.size.seconds", "INT", 1, "Time span of a client quota sample.", minimum=1),
    ConfigDef("replication.quota.window.num", "INT", 11, "Samples kept for replication quotas.", minimum=1),
    ConfigDef("replication.quota.window.size.seconds", "INT", 1, "Time span of a replication quota sample.",
              minimum=1),
    ConfigDef("alter.log.dirs.replication.quota.window.num", "INT", 11,
              "Samples kept for log dir move quotas.", minimum=1),
    ConfigDef("alter.log.dirs.replication.quota.window.size.seconds", "INT", 1,
              "Time span of a log dir move quota sample.", minimum=1),
    # --- metrics (pybroker's own: Kafka has no Prometheus endpoint; see docs/metrics.md) ---
    ConfigDef("metrics.prometheus.port", "INT", None,
              "Port of the Prometheus endpoint (GET /metrics); unset: no endpoint; 0: a free port, logged.",
              minimum=0, listing=WHEN_SET),
    ConfigDef("metrics.prometheus.host", "STRING", "127.0.0.1", "Address the Prometheus endpoint binds.",
              listing=WHEN_SET),
]

#: Every broker config: those pybroker applies, then Kafka's for what it has not.
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS} | UNAPPLIED_CONFIGS

#: Listener-specific configs: ``listener.name.<listener lower-case>.<name>`` (see `BrokerConfig.listener_get`).
LISTENER_PREFIX = "listener.name."

# Broker properties that resolve one value, most specific first (Kafka's synonym order).
SYNONYM_CHAINS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


def _endpoints(uris: list[str], protocol_map: Mapping[str, str], distinct_ports: bool) -> list[Endpoint]:
    """Kafka's ``CoreUtils.listenerListToEndPoints``: every URI parsed, names distinct, and
    (for ``listeners``) ports distinct except port 0, or one IPv4 and one IPv6 host on a port."""
    text = ",".join(uris)
    try:
        endpoints = [Endpoint.parse(u, protocol_map) for u in uris]
    except ConfigError as e:
        raise ConfigError(f"Error creating broker listeners from '{text}': {e}") from None
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, listeners: {text}")
    if distinct_ports:
        by_port: dict[int, list[Endpoint]] = {}
        for endpoint in endpoints:
            if endpoint.port != 0:
                by_port.setdefault(endpoint.port, []).append(endpoint)
        for port, group in by_port.items():
            if len(group) < 2:
                continue
            with_ip = [e for e in group if _ip_version(e.host) is not None]
            if len(group) - len(with_ip) > 1:
                raise ConfigError(f"Each listener must have a different port, listeners: {text}")
            if len(with_ip) == 2:
                if _ip_version(with_ip[0].host) == _ip_version(with_ip[1].host) or len(group) > 2:
                    raise ConfigError("If you have two listeners on the same port then one needs to be IPv4 and "
                                      f"the other IPv6, listeners: {text}, port: {port}")
            elif with_ip:
                raise ConfigError("Each listener must have a different port unless exactly one listener has an "
                                  f"IPv4 address and the other IPv6 address, listeners: {text}, port: {port}")
    return endpoints


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def read_properties(path: str) -> dict[str, str]:
    """Read a Java-style .properties file (``key=value``, ``#`` comments, ``\\`` continuations)."""
    props: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        pending = ""
        for raw_line in f:
            line = raw_line.rstrip("\n")
            if not pending and line.lstrip().startswith(("#", "!")):
                continue
            if line.endswith("\\"):
                pending += line[:-1].lstrip()
                continue
            line = (pending + line.lstrip()).strip()
            pending = ""
            if not line:
                continue
            key, _, value = line.partition("=")
            if "=" not in line and ":" in line:
                key, _, value = line.partition(":")
            props[key.strip()] = value.strip()
    return props


def _populate_synonyms(props: Mapping[str, str]) -> dict[str, str]:
    """Kafka's ``KafkaConfig.populateSynonyms``: ``broker.id`` and ``node.id`` each stand for
    the other when only one is set; both set must be equal."""
    out = dict(props)
    broker_id, node_id = out.get("broker.id"), out.get("node.id")
    if broker_id is None and node_id is not None:
        out["broker.id"] = node_id
    elif broker_id is not None and node_id is None:
        out["node.id"] = broker_id
    elif broker_id is not None and node_id is not None and broker_id.strip() != node_id.strip():
        raise ConfigError("You must set `node.id` to the same value as `broker.id`.")
    return out


class BrokerConfig:
    """Resolved broker configuration. Unknown keys are kept (and reported) but not used.

    Values come in Kafka's layers, most specific first: this broker's dynamic configs
    (``/config/brokers/<id>``), the cluster-wide dynamic defaults (``/config/brokers/<default>``),
    the static ``server.properties`` (and overrides), and the definition's default. The dynamic
    layers are replaced whole by `update_dynamic`, which tells the registered reconfigurables
    which names changed value (Kafka's ``DynamicBrokerConfig`` and its ``Reconfigurable``s); which
    names may be dynamic is for the caller to check."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.originals: dict[str, str] = _populate_synonyms(props or {})
        self.unknown: list[str] = []
        #: Kafka settings pybroker does not apply (`unapplied_configs`), set all the same.
        self.unapplied: list[str] = []
        self._values: dict[str, Any] = {}
        self._static: dict[str, Any] = self._values
        self.dynamic_broker: dict[str, Any] = {}
        self.dynamic_default: dict[str, Any] = {}
        self._reconfigurables: list[tuple[frozenset[str], Callable[[set[str]], None]]] = []
        for key, raw in self.originals.items():
            if key.startswith(LISTENER_PREFIX):
                continue  # read per listener by `listener_get`
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                self.unknown.append(key)
                continue
            if key in UNAPPLIED_CONFIGS:
                self.unapplied.append(key)
            self._values[key] = definition.parse(raw)
        self.validate_listeners()

    @classmethod
    def load(cls, path: str | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Build from an optional properties file plus ``key=value`` overrides (later wins)."""
        props = read_properties(path) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"override {item!r} is not of the form key=value")
            props[key.strip()] = value.strip()
        return cls(props)

    def get(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return BROKER_CONFIGS[name].default

    def is_set(self, name: str) -> bool:
        """Whether ``name`` has a value in any layer but the definition's default."""
        return name in self._values

    def source(self, name: str) -> str:
        """Kafka's ConfigSource name of ``name``'s value: DYNAMIC_BROKER_CONFIG,
        DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG."""
        if name in self.dynamic_broker:
            return "DYNAMIC_BROKER_CONFIG"
        if name in self.dynamic_default:
            return "DYNAMIC_DEFAULT_BROKER_CONFIG"
        return "STATIC_BROKER_CONFIG" if name in self._static else "DEFAULT_CONFIG"

    def static_value(self, name: str) -> Any:
        """``name`` from ``server.properties`` (or its default), ignoring the dynamic layers."""
        return self._static[name] if name in self._static else BROKER_CONFIGS[name].default

    def update_dynamic(
        self, *, broker: Mapping[str, str] | None = None, cluster_default: Mapping[str, str] | None = None
    ) -> set[str]:
        """Replace this broker's dynamic configs and/or the cluster-wide dynamic defaults (each a
        whole map of raw strings, as stored; None keeps that layer) and tell every reconfigurable
        whose names include one whose value changed. Returns the changed names. Raises
        ConfigError, changing nothing, when a value does not parse; unknown names are ignored."""
        def parse(raw: Mapping[str, str]) -> dict[str, Any]:
            return {k: BROKER_CONFIGS[k].parse(v) for k, v in raw.items() if k in BROKER_CONFIGS}

        new_broker = self.dynamic_broker if broker is None else parse(broker)
        new_default = self.dynamic_default if cluster_default is None else parse(cluster_default)
        before = self._values
        self.dynamic_broker, self.dynamic_default = new_broker, new_default
        self._values = {**self._static, **new_default, **new_broker}
        changed = {k for k in set(before) | set(self._values)
                   if before.get(k, BROKER_CONFIGS[k].default) != self.get(k)}
        if changed:
            for names, callback in list(self._reconfigurables):
                if names & changed:
                    callback(changed & names)
        return changed

    def add_reconfigurable(self, names: Iterable[str], callback: Callable[[set[str]], None]) -> None:
        """Call ``callback`` with the changed names among ``names`` after each `update_dynamic`
        that changes any of them (on the caller's thread: the event loop)."""
        self._reconfigurables.append((frozenset(names), callback))

    def listener_get(self, listener_name: str, name: str, mechanism: str | None = None) -> Any:
        """``name`` for one listener, as Kafka resolves listener-prefixed configs: the most
        specific of ``listener.name.<listener>.<mechanism>.<name>`` (when a SASL mechanism is
        given), ``listener.name.<listener>.<name>``, then the broker-wide value. Names and
        mechanisms are lower-cased in the prefix."""
        prefix = f"{LISTENER_PREFIX}{listener_name.lower()}."
        keys = [f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []
        keys.append(prefix + name)
        for key in keys:
            raw = self.originals.get(key)
            if raw is not None:
                definition = BROKER_CONFIGS.get(name)
                return raw if definition is None else definition.parse(raw)
        return self.get(name) if name in BROKER_CONFIGS else None

    # --- derived values, resolved as Kafka resolves them -----------------------------------

    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs") or [self.get("log.dir")]
        return [os.path.abspath(d) for d in dirs]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as {LISTENER: PROTOCOL}, names upper-cased."""
        out: dict[str, str] = {}
        for item in self.get("listener.security.protocol.map"):
            name, sep, protocol = item.partition(":")
            protocol = protocol.strip().upper()
            if not sep or not name.strip():
                raise ConfigError(f"Invalid value {item} for configuration listener.security.protocol.map: "
                                  "Map entry should be of form <key>:<value>")
            if protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Invalid value {item} for configuration listener.security.protocol.map: "
                                  f"No enum constant for security protocol {protocol}")
            out[name.strip().upper()] = protocol
        return out

    @property
    def listeners(self) -> list[Endpoint]:
        return _endpoints(self.get("listeners"), self.listener_security_protocol_map, True)

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        return self.endpoints_of(self.get("advertised.listeners"))

    def endpoints_of(self, advertised: list[str] | None) -> list[Endpoint]:
        """The endpoints an ``advertised.listeners`` value names (unset: ``listeners``); raises
        ConfigError for one that does not parse."""
        if not advertised:
            return self.listeners
        return _endpoints(advertised, self.listener_security_protocol_map, False)

    @property
    def inter_broker_listener(self) -> Endpoint:
        """The advertised endpoint other brokers reach this one on (Kafka's
        ``interBrokerListenerName``: ``inter.broker.listener.name``, else the listener named
        after ``security.inter.broker.protocol``)."""
        name = self.inter_broker_listener_name
        return next(e for e in self.advertised_listeners if e.listener_name == name)

    @property
    def inter_broker_listener_name(self) -> str:
        name = self.get("inter.broker.listener.name")
        if name is None:
            return self.get("security.inter.broker.protocol")
        return name.upper()

    @property
    def inter_broker_security_protocol(self) -> str:
        return self.inter_broker_listener.security_protocol

    def validate_listeners(self) -> None:
        """Kafka's listener checks (``KafkaConfig.validateValues``), each failing with Kafka's message."""
        protocol_map = self.listener_security_protocol_map
        listeners = self.listeners
        advertised = self.advertised_listeners
        if self.is_set("inter.broker.listener.name") and self.is_set("security.inter.broker.protocol"):
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
        inter_broker = self.inter_broker_listener_name
        if self.is_set("inter.broker.listener.name") and inter_broker not in protocol_map:
            raise ConfigError(f"Listener with name {inter_broker} defined in inter.broker.listener.name not found "
                              "in listener.security.protocol.map.")
        listener_names = [e.listener_name for e in listeners]
        advertised_names = [e.listener_name for e in advertised]
        if inter_broker not in advertised_names:
            raise ConfigError("inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                              "The valid options based on currently configured listeners are "
                              + ",".join(advertised_names))
        if not set(advertised_names) <= set(listener_names):
            raise ConfigError(
                "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. "
                f"Found {','.join(advertised_names)}. The valid options based on the current configuration are "
                + ",".join(listener_names))
        if any(e.host == "0.0.0.0" for e in advertised):
            raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                              "Use a routable IP address.")
        if protocol_map[inter_broker] in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = self.get("sasl.mechanism.inter.broker.protocol")
            if mechanism not in self.listener_get(inter_broker, "sasl.enabled.mechanisms"):
                raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                                  "when SASL is used for inter-broker communication")

    @property
    def retention_ms(self) -> int:
        if self.is_set("log.retention.ms"):
            return self.get("log.retention.ms")
        if self.is_set("log.retention.minutes"):
            return self.get("log.retention.minutes") * 60_000
        return self.get("log.retention.hours") * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self.is_set("log.roll.ms"):
            return self.get("log.roll.ms")
        return self.get("log.roll.hours") * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        if self.is_set("log.roll.jitter.ms"):
            return self.get("log.roll.jitter.ms")
        return self.get("log.roll.jitter.hours") * 3_600_000

    @property
    def flush_interval_ms(self) -> int:
        if self.is_set("log.flush.interval.ms"):
            return self.get("log.flush.interval.ms")
        return self.get("log.flush.scheduler.interval.ms")

    def topic_default(self, topic_config: str) -> Any:
        """The broker-level default of a topic config (Kafka's synonym resolution)."""
        definition = TOPIC_CONFIGS[topic_config]
        if definition.synonym == "log.retention.ms":
            return self.retention_ms
        if definition.synonym == "log.roll.ms":
            return self.roll_ms
        if definition.synonym == "log.roll.jitter.ms":
            return self.roll_jitter_ms
        if definition.synonym == "log.flush.interval.ms":
            return self.flush_interval_ms
        if definition.synonym is not None and definition.synonym in BROKER_CONFIGS:
            return self.get(definition.synonym)
        return definition.default

    def topic_default_synonyms(self, topic_config: str) -> list[tuple[str, str, bool]]:
        """The broker properties behind a topic config's default, most specific first, as
        (name, value, explicitly set) — only those with a value, like Kafka's synonym list."""
        definition = TOPIC_CONFIGS[topic_config]
        if definition.synonym is None:
            return []
        out = []
        for name in SYNONYM_CHAINS.get(definition.synonym, (definition.synonym,)):
            if name not in BROKER_CONFIGS:
                continue
            value = self.get(name)
            if value is not None:
                out.append((name, format_value(value), self.is_set(name)))
        return out

    def log_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        return LogConfig(overrides or {}, self.topic_default)

    def new_cluster_id(self) -> str:
        configured = self.get("cluster.id")
        if configured:
            return configured
        import base64

        return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
