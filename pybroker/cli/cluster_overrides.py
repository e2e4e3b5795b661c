"""The broker properties a user sets on a ``pybroker cluster``, and their per-broker templates.

Owns the three ways of setting them, which properties the command keeps for itself, the order in
which they win, and the placeholders their values may hold:

- ``--override KEY=VALUE``: every broker;
- ``--broker-override ID:KEY=VALUE``: broker ``ID`` only;
- ``--config FILE``: a properties file (Java syntax, as ``server.properties``) whose ``KEY=VALUE``
  lines are for every broker and whose ``broker.<ID>.KEY=VALUE`` lines are for broker ``ID`` only.

The more specific wins: a value for one broker beats a value for every broker, and at equal
reach the command line beats the file (so: file, ``--override``, the file's ``broker.<ID>.``
lines, ``--broker-override``; within one source the last wins).

Every value is a template, expanded for each broker (`expand`): ``{id}`` is its node id, ``{port}``
the port ``--port`` gives it (FIRST+id-1), ``{host}`` 127.0.0.1, and ``{id+N}``, ``{port+N}``,
``{port-N}`` offsets of them. That is how ``listeners``, ``advertised.listeners`` and the like get
a different value on each broker, as each of a Kafka cluster's own ``server.properties`` would.
Other braces are kept as they are (a regular expression, a password), except in ``listeners`` and
``advertised.listeners``, where a brace left after expansion is an unknown placeholder and refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.server.config import read_properties

# Set per broker by the command; a user's value for them would break the cluster.
MANAGED_PROPERTIES = (
    "node.id", "log.dirs", "log.dir", "zookeeper.connect", "metrics.prometheus.port",
)
# Their values are listener URIs: no brace may be left once the placeholders are expanded.
LISTENER_PROPERTIES = ("listeners", "advertised.listeners")
PLACEHOLDERS = "{id}, {port}, {host}, {id+N}, {port+N}, {port-N}"

_PLACEHOLDER = re.compile(
    r"\{\s*(?:(?P<name>id|port)\s*(?:(?P<sign>[+-])\s*(?P<offset>\d+))?|(?P<host>host))\s*\}"
)
_LEFTOVER = re.compile(r"\{[^{}]*\}|[{}]")
_FILE_BROKER_KEY = re.compile(r"^broker\.(\d+)\.(.+)$")
_BROKER_OVERRIDE = re.compile(r"^\s*(\d+)\s*:(.*)$", re.S)


class OverrideError(ValueError):
    """A user-set property the command cannot take; the message says which and why."""


def expand(
    value: str, node_id: int, port: int, host: str, *, key: str = "", source: str = "",
) -> str:
    """``value`` with its placeholders replaced for the broker ``node_id`` (whose ``{port}`` is
    ``port``); `OverrideError` for a ``{port±N}`` outside 1..65535, or for a brace left in a
    listener property (``key`` and ``source`` name the setting in the message)."""
    def replace(match: re.Match[str]) -> str:
        if match.group("host"):
            return host
        base = node_id if match.group("name") == "id" else port
        offset = int(match.group("offset") or 0)
        result = base - offset if match.group("sign") == "-" else base + offset
        if match.group("name") == "port" and not 1 <= result <= 65535:
            raise OverrideError(f"{source} {key}: {match.group(0)} is {result} on broker "
                                f"{node_id}, not a valid port")
        return str(result)

    out = _PLACEHOLDER.sub(replace, value)
    if key in LISTENER_PROPERTIES:
        leftover = _LEFTOVER.search(out)
        if leftover is not None:
            raise OverrideError(f"{source} {key}={value}: unknown placeholder {leftover.group(0)} "
                                f"(known: {PLACEHOLDERS})")
    return out


@dataclass
class Layer:
    """The properties one source sets: ``label`` names it (in server.properties comments and
    error messages), ``values`` are the raw templates, in the order given."""

    label: str
    values: dict[str, str] = field(default_factory=dict)


def _checked_key(key: str, where: str) -> str:
    """``key``, unless the command sets it (`OverrideError`; ``where`` names the setting)."""
    if key in MANAGED_PROPERTIES:
        raise OverrideError(f"{where}: pybroker cluster sets {key} for each broker "
                            "(use --brokers, --port, --dir or --zookeeper)")
    return key


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` items as a dict (later wins); `OverrideError` for a malformed or
    managed key."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OverrideError(f"--override {item!r} is not of the form key=value")
        out[_checked_key(key, f"--override {key}")] = value.strip()
    return out


class BrokerOverrides:
    """Every user-set property of a cluster, by source and broker (see the module)."""

    def __init__(self, common: list[Layer], per_broker: dict[int, list[Layer]]) -> None:
        self.common = common
        self.per_broker = per_broker

    @classmethod
    def parse(
        cls, brokers: int, overrides: Iterable[str] = (), broker_overrides: Iterable[str] = (),
        config_file: str | Path | None = None,
    ) -> BrokerOverrides:
        """Read the file and the command-line items; `OverrideError` (one line) for a malformed
        item, a managed property, a broker id outside 1..``brokers`` or a file that cannot be
        read."""
        common: list[Layer] = []
        file_brokers: dict[int, Layer] = {}
        if config_file is not None:
            source = f"--config {config_file}"
            try:
                props = read_properties(str(config_file))
            except OSError as e:
                raise OverrideError(f"{source}: {e.strerror or e}") from None
            except UnicodeDecodeError as e:
                raise OverrideError(f"{source}: not a text file ({e.reason})") from None
            everyone = Layer(source)
            for key, value in props.items():
                match = _FILE_BROKER_KEY.match(key)
                if match is None:
                    everyone.values[_checked_key(key, f"{source}: {key}")] = value
                    continue
                node_id, name = int(match.group(1)), match.group(2).strip()
                _check_node(node_id, brokers, f"{source}: {key}:")
                layer = file_brokers.setdefault(node_id, Layer(f"{source}, broker.{node_id}.*"))
                layer.values[_checked_key(name, f"{source}: {key}")] = value
            common.append(everyone)
        common.append(Layer("--override", parse_overrides(overrides)))
        cli_brokers: dict[int, Layer] = {}
        for item in broker_overrides:
            match = _BROKER_OVERRIDE.match(item)
            key, sep, value = (match.group(2) if match else "").partition("=")
            key = key.strip()
            if match is None or not sep or not key:
                raise OverrideError(f"--broker-override {item!r} is not of the form ID:key=value")
            node_id = int(match.group(1))
            _check_node(node_id, brokers, f"--broker-override {item!r}:")
            layer = cli_brokers.setdefault(node_id, Layer(f"--broker-override {node_id}"))
            layer.values[_checked_key(key, f"--broker-override {node_id}:{key}")] = value.strip()
        per_broker = {
            node_id: [layer for layer in (file_brokers.get(node_id), cli_brokers.get(node_id))
                      if layer is not None]
            for node_id in sorted({*file_brokers, *cli_brokers})
        }
        return cls([layer for layer in common if layer.values], per_broker)

    def layers(self, node_id: int) -> list[Layer]:
        """Broker ``node_id``'s layers, the winning one last."""
        return [*self.common, *self.per_broker.get(node_id, [])]

    def sets(self, key: str) -> bool:
        """Whether any source sets ``key`` for any broker."""
        every = [*self.common, *(layer for layers in self.per_broker.values() for layer in layers)]
        return any(key in layer.values for layer in every)

    def sections(self, node_id: int, port: int, host: str) -> list[tuple[str, dict[str, str]]]:
        """Broker ``node_id``'s values, expanded, by source (label, values), each key only in the
        source that wins it; sources left without a key are left out."""
        layers = self.layers(node_id)
        winner = {key: i for i, layer in enumerate(layers) for key in layer.values}
        out = []
        for i, layer in enumerate(layers):
            values = {key: expand(raw, node_id, port, host, key=key, source=layer.label)
                      for key, raw in layer.values.items() if winner[key] == i}
            if values:
                out.append((layer.label, values))
        return out

    def values(self, node_id: int, port: int, host: str) -> dict[str, str]:
        """Broker ``node_id``'s values, expanded, the winning one of each key."""
        return {key: value for _, values in self.sections(node_id, port, host)
                for key, value in values.items()}


def _check_node(node_id: int, brokers: int, source: str) -> None:
    if not 1 <= node_id <= brokers:
        raise OverrideError(f"{source} there is no broker {node_id} "
                            f"(--brokers {brokers}: node ids 1..{brokers})")
