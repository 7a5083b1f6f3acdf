"""Deadlines and departed clients for many requests at once, with one event-loop timer.

A request waiting off the event loop (for a worker, a batch, or a run in progress) is watched:

* at its deadline its task is cancelled, as ``asyncio.timeout`` would, and its caller is
  stopped (``CallContext.stop``) so that the run stops at its next kernel;
* a caller whose transport can only be asked whether the client has gone (REST: uvicorn marks
  the request disconnected and tells nobody) is asked every ``POLL_S``; a departed one is
  stopped, and the run's error answers the task (nobody reads it).

Deadlines sit in a heap, so requests with different deadlines (gRPC's are the client's own)
cost a push and a lazy pop; the timer is re-armed only for an earlier deadline or when it
fires. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time

from runtime.errors import CancelledError
from serving.requests.call_context import CallContext

CLIENT_GONE = "The client went away before the answer was ready"
POLL_S = 0.1  # a departed client's run stops within this (plus one kernel)
# Loop timers tick in milliseconds (uvloop's): a deadline this close counts as reached, so an
# early tick cancels instead of re-arming for the last fraction of a millisecond.
_SLACK_S = 1e-3

Watched = asyncio.Task[object]


class CallWatch:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reset()

    def _reset(self) -> None:
        self._calls: dict[Watched, CallContext] = {}
        self._heap: list[tuple[float, int, Watched]] = []
        self._polled: set[Watched] = set()
        self._expired: set[Watched] = set()
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def watch(self, task: Watched, call: CallContext) -> None:
        loop = task.get_loop()
        if loop is not self._loop:  # a new loop (tests run several): the old one's are gone
            self._reset()
            self._loop = loop
        self._calls[task] = call
        wake = math.inf
        if call.deadline is not None:
            heapq.heappush(self._heap, (call.deadline, next(self._order), task))
            wake = call.deadline
        if call.polls:
            self._polled.add(task)
            wake = min(wake, time.monotonic() + POLL_S)
        if wake < self._timer_at:
            self._arm(loop, wake)

    def done(self, task: Watched) -> bool:
        """Stop watching ``task``; True when it was cancelled for its deadline (then its
        cancellation is taken back, as ``asyncio.timeout`` takes back its own)."""
        calls = self._calls
        if calls.pop(task, None) is not None and len(self._heap) > 2 * len(calls) + 64:
            # Answered requests stay in the heap until their deadline; keep it near the
            # number still waiting.
            self._heap = [entry for entry in self._heap if entry[2] in calls]
            heapq.heapify(self._heap)
        self._polled.discard(task)
        if task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(loop.time() + (at - time.monotonic()), self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        now = time.monotonic()
        heap, calls = self._heap, self._calls
        while heap and heap[0][0] <= now + _SLACK_S:
            _, _, task = heapq.heappop(heap)
            call = calls.pop(task, None)
            if call is None:  # answered already
                continue
            self._polled.discard(task)
            call.stop(call.timed_out())
            self._expired.add(task)
            task.cancel()
        for task in [t for t in self._polled if calls[t].cancelled()]:
            self._polled.discard(task)
            calls[task].stop(CancelledError(CLIENT_GONE))
        while heap and heap[0][2] not in calls:  # drop answered requests from the top
            heapq.heappop(heap)
        wake = heap[0][0] if heap else math.inf
        if self._polled:
            wake = min(wake, now + POLL_S)
        if wake < math.inf:
            assert self._loop is not None
            self._arm(self._loop, wake)
