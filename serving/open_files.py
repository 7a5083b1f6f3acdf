"""The process's open-file limit, which bounds how many connections the listeners can hold.

The soft limit (often 1024) is far below what a server needs; ``raise_open_file_limit`` lifts
it to the hard limit once, at start-up, before either listener opens, and each listener sizes
its connection cap from the limit in force (``open_file_limit``).
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("graphserve")

UNLIMITED = 1 << 20  # what an unlimited limit counts as


def open_file_limit() -> int:
    """The soft limit in force."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return UNLIMITED if soft == resource.RLIM_INFINITY else int(soft)


def raise_open_file_limit() -> int:
    """Raise the soft limit to the hard one; returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY:
        return UNLIMITED
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as err:
            log.warning("Could not raise the open-file limit from %d to %d: %s", soft, target, err)
        else:
            soft = target
    return int(soft)
