"""Failed log directories (KIP-112): Kafka's ``LogDirFailureChannel``.

Owns the set of offline log directories and the hand-off from whoever met an I/O error on a
directory (an append, a read, a flush, a checkpoint, a roll, a log creation) to the one handler
that takes the directory offline (``ReplicaManager.handle_log_dir_failure``: its partitions
stop, its logs are dropped, the controller is told). The first error of a directory is logged
with Kafka's wording and queues the directory once; the handler runs soon after on the event
loop (never inside the failing operation, which may be iterating over the partitions), or at
once when no loop runs (tools and tests).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    """Which log dirs failed, and who is told when one does."""

    def __init__(self) -> None:
        self.offline_log_dirs: set[str] = set()
        #: Called once per failed directory (set by the replica manager).
        self.on_failure: Callable[[str], None] | None = None

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return log_dir in self.offline_log_dirs

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, error: BaseException | None = None) -> None:
        """Kafka's ``maybeAddOfflineLogDir``: log ``message`` (with the error) and, the first
        time for ``log_dir``, mark it offline and hand it to the failure handler."""
        log_dir = os.path.abspath(log_dir)
        if log_dir in self.offline_log_dirs:
            log.debug("%s (log dir %s already offline): %s", message, log_dir, error)
            return
        log.error("%s: %s", message, error)
        self.offline_log_dirs.add(log_dir)
        handler = self.on_failure
        if handler is None:
            return
        try:
            asyncio.get_running_loop().call_soon(handler, log_dir)
        except RuntimeError:
            handler(log_dir)
