"""The process's open-file limit, and how many segment files the broker keeps open under it.

Owns what the broker does about ``RLIMIT_NOFILE`` at start-up (`configure_open_files`):

* the soft limit is raised to the hard limit (Linux's default soft limit, often 1,024, is far
  below what thousands of connections need, and raising it to the hard limit needs no
  privilege); both values are logged;
* the native cache of open segment ``.log`` files (``pybroker._native``, see
  ``rust/src/open_files.rs``) gets half of the soft limit, at least `MIN_LOG_FILES`
  (`log_file_capacity`); the other half is for sockets, index and checkpoint files and the
  interpreter. Segments open their ``.log`` when used and the least recently used are closed, so
  the number of partitions a broker hosts is not bounded by the limit (each segment holds no
  descriptor at rest; the indexes are memory-mapped). Kafka has no such setting: it needs one
  descriptor per segment and asks for a raised limit; the capacity here is derived from the
  limit and nothing else;
* a limit below `MIN_OPEN_FILES` (the cache's floor plus as much for everything else) is refused
  with one line (`FileDescriptorLimitError`).

When descriptors run out anyway (many connections), the native code closes cached ``.log``
files and retries once; then the operation fails with ``OSError(EMFILE)``, its request answers
an error and the log dir stays online (`pybroker.log.log_dir_failure`).
"""

from __future__ import annotations

import logging
import resource

from pybroker import _native

log = logging.getLogger(__name__)

# The fewest open segment .log files the cache is given (the native default follows the same rule).
MIN_LOG_FILES = 64
# The lowest soft limit a broker starts with: the cache's floor and as much again for connections,
# index and checkpoint files and the interpreter.
MIN_OPEN_FILES = 2 * MIN_LOG_FILES
# What an unlimited soft limit counts as when the capacity is derived from it.
UNLIMITED = 1 << 21


class FileDescriptorLimitError(RuntimeError):
    """The open-file limit is too low for a broker to run; the message says what to do."""


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


def raise_open_file_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit and log both (INFO); returns the soft
    limit now in force (``resource.RLIM_INFINITY`` when unlimited)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:  # e.g. an infinite hard limit the kernel caps
            log.info("Could not raise the open-file limit (RLIMIT_NOFILE) from %s to the hard limit %s: %s",
                     _shown(soft), _shown(hard), e)
        else:
            log.info("Raised the open-file limit (RLIMIT_NOFILE) from %s to the hard limit %s",
                     _shown(soft), _shown(hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    log.info("Open-file limit (RLIMIT_NOFILE): soft %s, hard %s", _shown(soft), _shown(hard))
    return soft


def log_file_capacity(soft_limit: int) -> int:
    """How many segment ``.log`` files to keep open under a soft limit of ``soft_limit``: half
    of it, at least `MIN_LOG_FILES`."""
    if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
        soft_limit = UNLIMITED
    return max(MIN_LOG_FILES, soft_limit // 2)


def check_open_file_limit(soft_limit: int) -> None:
    """Raise `FileDescriptorLimitError` when ``soft_limit`` is below `MIN_OPEN_FILES`. The
    number of partitions does not matter: segments hold no descriptor at rest."""
    if soft_limit != resource.RLIM_INFINITY and 0 <= soft_limit < MIN_OPEN_FILES:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        raise FileDescriptorLimitError(
            f"Too few file descriptors: RLIMIT_NOFILE is {soft_limit} (hard limit {_shown(hard)}), but a "
            f"broker needs at least {MIN_OPEN_FILES} ({MIN_LOG_FILES} open log segments and as many for "
            f"connections, indexes and checkpoints); raise it, e.g. `ulimit -n {MIN_OPEN_FILES}` or "
            f"LimitNOFILE={MIN_OPEN_FILES} in a systemd unit"
        )


def configure_open_files() -> int:
    """At broker start: raise the soft limit, refuse one below `MIN_OPEN_FILES`, and size the
    native cache of open ``.log`` files from it (logged at INFO). Returns the capacity."""
    soft = raise_open_file_limit()
    check_open_file_limit(soft)
    capacity = log_file_capacity(soft)
    _native.set_max_open_log_files(capacity)
    log.info("Keeping at most %d log segment files open (half the open-file limit; the least recently "
             "used are closed and opened again when needed)", capacity)
    return capacity
