"""Helpers shared by the group APIs' handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# DescribeGroups' authorized operations without an authorizer: every group operation
# (READ 3, DELETE 6, DESCRIBE 8), as Kafka reports them.
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def answer(start: Callable[[Callable[[T], None]], None], build: Callable[[T], R]) -> R | asyncio.Future[R]:
    """Run a coordinator call that answers through a callback: the response now when the
    coordinator answered at once, else a future of it."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(result: T) -> None:
        if not future.done():
            future.set_result(build(result))

    start(respond)
    return future.result() if future.done() else future
