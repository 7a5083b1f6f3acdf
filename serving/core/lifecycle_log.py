"""One log line per version state change, with how long the previous phase took.

A listener of the ``ServableStateMonitor``: each state the manager publishes becomes a line on
the ``graphserve.lifecycle`` logger carrying ``model`` and ``version`` (``extra=``), e.g.::

    Servable {name: m version: 1} AVAILABLE after 1.23 s LOADING
    Servable {name: m version: 1} END after 0.02 s LOADING; error: NOT_FOUND: ...

A state published again (a failed attempt while a load is retried, a serving version whose
health changes) says so, timed from the start of the phase it is still in. TensorFlow
Serving's own lines (harness, source) stay as they are; these come beside them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from serving.logs import servable_extra
from serving.servable import ManagerState, ServableId, ServableState

log = logging.getLogger("graphserve.lifecycle")


@dataclass(frozen=True)
class Phase:
    """The state a version is in and when (on the listener's clock) it entered it."""

    state: ManagerState
    since: float


def describe(state: ServableState, previous: Phase | None, now: float) -> tuple[int, str]:
    """The (level, message) of one publication, given the phase the version was in."""
    head = f"Servable {state.id} {state.state.name}"
    if previous is None:
        message = head
    elif previous.state is not state.state:
        message = f"{head} after {now - previous.since:.2f} s {previous.state.name}"
    else:
        message = f"{head} again, {now - previous.since:.2f} s into {previous.state.name}"
    if state.error is not None:
        return logging.WARNING, f"{message}; error: {state.error.status_text()}"
    return logging.INFO, message


def next_phase(state: ServableState, previous: Phase | None, now: float) -> Phase | None:
    """The phase after this publication (None once the version has ended: forgotten)."""
    if state.state is ManagerState.END:
        return None
    if previous is not None and previous.state is state.state:
        return previous
    return Phase(state.state, now)


class LifecycleLog:
    """The listener. Thread-safe (the monitor already calls it one publication at a time).

    Holds one entry per version not yet ended, so what it keeps is bounded by the versions
    the manager holds."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log
    ) -> None:
        self._clock = clock
        self._log = logger
        self._lock = threading.Lock()
        self._phases: dict[ServableId, Phase] = {}

    def __call__(self, state: ServableState) -> None:
        now = self._clock()
        with self._lock:
            previous = self._phases.get(state.id)
            phase = next_phase(state, previous, now)
            if phase is None:
                self._phases.pop(state.id, None)
            else:
                self._phases[state.id] = phase
        level, message = describe(state, previous, now)
        self._log.log(level, "%s", message, extra=servable_extra(state.id.name, state.id.version))
