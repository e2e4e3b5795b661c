"""ZooKeeper support for cluster mode, as Kafka's ZooKeeper mode (2.8-3.x) uses it.

Owns everything between pybroker and Apache ZooKeeper; nothing else in pybroker imports kazoo:

- `server` runs a standalone ZooKeeper server from the Debian package as a child process (for
  tests and local clusters). Blocking calls: use it from a thread, not on an event loop.
- `client` is the asyncio face of one kazoo session (`ZooKeeperClient`): every operation is
  awaited on the event loop without blocking it, and watches and session-state changes are
  delivered on the loop, never on kazoo's threads.
- `znodes` holds Kafka's znode paths and JSON formats (pure functions and dataclasses), so that
  Kafka's own tools can read a pybroker cluster's ZooKeeper tree and the other way round.
- `kafka_zk_client` is `KafkaZkClient`: Kafka's operations on that tree (broker registration
  with its broker epoch, controller election with epoch fencing, topics, partition states,
  configs, topic deletion marks, producer-id blocks).

Concurrency rules: one `ZooKeeperClient` (one ZooKeeper session) per broker process, created and
used on one event loop. Callbacks run on that loop and must not block it.
"""
