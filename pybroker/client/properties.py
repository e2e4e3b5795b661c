"""Kafka client properties given as text (``{"acks": "all", "batch.size": "16384"}``): typed reads
with Kafka's own error wording."""

from __future__ import annotations

from collections.abc import Mapping


def int_property(props: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    """``props[name]`` as an int of at least ``minimum``, or ``default`` when it is not set."""
    raw = props.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Invalid value {raw} for configuration {name}: Not a number of type INT") from None
    if value < minimum:
        raise ValueError(f"Invalid value {raw} for configuration {name}: Value must be at least {minimum}")
    return value
