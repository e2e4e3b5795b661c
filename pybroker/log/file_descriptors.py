"""The process's open-file limit against the logs it must hold open.

Owns raising the soft ``RLIMIT_NOFILE`` to the hard limit at start-up (Linux's default soft
limit, often 1,024, is far below what thousands of partitions need, and raising it to the hard
limit needs no privilege), and the check that the logs present fit under it: every segment keeps
its ``.log`` open (its indexes are mapped and hold no descriptor), and connections, checkpoints and
the like need a reserve on top. A broker that would fail on an ``open`` half-way through loading
its logs says instead, in one line, how many descriptors it needs.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

# Descriptors kept free for client connections, checkpoint writes and the interpreter itself.
RESERVED_DESCRIPTORS = 512


class FileDescriptorLimitError(RuntimeError):
    """The open-file limit is below what the logs present need; the message says what to do."""


def raise_open_file_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft < hard:
        target = hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:  # e.g. an infinite hard limit the kernel caps
            log.debug("Could not raise RLIMIT_NOFILE from %d to %d: %s", soft, target, e)
        else:
            if target != soft:
                log.info("Raised the open-file limit (RLIMIT_NOFILE) from %d to %d", soft, target)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def check_open_file_limit(segments: int, partitions: int) -> None:
    """Raise `FileDescriptorLimitError` when ``segments`` open ``.log`` files plus the reserve do
    not fit under the soft ``RLIMIT_NOFILE``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = segments + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise FileDescriptorLimitError(
            f"Too few file descriptors: the {partitions} partition logs in log.dirs hold {segments} "
            f"segments, one open file each, so this broker needs at least {needed} descriptors "
            f"(including {RESERVED_DESCRIPTORS} for connections), but RLIMIT_NOFILE is {soft} "
            f"(hard limit {hard}); raise it, e.g. `ulimit -n {needed}` or LimitNOFILE={needed} "
            "in a systemd unit"
        )
