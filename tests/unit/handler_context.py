"""Test helper: a handler's `RequestContext` over a stub broker, for handler tests that are not
about authorization (the stub carries an ``authorizer``; every pair may be asked)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pybroker.security.authorizer import SUPPORTED_OPERATIONS
from pybroker.security.principal import ANONYMOUS
from pybroker.server.request_context import RequestContext

#: Every (operation, resource type) pair there is.
ALL_PAIRS = frozenset((operation, kind) for kind, operations in SUPPORTED_OPERATIONS.items() for operation in operations)


def allowed_context(broker: Any, version: int) -> RequestContext:
    """A context over ``broker`` (a stub with an ``authorizer``) allowed to ask anything."""
    connection = SimpleNamespace(principal=ANONYMOUS, client_address="127.0.0.1", client_host="/127.0.0.1",
                                 attributes={}, listener_name="PLAINTEXT")
    return RequestContext(broker, SimpleNamespace(api_version=version, client_id="test"), connection, ALL_PAIRS)  # type: ignore[arg-type]
