"""The REST timeout for many requests at once, with one event-loop timer.

``asyncio.timeout`` arms and cancels a loop timer per request (a few microseconds each, as much
as the rest of a small model's request path). Every REST request has the same timeout, so
deadlines come in the order requests arrive: ``DeadlineWatch`` keeps the waiting requests'
tasks in arrival order and one timer set for the oldest one's deadline. When it fires, every
task past its deadline is cancelled, exactly as ``asyncio.timeout`` would have, and its handler
turns the ``CancelledError`` into the REST timeout (``expired``).

A request done in time costs a dict insert and delete; the timer is moved only when it fires.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import math
import time

# Loop timers tick in milliseconds (uvloop's): a deadline this close counts as reached, so an
# early tick cancels instead of re-arming for the last fraction of a millisecond.
_SLACK_S = 1e-3


class DeadlineWatch:
    """Cancels watched tasks whose deadline (a ``time.monotonic`` value) has passed."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[asyncio.Task[object], float] = {}  # arrival = deadline order
        self._expired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def watch(self, task: asyncio.Task[object], deadline: float) -> None:
        loop = task.get_loop()
        if loop is not self._loop:  # a new loop (tests run several): the old one's are gone
            self._loop = loop
            self._waiting = {}
            self._expired = set()
            self._timer, self._timer_at = None, math.inf
        self._waiting[task] = deadline
        if deadline < self._timer_at:
            self._arm(loop, deadline)

    def done(self, task: asyncio.Task[object]) -> bool:
        """Stop watching ``task``; True when it was cancelled for its deadline (then its
        cancellation is taken back, as ``asyncio.timeout`` takes back its own)."""
        self._waiting.pop(task, None)
        if task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = loop.call_at(loop.time() + (deadline - time.monotonic()), self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        now = time.monotonic()
        waiting = self._waiting
        while waiting:
            task, deadline = next(iter(waiting.items()))
            if deadline > now + _SLACK_S:
                assert self._loop is not None
                self._arm(self._loop, deadline)
                return
            del waiting[task]
            self._expired.add(task)
            task.cancel()
