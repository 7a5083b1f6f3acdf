"""Per-model workers for the manager's loads and unloads.

Each model has a lane: its actions run one after another, in the order the manager chose them
(TensorFlow Serving's order within a model), on a thread of the lane's own that ends once the
lane is idle. Different models' lanes run side by side, so one model's slow or hung load (a
variables file that is a FIFO, a dead network mount) never holds back another model's.

At most ``max_loads`` loads run at once (``--num_load_threads``; 0 means one, TensorFlow
Serving's serial default), but a load that has run for ``stall_s`` stops counting against the
limit: a hung load delays the others by ``stall_s`` at most, never for good.

Lane threads are plain daemon threads, not an executor's: ``concurrent.futures`` joins its workers
when the interpreter exits, so a load stuck in a system call would keep the process alive past
SIGTERM. ``close`` waits for running actions only up to its timeout; one still running then is
abandoned (the manager has cancelled it, so a load that does finish is undone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger("graphserve")

# How long a load may run before it stops holding back other models' loads.
LOAD_STALL_SECONDS = 10.0


def slot_wait(started: Sequence[float], now: float, max_loads: int, stall_s: float) -> float:
    """Seconds until one more load may start (0: now), given when the running ones started.

    Only loads younger than ``stall_s`` count against ``max_loads``; the wait ends when the
    oldest of them turns stalled.
    """
    active = sorted(t for t in started if now - t < stall_s)
    if len(active) < max(max_loads, 1):
        return 0.0
    # The (len - max + 1)-th oldest stalling frees a slot.
    return active[len(active) - max(max_loads, 1)] + stall_s - now


@dataclass
class _Lane:
    queue: deque[tuple[Callable[[], None], bool]] = field(default_factory=deque)
    running: bool = False  # a thread is draining the queue


class LoadLanes:
    """Runs each model's actions in order on its own thread. Thread-safe."""

    def __init__(
        self,
        max_loads: int,
        *,
        stall_s: float = LOAD_STALL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_loads = max(max_loads, 1)
        self._stall_s = stall_s
        self._clock = clock
        self._cond = threading.Condition()
        self._lanes: dict[str, _Lane] = {}
        self._loading: dict[int, float] = {}  # load token -> clock time it started
        self._next_token = 0
        self._closed = False

    def submit(self, model: str, action: Callable[[], None], *, load: bool) -> None:
        """Queue ``action`` on ``model``'s lane; a load waits for a load slot first."""
        with self._cond:
            if self._closed:
                return
            lane = self._lanes.setdefault(model, _Lane())
            lane.queue.append((action, load))
            if lane.running:
                return
            lane.running = True
        threading.Thread(
            target=self._drain, args=(model, lane), name=f"graphserve-load-{model}", daemon=True
        ).start()

    def _drain(self, model: str, lane: _Lane) -> None:
        while True:
            with self._cond:
                if not lane.queue:
                    lane.running = False
                    if self._lanes.get(model) is lane:
                        del self._lanes[model]
                    self._cond.notify_all()
                    return
                action, load = lane.queue.popleft()
            token = self._take_slot() if load else None
            try:
                action()
            except Exception:  # the manager's actions catch their own; this is a last guard
                log.exception("A load or unload of servable %s failed unexpectedly", model)
            finally:
                with self._cond:
                    if token is not None:
                        del self._loading[token]
                    self._cond.notify_all()

    def _take_slot(self) -> int:
        with self._cond:
            while True:
                now = self._clock()
                wait = slot_wait(list(self._loading.values()), now, self._max_loads, self._stall_s)
                if wait <= 0 or self._closed:
                    token = self._next_token
                    self._next_token += 1
                    self._loading[token] = now
                    return token
                self._cond.wait(min(wait, 1.0))  # re-checked each second at least

    def idle(self) -> bool:
        with self._cond:
            return not self._lanes

    def close(self, timeout: float | None) -> bool:
        """Take no more actions and wait up to ``timeout`` seconds for queued and running ones;
        True if every lane finished."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: not self._lanes, timeout)
