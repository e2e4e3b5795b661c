"""KIP-511's rule for the client software an ApiVersions request (v3+) names: a name and a version
of letters, digits, ``-`` and ``.``, starting and ending with a letter or digit (Kafka's
``ApiVersionsRequest.isValid``). The ApiVersions handler answers INVALID_REQUEST otherwise, and a
SASL listener keeps waiting for a valid ApiVersions before the handshake."""

from __future__ import annotations

import re

_SOFTWARE_PATTERN = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def valid_client_software(name: str | None, version: str | None) -> bool:
    return bool(_SOFTWARE_PATTERN.match(name or "") and _SOFTWARE_PATTERN.match(version or ""))
