"""Where a REST inference runs: inline on the event loop, or off it.

A thread hop costs tens of microseconds (measured here: ~50 µs from the loop to a pool thread
and back), several times what a small model's run costs, so a run that is known to be short
is done inline on the event loop. Everything else stays off the loop: a batching version queues
its task and calls back (no thread waits), any other version runs on the worker pool.

"Known to be short" is learned per (model, version or label, signature): a moving average of
its runs' CPU time, and whether the version batches (its run never reached the executor). The
average forgives a single slow sample (a preempted or descheduled thread on shared cores), yet a
version that is really slow leaves the loop within a few runs. Every ``REPROBE``-th request
of an inline route goes the async way again, so a route whose new version batches stops running
inline.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from serving.requests.model_spec import ModelSpec
from serving.rest.routes import Route

INLINE_RUN_S = 100e-6  # a run under this (decode + run when inline) may block the loop
_SAMPLE_CAP_S = 10 * INLINE_RUN_S  # one outlier moves the average at most this far
_WEIGHT = 1 / 8  # of the newest sample in the average
INLINE_BODY_BYTES = 16 << 10  # larger bodies are parsed and decoded off the loop
INLINE_OUTPUT_VALUES = 512  # larger outputs are written to JSON off the loop (~0.2 ms and up)
REPROBE = 256
_MAX_SITES = 4096  # names come from clients: forget everything rather than grow without bound


class RunSite:
    """What is known about one route's runs; shared by its concurrent requests (plain
    attribute writes, so no lock). ``spec`` is the route's ModelSpec, made once."""

    __slots__ = ("_shared", "batching", "calls", "run_s", "spec")

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.batching: bool | None = None  # None: not seen yet
        self.run_s = math.inf
        self.calls = 0
        self._shared: SiteExecutor | None = None

    def inline(self) -> bool:
        """Whether this request's run goes inline."""
        self.calls += 1
        return (
            self.batching is False and self.run_s < INLINE_RUN_S and self.calls % REPROBE != 0
        )

    def executor(self, pool: Executor) -> SiteExecutor:
        """The executor for a run that goes off the loop. A version known to batch does not
        use it, so one shared executor serves its requests (nothing to learn from them),
        except every ``REPROBE``-th, which learns afresh whether the version still batches."""
        if self.batching is not True or self.calls % REPROBE == 0:
            return SiteExecutor(pool, self)
        shared = self._shared
        if shared is None or shared.pool is not pool:
            shared = self._shared = SiteExecutor(pool, self, learns=False)
        return shared

    def record(self, seconds: float) -> None:
        """One run's CPU time (plain float updates from any thread; a lost one is harmless)."""
        seconds = min(seconds, _SAMPLE_CAP_S)
        if self.run_s == math.inf:
            self.run_s = seconds
        else:
            self.run_s += (seconds - self.run_s) * _WEIGHT


class SiteExecutor(Executor):
    """The executor handed to ``predict_async`` for one request: runs on ``pool``, records the
    run time, and tells afterwards whether the version used it (i.e. does not batch)."""

    def __init__(self, pool: Executor, site: RunSite, learns: bool = True) -> None:
        self.pool = pool
        self.site = site
        self.used = False
        self.learns = learns

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.used = True
        return self.pool.submit(self._timed, fn, args, kwargs)

    def _timed(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # This thread's CPU time: on a busy server the wall time of a pool run is mostly waiting
        # for the GIL, which says nothing about how long the run would hold the loop.
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.site.record(time.thread_time() - start)

    def learned(self) -> None:
        """After a request that ran: a version that never used the executor queued its run."""
        if self.learns:
            self.site.batching = not self.used


class RunSites:
    """The ``RunSite`` of every (route, signature name) seen."""

    def __init__(self) -> None:
        self._sites: dict[tuple[Route, str], RunSite] = {}

    def get(self, route: Route, signature_name: str) -> RunSite:
        key = (route, signature_name)
        site = self._sites.get(key)
        if site is None:
            if len(self._sites) >= _MAX_SITES:
                self._sites = {}
            spec = ModelSpec(route.model_name, route.version, route.label, signature_name)
            site = self._sites[key] = RunSite(spec)
        return site
