"""Every version's latest state, as the manager publishes it, for status queries and waiting.

Like TensorFlow Serving's ServableStateMonitor: the latest state per (model, version) is kept,
END included and never forgotten (a model's status lists every version it ever had); a bounded
log keeps the changes in order. Thread-safe: ``publish`` may come from any loader thread.
Listeners run after the state is recorded, in publication order, outside the state lock (they
may query the monitor, and must not block for long: they run on the manager's threads).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from serving.servable import ManagerState, ServableId, ServableState

log = logging.getLogger("graphserve")

Listener = Callable[[ServableState], None]


class ServableStateMonitor:
    def __init__(self, max_events: int = 10_000) -> None:
        # Reentrant so that wait_for predicates can call states() while the wait holds it.
        self._cond = threading.Condition(threading.RLock())
        # Serializes publications so listeners see them in the order of the event log.
        self._publishing = threading.RLock()
        self._states: dict[str, dict[int, ServableState]] = {}
        self._events: deque[ServableState] = deque(maxlen=max_events)
        self._listeners: list[Listener] = []

    def publish(self, state: ServableState) -> None:
        with self._publishing:
            with self._cond:
                self._states.setdefault(state.id.name, {})[state.id.version] = state
                self._events.append(state)
                listeners = list(self._listeners)
                self._cond.notify_all()
            for listener in listeners:
                try:
                    listener(state)
                except Exception:  # a broken listener must not stop the manager
                    log.exception("Servable state listener failed on %s", state)

    def add_listener(self, fn: Listener) -> None:
        with self._cond:
            self._listeners.append(fn)

    def states(self, name: str) -> list[ServableState]:
        """The latest state of every version the model has had, newest version first."""
        with self._cond:
            versions = self._states.get(name, {})
            return [versions[v] for v in sorted(versions, reverse=True)]

    def state(self, id: ServableId) -> ServableState | None:
        with self._cond:
            return self._states.get(id.name, {}).get(id.version)

    def model_names(self) -> list[str]:
        with self._cond:
            return sorted(self._states)

    def events(self) -> list[ServableState]:
        """Every change in publication order (the oldest dropped past ``max_events``)."""
        with self._cond:
            return list(self._events)

    def wait_for(
        self, predicate: Callable[[ServableStateMonitor], bool], timeout: float | None
    ) -> bool:
        """Block until ``predicate(self)`` holds (True) or ``timeout`` seconds pass (False).

        The predicate is re-evaluated after every publication.
        """
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def wait_until_available(
        self, name: str, version: int | None = None, timeout: float | None = None
    ) -> bool:
        """Wait until a version (or, with None, any version) of ``name`` is AVAILABLE.

        For a specific version it gives up as soon as that version reaches END (as
        TensorFlow Serving's wait does): False. For any version it waits for one to become
        AVAILABLE, since another version may still be loading after one failed.
        """
        if version is None:
            return self.wait_for(lambda m: _any_available(m, name), timeout)
        id = ServableId(name, version)
        finished = (ManagerState.AVAILABLE, ManagerState.END)
        self.wait_for(lambda m: _state_of(m, id) in finished, timeout)
        return _state_of(self, id) is ManagerState.AVAILABLE


def _state_of(monitor: ServableStateMonitor, id: ServableId) -> ManagerState | None:
    state = monitor.state(id)
    return None if state is None else state.state


def _any_available(monitor: ServableStateMonitor, name: str) -> bool:
    return any(s.state is ManagerState.AVAILABLE for s in monitor.states(name))
