"""Kafka 3.9's broker configs for what pybroker has not: named, typed and defaulted as Kafka 3.9.2
describes them, so that DescribeConfigs of a broker (``kafka-configs --describe --all``) lists the
names Kafka lists, and a ``server.properties`` written for Kafka starts pybroker.

Each group says what pybroker lacks. A value set for one of these names is parsed (a bad value
stops the start, as in Kafka), described, and has no effect; the broker logs a warning naming
it at start (`unapplied_reason`). They are all read-only here, those dynamic in Kafka included:
pybroker cannot apply them at run time either (docs/differences.md lists them).

The facts (names, types, defaults) come from Kafka 3.9.2's own DescribeConfigs answer;
``tests/differential/test_every_api.py`` compares every broker config with it.
"""

from __future__ import annotations

from pybroker.common.config import LONG_MAX, ConfigDef

_INT_MAX = 2**31 - 1

#: (what pybroker has not, ((name, type, default), ...)), grouped by Kafka's subsystems.
_GROUPS: tuple[tuple[str, tuple[tuple[str, str, object], ...]], ...] = (
    ("KRaft (pybroker is a ZooKeeper-mode broker)", (
        ("process.roles", "LIST", []),
        ("controller.listener.names", "STRING", None),
        ("controller.quorum.voters", "LIST", []),
        ("controller.quorum.bootstrap.servers", "LIST", []),
        ("controller.quorum.append.linger.ms", "INT", 25),
        ("controller.quorum.election.backoff.max.ms", "INT", 1000),
        ("controller.quorum.election.timeout.ms", "INT", 1000),
        ("controller.quorum.fetch.timeout.ms", "INT", 2000),
        ("controller.quorum.request.timeout.ms", "INT", 2000),
        ("controller.quorum.retry.backoff.ms", "INT", 20),
        ("controller.quota.window.num", "INT", 11),
        ("controller.quota.window.size.seconds", "INT", 1),
        ("broker.heartbeat.interval.ms", "INT", 2000),
        ("broker.session.timeout.ms", "INT", 9000),
        ("initial.broker.registration.timeout.ms", "INT", 60000),
        ("metadata.log.dir", "STRING", None),
        ("metadata.log.max.record.bytes.between.snapshots", "LONG", 20971520),
        ("metadata.log.max.snapshot.interval.ms", "LONG", 3600000),
        ("metadata.log.segment.bytes", "INT", 1073741824),
        ("metadata.log.segment.ms", "LONG", 604800000),
        ("metadata.max.idle.interval.ms", "INT", 500),
        ("metadata.max.retention.bytes", "LONG", 104857600),
        ("metadata.max.retention.ms", "LONG", 604800000),
        ("sasl.mechanism.controller.protocol", "STRING", "GSSAPI"),
        ("early.start.listeners", "STRING", None),
        ("eligible.leader.replicas.enable", "BOOLEAN", False),
        ("log.dir.failure.timeout.ms", "LONG", 30000),
        ("alter.config.policy.kraft.compatibility.enable", "BOOLEAN", False),
        ("zookeeper.metadata.migration.enable", "BOOLEAN", False),
    )),
    ("KIP-848's consumer groups and KIP-932's share groups", (
        ("group.consumer.assignors", "LIST", ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                                              "org.apache.kafka.coordinator.group.assignor.RangeAssignor"]),
        ("group.consumer.heartbeat.interval.ms", "INT", 5000),
        ("group.consumer.max.heartbeat.interval.ms", "INT", 15000),
        ("group.consumer.max.session.timeout.ms", "INT", 60000),
        ("group.consumer.max.size", "INT", _INT_MAX),
        ("group.consumer.min.heartbeat.interval.ms", "INT", 5000),
        ("group.consumer.min.session.timeout.ms", "INT", 45000),
        ("group.consumer.session.timeout.ms", "INT", 45000),
        ("group.coordinator.append.linger.ms", "INT", 10),
        ("group.coordinator.rebalance.protocols", "LIST", ["classic"]),
        ("group.coordinator.threads", "INT", 1),
        ("group.share.delivery.count.limit", "INT", 5),
        ("group.share.heartbeat.interval.ms", "INT", 5000),
        ("group.share.max.groups", "SHORT", 10),
        ("group.share.max.heartbeat.interval.ms", "INT", 15000),
        ("group.share.max.record.lock.duration.ms", "INT", 60000),
        ("group.share.max.session.timeout.ms", "INT", 60000),
        ("group.share.max.size", "SHORT", 200),
        ("group.share.min.heartbeat.interval.ms", "INT", 5000),
        ("group.share.min.record.lock.duration.ms", "INT", 15000),
        ("group.share.min.session.timeout.ms", "INT", 45000),
        ("group.share.partition.max.record.locks", "INT", 200),
        ("group.share.record.lock.duration.ms", "INT", 30000),
        ("group.share.session.timeout.ms", "INT", 45000),
    )),
    ("tiered storage (KIP-405)", (
        ("remote.log.storage.system.enable", "BOOLEAN", False),
        ("remote.fetch.max.wait.ms", "INT", 500),
        ("remote.log.index.file.cache.total.size.bytes", "LONG", 1073741824),
        ("remote.log.manager.copier.thread.pool.size", "INT", -1),
        ("remote.log.manager.copy.max.bytes.per.second", "LONG", LONG_MAX),
        ("remote.log.manager.copy.quota.window.num", "INT", 11),
        ("remote.log.manager.copy.quota.window.size.seconds", "INT", 1),
        ("remote.log.manager.expiration.thread.pool.size", "INT", -1),
        ("remote.log.manager.fetch.max.bytes.per.second", "LONG", LONG_MAX),
        ("remote.log.manager.fetch.quota.window.num", "INT", 11),
        ("remote.log.manager.fetch.quota.window.size.seconds", "INT", 1),
        ("remote.log.manager.task.interval.ms", "LONG", 30000),
        ("remote.log.manager.thread.pool.size", "INT", 10),
        ("remote.log.metadata.custom.metadata.max.bytes", "INT", 128),
        ("remote.log.metadata.manager.class.name", "STRING",
         "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"),
        ("remote.log.metadata.manager.class.path", "STRING", None),
        ("remote.log.metadata.manager.impl.prefix", "STRING", "rlmm.config."),
        ("remote.log.metadata.manager.listener.name", "STRING", None),
        ("remote.log.reader.max.pending.tasks", "INT", 100),
        ("remote.log.reader.threads", "INT", 10),
        ("remote.log.storage.manager.class.name", "STRING", None),
        ("remote.log.storage.manager.class.path", "STRING", None),
        ("remote.log.storage.manager.impl.prefix", "STRING", "rsm.config."),
    )),
    ("delegation tokens", (
        ("delegation.token.expiry.check.interval.ms", "LONG", 3600000),
        ("delegation.token.expiry.time.ms", "LONG", 86400000),
        ("delegation.token.master.key", "PASSWORD", None),
        ("delegation.token.max.lifetime.ms", "LONG", 604800000),
        ("delegation.token.secret.key", "PASSWORD", None),
    )),
    ("SASL/GSSAPI (Kerberos), SASL/OAUTHBEARER and JAAS login modules", (
        ("sasl.kerberos.kinit.cmd", "STRING", "/usr/bin/kinit"),
        ("sasl.kerberos.min.time.before.relogin", "LONG", 60000),
        ("sasl.kerberos.principal.to.local.rules", "LIST", ["DEFAULT"]),
        ("sasl.kerberos.service.name", "STRING", None),
        ("sasl.kerberos.ticket.renew.jitter", "DOUBLE", 0.05),
        ("sasl.kerberos.ticket.renew.window.factor", "DOUBLE", 0.8),
        ("sasl.login.callback.handler.class", "CLASS", None),
        ("sasl.login.class", "CLASS", None),
        ("sasl.login.connect.timeout.ms", "INT", None),
        ("sasl.login.read.timeout.ms", "INT", None),
        ("sasl.login.refresh.buffer.seconds", "SHORT", 300),
        ("sasl.login.refresh.min.period.seconds", "SHORT", 60),
        ("sasl.login.refresh.window.factor", "DOUBLE", 0.8),
        ("sasl.login.refresh.window.jitter", "DOUBLE", 0.05),
        ("sasl.login.retry.backoff.max.ms", "LONG", 10000),
        ("sasl.login.retry.backoff.ms", "LONG", 100),
        ("sasl.oauthbearer.clock.skew.seconds", "INT", 30),
        ("sasl.oauthbearer.expected.audience", "LIST", None),
        ("sasl.oauthbearer.expected.issuer", "STRING", None),
        ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "LONG", 3600000),
        ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "LONG", 10000),
        ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "LONG", 100),
        ("sasl.oauthbearer.jwks.endpoint.url", "STRING", None),
        ("sasl.oauthbearer.scope.claim.name", "STRING", "scope"),
        ("sasl.oauthbearer.sub.claim.name", "STRING", "sub"),
        ("sasl.oauthbearer.token.endpoint.url", "STRING", None),
        ("sasl.client.callback.handler.class", "CLASS", None),
        ("sasl.server.callback.handler.class", "CLASS", None),
    )),
    ("Java plug-ins and JVM security providers (pybroker loads no Java classes)", (
        ("alter.config.policy.class.name", "CLASS", None),
        ("create.topic.policy.class.name", "CLASS", None),
        ("client.quota.callback.class", "CLASS", None),
        ("principal.builder.class", "CLASS", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
        ("security.providers", "STRING", None),
        ("ssl.engine.factory.class", "CLASS", None),
        ("ssl.keymanager.algorithm", "STRING", "SunX509"),
        ("ssl.trustmanager.algorithm", "STRING", "PKIX"),
        ("ssl.provider", "STRING", None),
        ("ssl.secure.random.implementation", "STRING", None),
        ("ssl.allow.dn.changes", "BOOLEAN", False),
        ("ssl.allow.san.changes", "BOOLEAN", False),
        ("password.encoder.cipher.algorithm", "STRING", "AES/CBC/PKCS5Padding"),
        ("password.encoder.iterations", "INT", 4096),
        ("password.encoder.key.length", "INT", 128),
        ("password.encoder.keyfactory.algorithm", "STRING", None),
        ("password.encoder.old.secret", "PASSWORD", None),
        ("password.encoder.secret", "PASSWORD", None),
    )),
    ("JMX and Kafka's metrics library (pybroker serves Prometheus: metrics.prometheus.port)", (
        ("auto.include.jmx.reporter", "BOOLEAN", True),
        ("kafka.metrics.polling.interval.secs", "INT", 10),
        ("kafka.metrics.reporters", "LIST", []),
        ("metric.reporters", "LIST", []),
        ("metrics.num.samples", "INT", 2),
        ("metrics.recording.level", "STRING", "INFO"),
        ("metrics.sample.window.ms", "LONG", 30000),
        ("telemetry.max.bytes", "INT", 1048576),
    )),
    ("ZooKeeper client TLS and ACLs (pybroker's ZooKeeper client speaks plain TCP, without znode ACLs)", (
        ("zookeeper.clientCnxnSocket", "STRING", None),
        ("zookeeper.max.in.flight.requests", "INT", 10),
        ("zookeeper.set.acl", "BOOLEAN", False),
        ("zookeeper.ssl.cipher.suites", "LIST", None),
        ("zookeeper.ssl.client.enable", "BOOLEAN", False),
        ("zookeeper.ssl.crl.enable", "BOOLEAN", False),
        ("zookeeper.ssl.enabled.protocols", "LIST", None),
        ("zookeeper.ssl.endpoint.identification.algorithm", "STRING", "HTTPS"),
        ("zookeeper.ssl.keystore.location", "STRING", None),
        ("zookeeper.ssl.keystore.password", "PASSWORD", None),
        ("zookeeper.ssl.keystore.type", "STRING", None),
        ("zookeeper.ssl.ocsp.enable", "BOOLEAN", False),
        ("zookeeper.ssl.protocol", "STRING", "TLSv1.2"),
        ("zookeeper.ssl.truststore.location", "STRING", None),
        ("zookeeper.ssl.truststore.password", "PASSWORD", None),
        ("zookeeper.ssl.truststore.type", "STRING", None),
    )),
    ("the socket server's connection limits, idle closing, request queues and socket buffers "
     "(pybroker's asyncio listeners keep the operating system's defaults)", (
        ("connections.max.idle.ms", "LONG", 600000),
        ("max.connection.creation.rate", "INT", _INT_MAX),
        ("max.connections", "INT", _INT_MAX),
        ("max.connections.per.ip", "INT", _INT_MAX),
        ("max.connections.per.ip.overrides", "STRING", ""),
        ("queued.max.request.bytes", "LONG", -1),
        ("queued.max.requests", "INT", 500),
        ("socket.listen.backlog.size", "INT", 50),
        ("socket.receive.buffer.bytes", "INT", 102400),
        ("socket.send.buffer.bytes", "INT", 102400),
        ("socket.connection.setup.timeout.max.ms", "LONG", 30000),
        ("socket.connection.setup.timeout.ms", "LONG", 10000),
        ("replica.socket.receive.buffer.bytes", "INT", 65536),
        ("control.plane.listener.name", "STRING", None),
    )),
    ("broker id generation, inter-broker protocol versions (pybroker's brokers speak one), "
     "compressed offset commits or other acks for them, DescribeTopicPartitions, and log dir move threads", (
        ("broker.id.generation.enable", "BOOLEAN", True),
        ("reserved.broker.max.id", "INT", 1000),
        ("inter.broker.protocol.version", "STRING", "3.9-IV0"),
        ("max.request.partition.size.limit", "INT", 2000),
        ("num.replica.alter.log.dirs.threads", "INT", None),
        ("offsets.commit.required.acks", "SHORT", -1),
        ("offsets.load.buffer.size", "INT", 5242880),
        ("offsets.topic.compression.codec", "INT", 0),
    )),
)


def _doc(reason: str) -> str:
    return f"Kafka's setting for {reason}, which pybroker has not: described with Kafka's default, without effect."


#: Every unapplied broker config by name.
UNAPPLIED_CONFIGS: dict[str, ConfigDef] = {
    name: ConfigDef(name, type_, default, _doc(reason)) for reason, entries in _GROUPS for name, type_, default in entries
}

_REASONS: dict[str, str] = {name: reason for reason, entries in _GROUPS for name, _t, _d in entries}


def unapplied_reason(name: str) -> str | None:
    """What pybroker lacks that ``name`` configures (None for a config pybroker applies)."""
    return _REASONS.get(name)
