"""Client quota entities and keys: how they are named in the store, and what may be set.

Kafka keeps quotas in ZooKeeper under ``/config/clients/<client-id>`` and
``/config/users/<user>[/clients/<client-id>]`` (either side may be ``<default>``; the user and the
client id are sanitized, `pybroker.zookeeper.znodes.sanitize`). A `QuotaEntity` is a (user,
client id) pair as the quota managers key it: each side None (not part of the entity),
`DEFAULT_ENTITY`, or a *sanitized* name. The admin API speaks of entities as
``{"user": name|None, "client-id": name|None}`` with unsanitized names and None for the default.

The quota keys (Kafka's ``QuotaConfigs``): ``producer_byte_rate`` and ``consumer_byte_rate``
(LONG, bytes per second), ``request_percentage`` (DOUBLE) and ``controller_mutation_rate``
(DOUBLE, stored and described; pybroker does not enforce it). The plain user entity also holds
SCRAM credentials (other keys), which quota changes keep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from pybroker.controller.store import DEFAULT_ENTITY
from pybroker.zookeeper.znodes import desanitize, sanitize

#: Kafka's ClientQuotaEntity types.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"

#: Each quota key and its Kafka ConfigDef type.
QUOTA_KEYS: dict[str, str] = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}


@dataclass(frozen=True)
class QuotaEntity:
    """A quota entity as stored: ``user`` and ``client_id`` each None, `DEFAULT_ENTITY` or a
    sanitized name; at least one is set."""

    user: str | None
    client_id: str | None

    @classmethod
    def from_store(cls, entity_type: str, name: str) -> QuotaEntity | None:
        """The entity of a ``/config/<entity_type>/<name>`` znode (None: not a quota entity)."""
        if entity_type == "clients":
            return cls(None, name) if "/" not in name else None
        if entity_type == "users":
            parts = name.split("/")
            if len(parts) == 1:
                return cls(parts[0], None)
            if len(parts) == 3 and parts[1] == "clients":
                return cls(parts[0], parts[2])
        return None

    def store_path(self) -> tuple[str, str]:
        """(entity type, name) of its znode below ``/config``."""
        if self.user is None:
            assert self.client_id is not None
            return "clients", self.client_id
        if self.client_id is None:
            return "users", self.user
        return "users", f"{self.user}/clients/{self.client_id}"

    @classmethod
    def from_names(cls, components: Mapping[str, str | None]) -> QuotaEntity:
        """From the admin API's form: ``{"user": name or None (default), "client-id": ...}``
        (only the types present), names unsanitized."""
        def side(key: str) -> str | None:
            if key not in components:
                return None
            name = components[key]
            return DEFAULT_ENTITY if name is None else sanitize(name)
        return cls(side(USER), side(CLIENT_ID))

    def names(self) -> dict[str, str | None]:
        """The admin API's form (see `from_names`)."""
        out: dict[str, str | None] = {}
        if self.user is not None:
            out[USER] = None if self.user == DEFAULT_ENTITY else desanitize(self.user)
        if self.client_id is not None:
            out[CLIENT_ID] = None if self.client_id == DEFAULT_ENTITY else desanitize(self.client_id)
        return out


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a stored config map, as numbers (values that do not parse are left out)."""
    values: dict[str, float] = {}
    for key in QUOTA_KEYS:
        raw = config.get(key)
        if raw is None:
            continue
        try:
            values[key] = float(raw)
        except ValueError:
            continue
    return values


class InvalidQuotaError(ValueError):
    """A quota alteration Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


def validate_quota_value(key: str, value: float) -> str:
    """The stored string of ``key`` set to ``value`` (ZkAdminManager's conversion, KRaft's checks:
    unknown key, not above 0, a fraction for a LONG). Raises InvalidQuotaError."""
    key_type = QUOTA_KEYS.get(key)
    if key_type is None:
        raise InvalidQuotaError(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise InvalidQuotaError(f"Quota {key} must be greater than 0")
    if key_type == "DOUBLE":
        return repr(float(value))
    if value > 2**63 - 1:
        raise InvalidQuotaError(f"Proposed value for {key} is too large for a LONG.")
    integral = int(value + 1e-6)
    if abs(integral - value) > 1e-6:
        raise InvalidQuotaError(f"Configuration {key} must be a LONG value")
    return str(integral)


def format_quota_value(value: float) -> str:
    """How Kafka's tools print a quota value: Java's ``Double.toString`` (``1024.0``, ``50.5``,
    ``1.0E10``)."""
    value = float(value)
    if value == 0 or math.isinf(value) or math.isnan(value):
        return {True: "Infinity", False: "-Infinity"}[value > 0] if math.isinf(value) else (
            "NaN" if math.isnan(value) else "0.0")
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    normal = Decimal(repr(value)).normalize()
    sign, digits, _ = normal.as_tuple()
    mantissa = "".join(map(str, digits))
    fraction = mantissa[1:] or "0"
    return f"{'-' if sign else ''}{mantissa[0]}.{fraction}E{normal.adjusted()}"
