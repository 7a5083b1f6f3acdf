"""Running a model version from an event loop without blocking it.

A batching version (``serving.batching.session.BatchingModel``) takes the task into its queue
and calls back from a batch thread, so the caller holds no thread while it waits. Any other
version runs on the given executor. Either way the event loop only waits on a future.

Answers reach the loop through one ``_Inbox`` per loop: a batch thread finishing a batch of
many tasks wakes the loop once (one ``call_soon_threadsafe``), not once per task, and the loop
settles the whole batch's futures in one callback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np

from runtime.errors import CancelledError, DeadlineExceededError
from serving.requests.call_context import CallContext, current
from serving.servable import ServableHandle

Outputs = dict[str, np.ndarray]
NOT_RUN_MESSAGE = "The run was cancelled before it started"
_Answer = tuple["asyncio.Future[Outputs]", Any, "BaseException | None"]


def _settle(future: asyncio.Future[Outputs], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting (timeout or disconnect)
        return
    if error is not None:
        future.set_exception(error)
    else:
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
        self, future: asyncio.Future[Outputs], result: Any, error: BaseException | None
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
    """One run in flight: its completion callback (``on_done``) and, for a batching version,
    its call context (``deadline``, ``cancelled``) in one object."""

    __slots__ = ("_gone", "_handle", "_inbox", "deadline", "waiter")

    def __init__(
        self,
        handle: ServableHandle,
        inbox: _Inbox,
        waiter: asyncio.Future[Outputs],
        call: CallContext | None,
    ) -> None:
        self._handle = handle
        self._inbox = inbox
        self.waiter = waiter
        self.deadline = call.deadline if call is not None else None
        self._gone = call.cancelled if call is not None else None

    def __call__(self, result: Any, error: BaseException | None) -> None:  # any thread, once
        self._handle.release()
        self._inbox.put(self.waiter, result, error)

    def cancelled(self) -> bool:
        # A caller that stopped awaiting (timed out, disconnected) is gone too.
        if self.waiter.done():
            return True
        gone = self._gone
        return gone is not None and gone()

    def run_if_wanted(
        self,
        model: Any,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None,
    ) -> Outputs:
        """The unbatched run, on an executor's thread; not started when the caller has gone
        or its deadline has passed while the run waited for a thread."""
        if self.cancelled():
            raise CancelledError(NOT_RUN_MESSAGE)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DeadlineExceededError("Deadline exceeded before the model could be run")
        outputs: Outputs = model.run(key, inputs, output_aliases)
        return outputs

    def ran(self, future: Future[Outputs] | asyncio.Future[Outputs]) -> None:
        """The unbatched run's answer, once the executor is done with it: after whatever the
        executor does around the run (a run timer), and also when it never ran the work (shut
        down, or it refused it)."""
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
    executor: Executor | None = None,
    call: CallContext | None = None,
) -> asyncio.Future[Outputs]:
    """Start a run of the handle's version; the future answers its outputs. Takes over
    ``handle``: it is released when the run is over, not when the caller stops waiting, so a
    version is never unloaded under a run still in progress. Event-loop thread only."""
    loop = asyncio.get_running_loop()
    model = handle.servable
    waiter: asyncio.Future[Outputs] = loop.create_future()
    submit = getattr(model, "submit", None)
    try:
        run = _Run(handle, _inbox(loop), waiter, call or current())
        batches = getattr(model, "batches", None)  # absent: every run is queued
        if submit is None or (batches is not None and not batches(key, output_aliases)):
            if executor is None:  # the loop's default executor, reachable only this way
                ran: Any = loop.run_in_executor(
                    None, run.run_if_wanted, model, key, inputs, output_aliases
                )
            else:  # nobody awaits the executor's own future: no need to wrap it for the loop
                ran = executor.submit(run.run_if_wanted, model, key, inputs, output_aliases)
            ran.add_done_callback(run.ran)
        else:
            # The run is its own call context: the batcher reads its deadline and asks it
            # whether the caller is still there.
            submit(key, inputs, output_aliases, run, run)
    except BaseException:
        handle.release()
        raise
    return waiter


async def run_model(
    handle: ServableHandle,
    key: str,
    inputs: Mapping[str, np.ndarray],
    output_aliases: Sequence[str] | None,
    executor: Executor | None = None,
    call: CallContext | None = None,
) -> Outputs:
    """``start_run``, awaited."""
    return await start_run(handle, key, inputs, output_aliases, executor, call)
