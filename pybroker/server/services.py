"""What a request handler may use of the broker: the services named here and nothing else (Kafka's
``KafkaApis`` takes the same collaborators as constructor parameters; Redpanda's request context
gives typed accessors). `pybroker.server.broker.Broker` provides them; handlers reach them as
``ctx.services``, and never the broker object itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pybroker.controller.controller import Controller
    from pybroker.log.log_manager import LogManager
    from pybroker.security.authorizer import Authorizer
    from pybroker.server.admin_manager import AdminManager
    from pybroker.server.broker_control import BrokerControl
    from pybroker.server.config import BrokerConfig
    from pybroker.server.dynamic_broker_config import DynamicBrokerConfig
    from pybroker.server.fetch_session import FetchManager
    from pybroker.server.group.coordinator import GroupCoordinator
    from pybroker.server.metadata_cache import MetadataCache
    from pybroker.server.quota.quota_managers import QuotaManagers
    from pybroker.server.replica_manager import ReplicaManager
    from pybroker.server.transaction.coordinator import TransactionCoordinator
    from pybroker.server.transaction.verification import TransactionVerifier


class BrokerServices(Protocol):
    """The broker's services, as handlers see them."""

    node_id: int
    cluster_id: str
    #: (api key, min, max) of every API this broker answers (Kafka's ``ApiVersionManager``).
    api_versions: Sequence[tuple[int, int, int]]
    config: BrokerConfig
    dynamic_config: DynamicBrokerConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    fetch_manager: FetchManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    transaction_verifier: TransactionVerifier | None
    admin_manager: AdminManager
    controller: Controller
    broker_control: BrokerControl
    authorizer: Authorizer
    quotas: QuotaManagers
