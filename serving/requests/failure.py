"""Failures every transport answers the same way, whatever raised them."""

from __future__ import annotations

import logging

from runtime.errors import ResourceExhaustedError, from_memory_error

log = logging.getLogger("graphserve")


def out_of_memory(err: MemoryError) -> ResourceExhaustedError:
    """A request that could not get the memory it needed: RESOURCE_EXHAUSTED, as TensorFlow
    answers an allocation that fails, never UNKNOWN (logged: the operator should know)."""
    log.warning("Out of memory serving a request: %s", err or "MemoryError")
    return from_memory_error(err)
