"""Running a model version from an event loop without blocking it.

A batching version (``serving.batching.session.BatchingServable``) takes the task into its
queue and calls back from a batch thread, so the caller holds no thread while it waits. Any
other run goes to the worker pool. Either way the event loop only waits on a future.

Answers reach the loop through one ``_Inbox`` per loop: a batch thread finishing a batch of
many tasks wakes the loop once (one ``call_soon_threadsafe``), not once per task, and the loop
settles the whole batch's futures in one callback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future

import numpy as np

from runtime.errors import CancelledError, DeadlineExceededError
from serving.requests.call_context import CallContext
from serving.servable import Outputs, Servable, ServableHandle

NOT_RUN_MESSAGE = "The run was cancelled before it started"
_Answer = tuple["asyncio.Future[Outputs]", "Outputs | None", "BaseException | None"]


def _settle(
    future: asyncio.Future[Outputs], result: Outputs | None, error: BaseException | None
) -> None:
    if future.done():  # the caller stopped waiting (timeout or disconnect)
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert result is not None
        future.set_result(result)


class _Inbox:
    """Answers for the futures of one event loop, from any thread. The first answer after a
    flush schedules the next flush; the others only queue, so a batch of answers costs the
    loop one wake-up. (deque appends and pops are atomic; a flush that races a new answer
    either takes it or leaves it to the flush that answer schedules.) An answer given on the
    loop's own thread settles its future at once."""

    __slots__ = ("_answers", "_pending", "_thread", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:  # on the loop's thread
        self.loop = loop
        self._thread = threading.get_ident()
        self._answers: deque[_Answer] = deque()
        self._pending = False

    def put(
        self, future: asyncio.Future[Outputs], result: Outputs | None, error: BaseException | None
    ) -> None:
        if threading.get_ident() == self._thread:  # answered on the loop itself (refused)
            _settle(future, result, error)
            return
        self._answers.append((future, result, error))
        if self._pending:
            return
        self._pending = True
        try:
            self.loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is gone (shutdown): nobody is waiting
            self._answers.clear()
            self._pending = False

    def _flush(self) -> None:
        self._pending = False  # before draining: a later answer schedules its own flush
        answers = self._answers
        while answers:
            future, result, error = answers.popleft()
            _settle(future, result, error)


_inboxes = threading.local()  # an event loop runs on one thread: that thread's inbox


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    inbox: _Inbox | None = getattr(_inboxes, "inbox", None)
    if inbox is None or inbox.loop is not loop:
        inbox = _inboxes.inbox = _Inbox(loop)
    return inbox


class _Run:
    """One run in flight: its completion callback (``__call__``) and, for a batching version,
    its caller as the queue sees it (``deadline``, ``cancelled``)."""

    __slots__ = ("_handle", "_inbox", "_timed", "call", "deadline", "waiter")

    def __init__(
        self,
        handle: ServableHandle,
        inbox: _Inbox,
        waiter: asyncio.Future[Outputs],
        call: CallContext,
        timed: Callable[[float], None] | None,
    ) -> None:
        self._handle = handle
        self._inbox = inbox
        self.waiter = waiter
        self.call = call
        self.deadline = call.deadline
        self._timed = timed

    def __call__(self, result: Outputs | None, error: BaseException | None) -> None:
        # Any thread, once.
        self._handle.release()
        self._inbox.put(self.waiter, result, error)

    def cancelled(self) -> bool:
        # A caller that stopped awaiting (timed out, disconnected) is gone too.
        return self.waiter.done() or self.call.cancelled()

    def run_if_wanted(
        self,
        servable: Servable,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None,
    ) -> Outputs:
        """The unbatched run, on a worker thread; not started when the caller has gone or its
        deadline has passed while the run waited for a thread. ``timed`` hears its CPU time."""
        if self.cancelled():
            raise CancelledError(NOT_RUN_MESSAGE)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DeadlineExceededError("Deadline exceeded before the model could be run")
        # This thread's CPU time: on a busy server the wall time of a pool run is mostly
        # waiting for the GIL, which says nothing about how long the run would hold the loop.
        start = time.thread_time()
        try:
            return servable.run(key, inputs, output_aliases, self.call.cancellation)
        finally:
            if self._timed is not None:
                self._timed(time.thread_time() - start)

    def ran(self, future: Future[Outputs]) -> None:
        """The unbatched run's answer, once the pool is done with it (also when it never ran
        the work: shut down, or it refused it)."""
        if future.cancelled():
            self(None, CancelledError(NOT_RUN_MESSAGE))
            return
        error = future.exception()
        if error is not None:
            self(None, error)
        else:
            self(future.result(), None)


def start_run(
    handle: ServableHandle,
    key: str,
    inputs: Mapping[str, np.ndarray],
    output_aliases: Sequence[str] | None,
    pool: Executor,
    call: CallContext,
    timed: Callable[[float], None] | None = None,
) -> asyncio.Future[Outputs]:
    """Start a run of the handle's version: queued for a batch when the version batches such
    runs, else on ``pool``; the future answers its outputs. Takes over ``handle``: it is
    released when the run is over, not when the caller stops waiting, so a version is never
    unloaded under a run still in progress. Event-loop thread only."""
    loop = asyncio.get_running_loop()
    servable = handle.servable
    waiter: asyncio.Future[Outputs] = loop.create_future()
    try:
        run = _Run(handle, _inbox(loop), waiter, call, timed)
        if servable.batches(key, output_aliases):
            servable.submit(key, inputs, output_aliases, run, run)
        else:
            pool.submit(run.run_if_wanted, servable, key, inputs, output_aliases).add_done_callback(
                run.ran
            )
    except BaseException:
        handle.release()
        raise
    return waiter
