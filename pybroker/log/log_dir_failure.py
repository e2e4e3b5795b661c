"""Failed log directories (KIP-112): Kafka's ``LogDirFailureChannel``.

Owns the set of offline log directories and the hand-off from whoever met an I/O error on a
directory (an append, a read, a flush, a checkpoint, a roll, a log creation) to the one handler
that takes the directory offline (``ReplicaManager.handle_log_dir_failure``: its partitions
stop, its logs are dropped, the controller is told). The first error of a directory is logged
with Kafka's wording and queues the directory once; the handler runs soon after on the event
loop (never inside the failing operation, which may be iterating over the partitions), or at
once when no loop runs (tools and tests).

A dir goes offline for a failure of its storage (EIO, ENOSPC, EROFS, a dir that vanished with its
mount, ...), never because the process ran out of its own resources: an error that says the
process has too many open files (EMFILE), the system too many (ENFILE) or no memory (ENOMEM)
fails the operation that met it (its request answers KAFKA_STORAGE_ERROR, a CreateTopics topic
its error) and leaves the dir online. The broker's own races (two writers of one file, a file
removed by a deletion under a reader) are prevented where they would arise, not excused here
(`pybroker.log.checkpoint`, `pybroker.log.log_manager`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

# errnos of a process (or system) out of descriptors or memory: nothing is wrong with the disk.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


class OfflineLogDirError(OSError):
    """A write refused because its log dir is offline: nothing is written there any more."""


def is_resource_exhaustion(error: BaseException | None) -> bool:
    return isinstance(error, OSError) and error.errno in RESOURCE_ERRNOS


class LogDirFailureChannel:
    """Which log dirs failed, and who is told when one does."""

    def __init__(self) -> None:
        self.offline_log_dirs: set[str] = set()
        #: Called once per failed directory (set by the replica manager).
        self.on_failure: Callable[[str], None] | None = None

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return log_dir in self.offline_log_dirs

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, error: BaseException | None = None) -> bool:
        """Kafka's ``maybeAddOfflineLogDir``: log ``message`` (with the error) and, the first
        time for ``log_dir``, mark it offline and hand it to the failure handler. Returns whether
        the dir is offline now: an error of resource exhaustion (`RESOURCE_ERRNOS`) is logged and
        leaves it online."""
        log_dir = os.path.abspath(log_dir)
        if log_dir in self.offline_log_dirs:
            log.debug("%s (log dir %s already offline): %s", message, log_dir, error)
            return True
        if is_resource_exhaustion(error):
            log.error("%s: %s (the process is out of a resource, the disk did not fail: %s stays online)",
                      message, error, log_dir)
            return False
        log.error("%s: %s", message, error)
        self.offline_log_dirs.add(log_dir)
        handler = self.on_failure
        if handler is None:
            return True
        try:
            asyncio.get_running_loop().call_soon(handler, log_dir)
        except RuntimeError:
            handler(log_dir)
        return True
