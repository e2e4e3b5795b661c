"""The loop's handling of ``accept()`` out of descriptors (`pybroker.network.listener.AcceptErrorReporter`):
asyncio reports it once per connection waiting in the backlog; the broker logs one line per second,
drops the retries that find their server closed, and leaves every other error to the loop."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

from pybroker.network.listener import ACCEPT_OUT_OF_RESOURCE, AcceptErrorReporter


class Clock(asyncio.SelectorEventLoop):
    now = 100.0

    def time(self) -> float:
        return self.now


def test_accept_failures_are_one_line_per_second_and_closed_server_retries_are_dropped(caplog):
    loop = Clock()
    try:
        seen: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: seen.append(context))
        AcceptErrorReporter.install(loop)
        AcceptErrorReporter.install(loop)  # once only
        handler = loop.get_exception_handler()
        assert isinstance(handler, AcceptErrorReporter) and not isinstance(handler.previous, AcceptErrorReporter)

        out = {"message": ACCEPT_OUT_OF_RESOURCE, "exception": OSError(errno.EMFILE, "Too many open files")}
        with caplog.at_level(logging.ERROR, logger="pybroker.network.listener"):
            for _ in range(1024):
                loop.call_exception_handler(out)
            loop.now += 1.0
            loop.call_exception_handler(out)
        assert [r.getMessage() for r in caplog.records] == [
            "Cannot accept connections ([Errno 24] Too many open files): they wait in the backlog; "
            "retrying every second"] * 2

        def _start_serving() -> None: ...

        retry = asyncio.TimerHandle(0, _start_serving, (), loop)
        loop.call_exception_handler({"message": "Exception in callback", "handle": retry,
                                     "exception": ValueError("Invalid file descriptor: -1")})
        other = {"message": "Task exception was never retrieved", "exception": RuntimeError("boom")}
        loop.call_exception_handler(other)
        assert seen == [other]
    finally:
        loop.close()
