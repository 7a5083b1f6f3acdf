"""How many lines a model's Print ops may write: a few a second per node, not one per request.

A model that prints on every request would otherwise flood the server's log at the request rate.
Each Print/PrintV2 kernel keeps a fixed one-second window: up to ``LINES_PER_WINDOW`` lines are
written in it, the rest are counted, and the next line written after the window has passed is
preceded by that count. ``decide`` is the pure rule; ``LineLimiter`` only holds its state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

LINES_PER_WINDOW = 10
WINDOW_S = 1.0


@dataclass(frozen=True)
class Budget:
    """The current window: when it opened, lines written in it, lines suppressed unreported."""

    opened: float
    written: int
    suppressed: int


@dataclass(frozen=True)
class Decision:
    budget: Budget
    write: bool
    # Lines suppressed before this one, to report before writing it (0: nothing to report).
    report_suppressed: int


def decide(budget: Budget | None, now: float, limit: int, window_s: float) -> Decision:
    """Whether a line printed at ``now`` is written, given the state left by the last one
    (``limit`` >= 1 lines a window)."""
    # A clock that went back (never with a monotonic one) opens a fresh window too.
    if budget is None or not budget.opened <= now < budget.opened + window_s:
        pending = budget.suppressed if budget is not None else 0
        return Decision(Budget(now, 1, 0), True, pending)
    if budget.written < limit:
        return Decision(Budget(budget.opened, budget.written + 1, budget.suppressed), True, 0)
    return Decision(Budget(budget.opened, budget.written, budget.suppressed + 1), False, 0)


class LineLimiter:
    """``decide`` over one node's lines; thread-safe (requests print concurrently)."""

    def __init__(
        self,
        limit: int = LINES_PER_WINDOW,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or window_s <= 0:
            raise ValueError(f"need at least 1 line per window of positive length, got {limit} "
                             f"per {window_s} s")
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._budget: Budget | None = None
        self._lock = threading.Lock()

    def admit(self) -> tuple[bool, int]:
        """(write this line?, lines suppressed before it to report first)."""
        with self._lock:
            decision = decide(self._budget, self._clock(), self.limit, self.window_s)
            self._budget = decision.budget
        return decision.write, decision.report_suppressed


__all__ = ["LINES_PER_WINDOW", "WINDOW_S", "Budget", "Decision", "LineLimiter", "decide"]
