"""The config framework every layer shares: Kafka's ``ConfigDef`` (a config's name, type,
default, checks and how a broker lists it), ``ConfigError`` with Kafka's texts, and values
printed as Kafka prints them. The tables themselves live with their owners: topic configs in
``log/config.py``, broker configs in ``server/config.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from pybroker.common.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(KafkaError, ValueError):
    """A config value that is unknown or out of range."""

    code = ErrorCode.INVALID_CONFIG


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_TYPE_LIMITS = {"SHORT": 2**15, "INT": 2**31, "LONG": 2**63}


def java_double(value: float) -> str:
    """``Double.toString``: ``2.0``, ``0.5``, ``1.0E10``, ``1.0E-4``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python's shortest repr, as Java's in this range
    digits = Decimal(repr(abs(value))).normalize().as_tuple()
    figures = "".join(map(str, digits.digits))
    exponent = len(figures) + int(digits.exponent) - 1
    return f"{'-' if value < 0 else ''}{figures[0]}.{figures[1:] or '0'}E{exponent}"


def _java_number(value: int | float) -> str:
    return java_double(value) if isinstance(value, float) else str(value)


def invalid_value(name: str, raw: object, reason: str) -> ConfigError:
    """Kafka's ``ConfigException(name, value, message)``: "Invalid value V for configuration N: R"."""
    return ConfigError(f"Invalid value {raw} for configuration {name}: {reason}")


def parse_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


#: How a broker's DescribeConfigs lists a config, after Kafka's rule (every definition of
#: ``KafkaConfig`` but the internal ones, and every name set in ``server.properties``):
LISTED = "listed"  # one of KafkaConfig's definitions: always listed
WHEN_SET = "when-set"  # Kafka's internal definitions, and pybroker's own: listed when set
AS_CUSTOM = "as-custom"  # read outside KafkaConfig (the authorizer's): listed when set, as a name Kafka does not know


@dataclass(frozen=True)
class ConfigDef:
    """One config: its Kafka name, type (as DescribeConfigs v3+ reports it), default and checks."""

    name: str
    type: str  # BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD
    default: Any
    doc: str
    synonym: str | None = None  # broker property supplying the default
    minimum: int | float | None = None
    choices: tuple[str, ...] | None = None
    maximum: int | float | None = None
    # A further check of the parsed value, given (name, value): raises ConfigError.
    validator: Callable[[str, Any], None] | None = None
    #: How a broker's DescribeConfigs lists it (`LISTED`, `WHEN_SET` or `AS_CUSTOM`).
    listing: str = LISTED
    #: The type DescribeConfigs reports when it is not the parsing type: Kafka defines
    #: ``listeners`` and the like as STRING and splits them itself.
    described_type: str | None = None

    def parse(self, raw: str) -> Any:
        """Convert a string value to its typed form; ConfigError with Kafka's ``ConfigDef``
        text ("Invalid value abc for configuration retention.ms: Not a number of type LONG",
        "... Value must be at least 14", "... String must be one of: compact, delete") if it
        is invalid."""
        text = raw.strip()
        if self.type == "BOOLEAN":
            if text.lower() not in ("true", "false"):
                raise invalid_value(self.name, raw, "Expected value to be either true or false")
            value: Any = text.lower() == "true"
        elif self.type in _TYPE_LIMITS:
            limit = _TYPE_LIMITS[self.type]
            if not _JAVA_INTEGER.fullmatch(text) or not -limit <= int(text) < limit:
                raise invalid_value(self.name, raw, f"Not a number of type {self.type}")
            value = int(text)
            self._check_range(value)
        elif self.type == "DOUBLE":
            try:
                value = float(text) if "_" not in text else None
            except ValueError:
                value = None
            if value is None:
                raise invalid_value(self.name, raw, "Not a number of type DOUBLE")
            self._check_range(value)
        elif self.type == "LIST":
            value = parse_list(raw)
            for item in value:
                self._check_choice(item)
        else:
            value = text
            self._check_choice(value)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def _check_range(self, value: int | float) -> None:
        """Kafka's ``Range`` validator (the value as Java prints the parsed number)."""
        if self.minimum is not None and value < self.minimum:
            raise invalid_value(self.name, _java_number(value), f"Value must be at least {_java_number(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise invalid_value(self.name, _java_number(value), f"Value must be no more than {_java_number(self.maximum)}")

    def _check_choice(self, value: str) -> None:
        """Kafka's ``ValidString`` (for a LIST, each item: ``ValidList``)."""
        if self.choices is not None and value not in self.choices:
            raise invalid_value(self.name, value, f"String must be one of: {', '.join(self.choices)}")


def format_value(value: Any) -> str:
    """Render a typed config value as Kafka prints it (lists comma-joined, booleans lowercase,
    doubles as Java's ``Double.toString``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


class ListenerSettings(Protocol):
    """A broker's settings as a listener reads them (``server.config.BrokerConfig`` is one): the
    TLS contexts, the SASL authenticator and the inter-broker client take this, not the broker's
    whole configuration."""

    @property
    def originals(self) -> Mapping[str, str]:
        """The properties as written (``listener.name.<l>.<mechanism>.sasl.jaas.config`` among them)."""
        ...

    def get(self, name: str) -> Any:
        """The broker-wide value of ``name``."""
        ...

    def listener_get(self, listener_name: str, name: str, mechanism: str | None = None) -> Any:
        """``name`` for one listener: ``listener.name.<l>.[<mechanism>.]<name>`` first, then the
        broker-wide value."""
        ...
