"""``--command-config FILE``: a Java properties file of admin client settings, as Kafka's tools take.

Applied: ``client.id``, ``request.timeout.ms`` (how long one request waits for its answer) and
``default.api.timeout.ms`` (how long a call retries; a tool's own timeout option wins).
``bootstrap.servers`` is overridden by ``--bootstrap-server``, as in Kafka. Other Kafka admin
client settings are accepted and have no effect here. Security settings become the
`ClientSecurity` every connection of the command uses (`security_from_properties`):
``security.protocol``, the PEM forms of ``ssl.truststore.*``/``ssl.keystore.*``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``, ``ssl.enabled.protocols``,
``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and ``sasl.jaas.config``; other
``ssl.*``/``sasl.*`` names are ignored with a warning. Unknown names are ignored with a warning,
as Kafka's clients log "supplied but isn't a known config".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pybroker.client.security import (
    APPLIED_SECURITY_PROPERTIES,
    PLAINTEXT,
    ClientSecurity,
    ClientSecurityError,
    ignored_security_properties,
    security_from_properties,
)

APPLIED = ("client.id", "request.timeout.ms", "default.api.timeout.ms")

# Kafka AdminClient settings that pybroker's client accepts without acting on them.
ACCEPTED = frozenset({
    "bootstrap.servers", "bootstrap.controllers", "client.dns.lookup", "client.rack", "connections.max.idle.ms",
    "enable.metrics.push", "metadata.max.age.ms", "metadata.recovery.strategy",
    "metadata.recovery.rebootstrap.trigger.ms", "metric.reporters", "metrics.num.samples",
    "metrics.recording.level", "metrics.sample.window.ms", "auto.include.jmx.reporter", "receive.buffer.bytes",
    "reconnect.backoff.max.ms", "reconnect.backoff.ms", "retries", "retry.backoff.max.ms", "retry.backoff.ms",
    "send.buffer.bytes", "socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms",
})


class AdminOptions(TypedDict, total=False):
    """Keyword arguments of `pybroker.client.admin.Admin` that a command passes on."""

    client_id: str
    security: ClientSecurity
    request_timeout: float
    retry_timeout: float


class CommandConfigError(ValueError):
    """A --command-config file that cannot be read or holds a bad value."""


@dataclass
class ClientSettings:
    """What a command config file asks of the admin client, and what it asked that was ignored."""

    client_id: str | None = None
    request_timeout_ms: int | None = None
    default_api_timeout_ms: int | None = None
    security: ClientSecurity = PLAINTEXT
    warnings: list[str] = field(default_factory=list)

    def admin_options(self, default_client_id: str) -> AdminOptions:
        """The `pybroker.client.admin.Admin` keyword arguments these settings give (the command's
        own client id unless the file names one)."""
        options: AdminOptions = {"client_id": self.client_id or default_client_id, "security": self.security}
        if self.request_timeout_ms is not None:
            options["request_timeout"] = self.request_timeout_ms / 1000
        return options


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load``: ``key=value``, ``key: value`` or ``key value`` lines, ``#``/``!``
    comments, a trailing backslash continuing the line, backslash escapes."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        # The key ends at the first unescaped '=', ':' or whitespace.
        end = 0
        while end < len(line):
            if line[end] == "\\":
                end += 2
                continue
            if line[end] in "=: \t\f":
                break
            end += 1
        key, rest = line[:end], line[end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def load_properties(path: str) -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise CommandConfigError(f"cannot read --command-config file {path}: {e}") from None


def _positive_int(props: dict[str, str], name: str) -> int | None:
    raw = props.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise CommandConfigError(f"--command-config: {name}: expected an integer, got {raw!r}") from None
    if value <= 0:
        raise CommandConfigError(f"--command-config: {name}: must be positive, got {value}")
    return value


def client_settings(props: dict[str, str]) -> ClientSettings:
    """Sort ``props`` into applied settings and warnings about ignored ones."""
    try:
        security = security_from_properties(props)
    except ClientSecurityError as e:
        raise CommandConfigError(f"--command-config: {e}") from None
    settings = ClientSettings(
        client_id=props.get("client.id") or None,
        request_timeout_ms=_positive_int(props, "request.timeout.ms"),
        default_api_timeout_ms=_positive_int(props, "default.api.timeout.ms"),
        security=security,
    )
    ignored = ignored_security_properties(props)
    unknown = [name for name in props
               if name not in APPLIED and name not in ACCEPTED and name not in APPLIED_SECURITY_PROPERTIES
               and name not in ignored]
    if ignored:
        settings.warnings.append("security settings pybroker's clients do not support were ignored: "
                                 + ", ".join(ignored))
    if unknown:
        settings.warnings.append("unknown client settings were ignored: " + ", ".join(unknown))
    return settings


def settings_for_command(path: str | None) -> ClientSettings | None:
    """A command's ``--command-config``: its warnings printed to stderr; None, after printing
    ``Error: …``, when it cannot be used (the command then exits 1)."""
    try:
        settings = read_client_settings(path)
    except CommandConfigError as e:
        print(f"Error: {e}", file=sys.stderr)
        return None
    for warning in settings.warnings:
        print(f"Warning: --command-config {path}: {warning}", file=sys.stderr)
    return settings


def read_client_settings(path: str | None) -> ClientSettings:
    """The settings of the ``--command-config`` file at ``path`` (none when ``path`` is None)."""
    return ClientSettings() if path is None else client_settings(load_properties(path))
