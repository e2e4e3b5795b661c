"""Kafka's ``ClientQuotaManager`` (and ``ClientRequestQuotaManager``'s bound): one quota type
(producer bytes, fetch bytes, or request time) for every client.

Quotas are set per entity (`QuotaEntity`): a user, a client id, or a user's client id, each side
possibly the default. A request from (user, client id) takes the first quota that exists in
Kafka's precedence (``DefaultQuotaCallback.quotaLimit``)::

    1. /config/users/<user>/clients/<client-id>     5. /config/users/<default>/clients/<default>
    2. /config/users/<user>/clients/<default>       6. /config/users/<default>
    3. /config/users/<user>                         7. /config/clients/<client-id>
    4. /config/users/<default>/clients/<client-id>  8. /config/clients/<default>

The rate is kept per *resolved* entity, as Kafka tags its sensors (``quotaMetricTags``): clients
under ``/config/users/<user>`` share the user's rate; under a default each (user and/or client
id) has its own. A request records its value and gets the throttle time that brings the rate
back to the bound (`rate.throttle_time_ms`); the request quota caps it at one window
(``ClientRequestQuotaManager``). Rates idle for an hour are dropped (Kafka expires its sensors).

Nothing is recorded while no quota of this type exists (``quotas_enabled``).
"""

from __future__ import annotations

import math

from pybroker.controller.store import DEFAULT_ENTITY
from pybroker.scheduler import Time
from pybroker.server.quota.entities import QuotaEntity
from pybroker.server.quota.rate import Rate, throttle_time_ms

#: The (sanitized user, client id) tags of a rate; "" for a side the quota does not key on.
Tags = tuple[str, str]

INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
_PURGE_INTERVAL_MS = 60 * 1000


class ClientQuotaManager:
    """One quota type's entities, bounds and rates."""

    def __init__(
        self, quota_type: str, samples: int, window_seconds: int, time: Time, *, max_throttle_ms: int | None = None,
    ) -> None:
        self.quota_type = quota_type  # Kafka's QuotaType name: Produce, Fetch, Request
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.time = time
        self.max_throttle_ms = max_throttle_ms
        self.overridden: dict[QuotaEntity, float] = {}
        self._rates: dict[Tags, Rate] = {}
        self._resolved: dict[tuple[str, str], tuple[Tags, float | None]] = {}
        self._last_purge_ms = 0.0

    @property
    def quotas_enabled(self) -> bool:
        return bool(self.overridden)

    def update_quota(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or with None remove) ``entity``'s bound; the next request resolves again, and a
        rate whose bound changed keeps what it recorded (as Kafka updates its metric configs)."""
        if bound is None:
            self.overridden.pop(entity, None)
        else:
            self.overridden[entity] = bound
        self._resolved.clear()

    # --- resolution ------------------------------------------------------------------------------

    def metric_tags(self, user: str, client_id: str) -> Tags:
        """Kafka's ``quotaMetricTags``: the rate a (sanitized user, sanitized client id) shares."""
        quotas = self.overridden
        d = DEFAULT_ENTITY
        if QuotaEntity(user, client_id) in quotas or QuotaEntity(user, d) in quotas:
            return user, client_id
        if QuotaEntity(user, None) in quotas:
            return user, ""
        if QuotaEntity(d, client_id) in quotas or QuotaEntity(d, d) in quotas:
            return user, client_id
        if QuotaEntity(d, None) in quotas:
            return user, ""
        return "", client_id

    def quota_limit(self, tags: Tags) -> float | None:
        """Kafka's ``DefaultQuotaCallback.quotaLimit``: the bound of the first entity that exists
        for these tags, in precedence order; None when there is none."""
        user, client_id = tags
        quotas = self.overridden
        d = DEFAULT_ENTITY
        if user and client_id:
            order = [QuotaEntity(user, client_id), QuotaEntity(user, d), QuotaEntity(d, client_id), QuotaEntity(d, d)]
        elif user:
            order = [QuotaEntity(user, None), QuotaEntity(d, None)]
        elif client_id:
            order = [QuotaEntity(None, client_id), QuotaEntity(None, d)]
        else:
            return None
        for entity in order:
            bound = quotas.get(entity)
            if bound is not None:
                return bound
        return None

    def resolve(self, user: str, client_id: str) -> tuple[Tags, float | None]:
        """(tags, bound) for a client, cached until the quotas change."""
        key = (user, client_id)
        resolved = self._resolved.get(key)
        if resolved is None:
            tags = self.metric_tags(user, client_id)
            resolved = self._resolved[key] = (tags, self.quota_limit(tags))
        return resolved

    def quota(self, user: str, client_id: str) -> float | None:
        """The bound that applies to a (sanitized user, sanitized client id); None: unlimited."""
        return self.resolve(user, client_id)[1]

    # --- recording -------------------------------------------------------------------------------

    def _rate(self, tags: Tags) -> Rate:
        rate = self._rates.get(tags)
        if rate is None:
            rate = self._rates[tags] = Rate(self.samples, self.window_ms)
        return rate

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record ``value`` for this client; the throttle time in ms (0 within the quota)."""
        if not self.overridden:
            return 0
        self._maybe_purge(now_ms)
        tags, bound = self.resolve(user, client_id)
        rate = self._rate(tags)
        rate.record(value, now_ms)
        if bound is None:
            return 0
        throttle = throttle_time_ms(rate, bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return int(min(throttle, 2**31 - 1))

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        if self.overridden:
            self._rate(self.resolve(user, client_id)[0]).record(value, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        """Kafka's ``unrecordQuotaSensor``: take back a value (a throttled fetch sends nothing)."""
        self.record_no_throttle(user, client_id, -value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """Kafka's ``getMaxValueInQuotaWindow``: the most one request can take without being
        throttled for sure (bound x (samples - 1) windows); infinite without a quota."""
        if not self.overridden:
            return math.inf
        bound = self.resolve(user, client_id)[1]
        return math.inf if bound is None else bound * (self.samples - 1) * self.window_ms / 1000

    def _maybe_purge(self, now_ms: float) -> None:
        if now_ms - self._last_purge_ms < _PURGE_INTERVAL_MS:
            return
        self._last_purge_ms = now_ms
        idle = [tags for tags, rate in self._rates.items()
                if now_ms - rate.last_record_ms() > INACTIVE_SENSOR_EXPIRATION_MS]
        for tags in idle:
            del self._rates[tags]
