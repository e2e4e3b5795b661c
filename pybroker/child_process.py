"""Child processes that do not outlive the process that started them.

``pybroker cluster`` starts ZooKeeper and the brokers as children, each in its own session so
that a terminal's Ctrl-C reaches only the parent, which then stops them in order. A parent that is
itself SIGKILLed (or killed by the OOM killer) cannot do that; Linux's parent-death signal then
sends every child SIGTERM, and each stops cleanly on its own. The same holds for the ZooKeeper a
test or a benchmark starts.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def terminated_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for `subprocess.Popen`: the child gets SIGTERM when its parent ends.

    Linux only (None elsewhere). Linux's "parent" is the *thread* that started the child, so
    start children from a thread that lives as long as they should (the main thread, or a
    worker of a pool that keeps its threads)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent was gone before the signal was set
            os.kill(os.getpid(), signal.SIGTERM)

    return set_parent_death_signal
