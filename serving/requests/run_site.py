"""Which runs are short enough to do inline on the event loop.

A thread hop costs tens of microseconds (measured here: ~50 µs from the loop to a pool thread
and back), several times what a small model's run costs, so a run known to be short is done
inline on the event loop. Everything else stays off the loop: a batching version queues its
task and calls back (no thread waits), any other run goes to the worker pool.

"Known to be short" is learned per model spec (model, version or label, signature): a moving
average of its runs' CPU time. The average forgives a single slow sample (a preempted or
descheduled thread on shared cores), yet a version that is really slow leaves the loop within a
few runs.
"""

from __future__ import annotations

import math

from serving.requests.model_spec import ModelSpec

# The default line: a run under this may block the loop. Above the ~50 µs hop: a run measured
# on a worker, contending for the interpreter with the loop, takes up to twice the CPU time it
# takes inline, and a line near the hop would keep short runs on the workers for good.
INLINE_RUN_S = 250e-6
# One outlier (a garbage collection, a page fault) moves the average at most (cap - average) / 8:
# a short run stays inline through it, and a slow one is still above the line.
_SAMPLE_CAP = 2.0  # times the line
_WEIGHT = 1 / 8  # of the newest sample in the average
_MAX_SITES = 4096  # specs come from clients: forget everything rather than grow without bound


class RunSite:
    """What is known about one model spec's runs; shared by its concurrent requests (plain
    attribute writes, so no lock). ``spec`` is the ModelSpec, made once."""

    __slots__ = ("_cap_s", "_line_s", "request", "run_s", "spec")

    def __init__(self, spec: ModelSpec, line_s: float = INLINE_RUN_S) -> None:
        self.spec = spec
        self.request = spec.servable_request()
        self.run_s = math.inf
        self._line_s = line_s
        self._cap_s = _SAMPLE_CAP * line_s

    def short(self) -> bool:
        """Whether a run that does not batch may go inline."""
        return self.run_s < self._line_s

    def record(self, seconds: float) -> None:
        """One run's CPU time (plain float updates from any thread; a lost one is harmless)."""
        seconds = min(seconds, self._cap_s)
        if self.run_s == math.inf:
            self.run_s = seconds
        else:
            self.run_s += (seconds - self.run_s) * _WEIGHT


class RunSites:
    """The ``RunSite`` of every model spec seen, by the spec's fields."""

    def __init__(self, line_s: float = INLINE_RUN_S) -> None:
        self._line_s = line_s
        self._sites: dict[tuple[str, int | None, str | None, str], RunSite] = {}

    def get(self, name: str, version: int | None, label: str | None, signature: str) -> RunSite:
        key = (name, version, label, signature)
        site = self._sites.get(key)
        if site is None:
            if len(self._sites) >= _MAX_SITES:
                self._sites = {}
            spec = ModelSpec(name, version, label, signature)
            site = self._sites[key] = RunSite(spec, self._line_s)
        return site
