"""What the transport knows about the caller of a request: its deadline and whether it is gone.

The request layer's functions take no transport objects, yet the batcher must not compute a
task nobody waits for. A transport sets the context for the duration of a call (``calling``);
whoever queues work (the batcher) reads it with ``current()``. It is a contextvar, so it follows
asyncio tasks and stays per thread for synchronous workers.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CallContext:
    deadline: float | None = None  # time.monotonic() value; None: no deadline
    cancelled: Callable[[], bool] | None = None  # True once the caller has gone

    @classmethod
    def with_timeout(
        cls, timeout_s: float | None, cancelled: Callable[[], bool] | None = None
    ) -> CallContext:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        return cls(deadline, cancelled)


class CallInfo(Protocol):
    """What a queue reads of a caller: ``CallContext``, or anything shaped like it (the async
    request path passes its run object, which answers ``cancelled`` itself)."""

    @property
    def deadline(self) -> float | None: ...

    @property
    def cancelled(self) -> Callable[[], bool] | None: ...


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
