"""The caller of one request, as the request layer sees it: its deadline, whether it is still
there, and the ``Cancellation`` that stops the request's model run once it is not.

A transport makes one per request (``CallContext.with_timeout`` or with the RPC's deadline) and
hands it to the dispatcher. Blocking work run for the request (a worker thread's Classify, a
batching version's blocking run) finds it with ``current()``: ``calling`` sets it for the
duration of that work. It is a contextvar, so it follows asyncio tasks and stays per thread.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runtime.cancellation import Cancellation
from runtime.errors import DeadlineExceededError, OpError

TIMED_OUT = "Timed out waiting for notification"  # TensorFlow Serving's REST timeout message


class CallContext:
    """Readable from any thread; ``leave`` and ``stop`` from any thread. ``timeout_message``
    is the transport's words for a passed deadline (gRPC's own "Deadline Exceeded", which its
    client also hears when its timer fires first; REST's TensorFlow Serving message)."""

    __slots__ = ("_gone", "_left", "cancellation", "deadline", "timeout_message")

    def __init__(
        self,
        deadline: float | None = None,
        gone: Callable[[], bool] | None = None,
        timeout_message: str = TIMED_OUT,
    ) -> None:
        self.deadline = deadline  # time.monotonic() value; None: no deadline
        self._gone = gone  # the transport's own view: True once the client has disconnected
        self.timeout_message = timeout_message
        self._left = False
        self.cancellation = Cancellation()

    @classmethod
    def with_timeout(
        cls, timeout_s: float | None, gone: Callable[[], bool] | None = None
    ) -> CallContext:
        return cls(None if timeout_s is None else time.monotonic() + timeout_s, gone)

    def cancelled(self) -> bool:
        """Whether nobody waits for the answer any more."""
        if self._left:
            return True
        gone = self._gone
        return gone is not None and gone()

    def timed_out(self) -> DeadlineExceededError:
        return DeadlineExceededError(self.timeout_message)

    @property
    def polls(self) -> bool:
        """Whether departure is known only by asking (``cancelled``), not by being told."""
        return self._gone is not None

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def is_active(self) -> bool:
        return not self.cancelled() and not self.expired()

    def time_remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def stop(self, error: OpError) -> None:
        """The caller stopped waiting (deadline, disconnect, shutdown): work not started yet
        is not started, and a run in progress stops at its next kernel."""
        self._left = True
        self.cancellation.cancel(error)

    def leave(self) -> None:
        """The request has been answered: nothing more runs for it."""
        self._left = True


_current: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "graphserve_call", default=None
)


def current() -> CallContext | None:
    return _current.get()


@contextmanager
def calling(context: CallContext | None) -> Iterator[None]:
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)
