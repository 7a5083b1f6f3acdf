"""Stopping a run that nobody waits for any more.

A ``Cancellation`` belongs to one run. Whoever owns the run's caller (the serving layer: the
request's deadline passed, or the client left) calls ``cancel`` from any thread; the runtime
reads ``error`` between kernels and between loop iterations and raises it, so the core is free
again after at most one kernel. TensorFlow checks its ``CancellationManager`` at the same
points. Reading one attribute per kernel keeps the cost of a run that is never cancelled near
zero.

The run on the current thread is found with ``current()`` by code deep inside a run that takes
no argument for it (a loop kernel running its body function).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from runtime.errors import CancelledError, OpError


class Cancellation:
    """``error`` stays None until the run is cancelled; then it is the error the run raises."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: OpError | None = None

    def cancel(self, error: OpError | None = None) -> None:
        """Stop the run (any thread; the first reason given wins)."""
        if self.error is None:
            self.error = error if error is not None else CancelledError("The run was cancelled")

    @property
    def cancelled(self) -> bool:
        return self.error is not None

    def check(self) -> None:
        """Raise the reason when the run has been cancelled (a new instance each time, so
        threads never share one traceback)."""
        error = self.error
        if error is not None:
            raise type(error)(error.message)


_local = threading.local()


def current() -> Cancellation | None:
    """The cancellation of the run in progress on this thread, if it has one."""
    cancellation: Cancellation | None = getattr(_local, "cancellation", None)
    return cancellation


@contextmanager
def running(cancellation: Cancellation | None) -> Iterator[None]:
    """Make ``cancellation`` this thread's ``current()`` while a run is in progress."""
    previous = getattr(_local, "cancellation", None)
    _local.cancellation = cancellation
    try:
        yield
    finally:
        _local.cancellation = previous
