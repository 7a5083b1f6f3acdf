"""The worker threads of the gRPC server: blocking RPCs, and model runs of versions that do not
batch.

Work waits in the executor's queue when every worker is busy. A caller whose deadline passes,
or who goes away, while its work waits would never read the answer, so work submitted for a
caller (``submit_for``, ``for_call``) is not started then: it fails with DEADLINE_EXCEEDED or
CANCELLED instead. It runs with its caller's ``CallContext`` current (``calling``), so the
batcher and the request layer see the caller's deadline too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from runtime.errors import CancelledError, DeadlineExceededError
from serving.requests.call_context import CallContext, calling

T = TypeVar("T")

NOT_RUN_DEADLINE = "Deadline exceeded before the request could be run"
NOT_RUN_CANCELLED = "The request was cancelled before it could be run"


def _if_still_wanted(call: CallContext, fn: Callable[..., T], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> T:
    if call.deadline is not None and time.monotonic() >= call.deadline:
        raise DeadlineExceededError(NOT_RUN_DEADLINE)
    if call.cancelled is not None and call.cancelled():
        raise CancelledError(NOT_RUN_CANCELLED)
    with calling(call):
        return fn(*args, **kwargs)


class CallExecutor(ThreadPoolExecutor):
    """``submit`` runs work unconditionally (the work may have to report its own outcome);
    ``submit_for`` and ``for_call`` run it only while its caller still waits."""

    def submit_for(
        self, call: CallContext, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> Future[T]:
        return super().submit(_if_still_wanted, call, fn, args, kwargs)

    def for_call(self, call: CallContext) -> Executor:
        """This executor, with ``call`` as the caller of everything submitted through it."""
        return _ForCall(self, call)


class _ForCall(Executor):
    def __init__(self, pool: CallExecutor, call: CallContext) -> None:
        self._pool = pool
        self._call = call

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self._pool.submit_for(self._call, fn, *args, **kwargs)
