"""Creating an internal topic (``__consumer_offsets``, ``__transaction_state``) on first use, as
Kafka's FindCoordinator does: the lookup that finds the topic missing starts its creation and
answers COORDINATOR_NOT_AVAILABLE at once; the client asks again, and is answered the coordinator
once the topic's leaders are elected. One creation runs at a time; a failed one (too few brokers
for the replication factor) is logged and tried again by the next lookup.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class InternalTopicCreation:
    """The creation of one internal topic, started in the background by `start`."""

    def __init__(self, topic: str, create: Callable[[], Awaitable[None]], unavailable: type[Exception]) -> None:
        self.topic = topic
        self._create = create
        self._unavailable = unavailable  # the error that says why it cannot be created (a warning)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start creating the topic, unless a creation is under way."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"create-{self.topic}")

    async def _run(self) -> None:
        try:
            await self._create()
        except self._unavailable as e:
            log.warning("%s", e)
        except Exception:
            log.exception("Creating %s failed", self.topic)

    async def wait(self) -> None:
        """Until the creation under way (if any) has ended."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def cancel(self) -> None:
        """Abandon the creation under way (at shutdown)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
