"""The broker's quota managers (Kafka's ``QuotaFactory.QuotaManagers``) and what feeds them.

`QuotaManagers` holds the produce, fetch and request `ClientQuotaManager`s (``quota.window.num``
samples of ``quota.window.size.seconds``) and the leader and follower `ReplicationQuotaManager`s
(``replication.quota.window.*``). `install` wires them into a broker: the store's config handlers
for ``clients`` and ``users`` entities set the client quotas (Kafka's ``ClientIdConfigHandler`` /
``UserConfigHandler``), the dynamic broker configs ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` set the replication bounds (read with ``config.get`` and
followed with ``add_reconfigurable``), the replica manager and its fetchers get the replication
managers, and the dispatcher gets a `RequestThrottler`.

``enabled`` is the dispatcher's one check per request: False while no client quota exists and no
leader replication throttle is set, and then requests cost nothing more.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from pybroker.scheduler import Scheduler, Time
from pybroker.server.quota.client_quota_manager import ClientQuotaManager
from pybroker.server.quota.entities import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    quota_values,
)
from pybroker.server.quota.replication_quota_manager import ReplicationQuotaManager
from pybroker.server.quota.throttling import RequestThrottler

if TYPE_CHECKING:
    from pybroker.scheduler import Scheduler, Time
    from pybroker.server.replica_manager import ReplicaManager

    class Broker(Protocol):
        """What `QuotaManagers.install` connects the managers to."""

        config: BrokerConfig
        node_id: int
        time: Time
        scheduler: Scheduler
        entity_config_handlers: dict[str, list[Callable[[str, Mapping[str, str]], None]]]
        replica_manager: ReplicaManager
    from pybroker.server.config import BrokerConfig

log = logging.getLogger(__name__)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


class QuotaManagers:
    """Every quota manager of one broker."""

    def __init__(self, config: BrokerConfig, broker_id: int, time: Time, scheduler: Scheduler) -> None:
        self.config = config
        samples, window = config.get("quota.window.num"), config.get("quota.window.size.seconds")
        self.produce = ClientQuotaManager("Produce", samples, window, time)
        self.fetch = ClientQuotaManager("Fetch", samples, window, time)
        # ClientRequestQuotaManager: a throttle of at most one window.
        self.request = ClientQuotaManager("Request", samples, window, time, max_throttle_ms=window * 1000)
        r_samples, r_window = config.get("replication.quota.window.num"), config.get("replication.quota.window.size.seconds")
        self.leader = ReplicationQuotaManager("LeaderReplication", broker_id, r_samples, r_window, time)
        self.follower = ReplicationQuotaManager("FollowerReplication", broker_id, r_samples, r_window, time)
        self.throttler = RequestThrottler(self, time, scheduler)
        self.client_quotas_enabled = False
        self.enabled = False
        self.update_replication_rates()

    def _update_enabled(self) -> None:
        self.client_quotas_enabled = (self.produce.quotas_enabled or self.fetch.quotas_enabled
                                      or self.request.quotas_enabled)
        self.enabled = self.client_quotas_enabled or self.leader.active

    def update_quota_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Kafka's ``QuotaConfigHandler.updateQuotaConfig``: the entity's three enforced quotas
        from its whole stored config (a key absent removes that quota)."""
        entity = QuotaEntity.from_store(entity_type, name)
        if entity is None:
            log.warning("Ignoring quota configs of %s/%s: not a quota entity", entity_type, name)
            return
        values = quota_values(config)
        self.produce.update_quota(entity, values.get(PRODUCER_BYTE_RATE))
        self.fetch.update_quota(entity, values.get(CONSUMER_BYTE_RATE))
        self.request.update_quota(entity, values.get(REQUEST_PERCENTAGE))
        self._update_enabled()

    def update_replication_rates(self, changed: set[str] | None = None) -> None:
        """The replication bounds from the broker config (static or dynamic)."""
        self.leader.update_quota(self.config.get(LEADER_RATE))
        self.follower.update_quota(self.config.get(FOLLOWER_RATE))
        self._update_enabled()

    @classmethod
    def install(cls, broker: Broker) -> QuotaManagers:
        """Create the managers of ``broker`` and connect them (see the module docstring)."""
        quotas = cls(broker.config, broker.node_id, broker.time, broker.scheduler)
        for entity_type in ("clients", "users"):
            broker.entity_config_handlers[entity_type].append(
                functools.partial(quotas.update_quota_config, entity_type))
        broker.config.add_reconfigurable((LEADER_RATE, FOLLOWER_RATE), quotas.update_replication_rates)
        broker.replica_manager.leader_replication_quota = quotas.leader
        quotas.throttler.leader_throttled = broker.replica_manager.is_leader_throttled
        if broker.replica_manager.fetcher_manager is not None:
            broker.replica_manager.fetcher_manager.quota = quotas.follower
        return quotas
