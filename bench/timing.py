"""Per-call latency of a zero-argument callable, shared by every engine's process.

Stdlib only: this module is imported both by the driver (our environment) and by the TensorFlow
worker (TensorFlow's environment), so every engine is timed by the same loop.
"""

from __future__ import annotations

import datetime
import gc
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Budget:
    """How long to time one (model, batch, engine) cell."""

    seconds: float = 1.0
    min_calls: int = 20
    # A slow cell stops here even below min_calls (but never below floor_calls), so one slow
    # engine cannot stall the whole run.
    cap_seconds: float = 15.0
    floor_calls: int = 3
    warmup_calls: int = 3
    warmup_seconds: float = 0.1


@dataclass(frozen=True)
class Stats:
    median_us: float
    p90_us: float
    p10_us: float
    p99_us: float
    min_us: float
    mean_us: float
    calls: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _percentile(sorted_us: list[float], q: float) -> float:
    # Nearest-rank on the sorted samples: no interpolation between two real calls.
    index = min(len(sorted_us) - 1, max(0, round(q * (len(sorted_us) - 1))))
    return sorted_us[index]


def summarize(samples_ns: list[int]) -> Stats:
    us = sorted(s / 1000.0 for s in samples_ns)
    return Stats(
        median_us=statistics.median(us),
        p90_us=_percentile(us, 0.90),
        p10_us=_percentile(us, 0.10),
        p99_us=_percentile(us, 0.99),
        min_us=us[0],
        mean_us=statistics.fmean(us),
        calls=len(us),
    )


def measure(call: Callable[[], object], budget: Budget) -> Stats:
    """Warm up, then call repeatedly for the budget; each call is timed on its own.

    The garbage collector is paused while timing (as ``timeit`` does) so a collection triggered by
    one engine's garbage does not land on another's numbers; it runs once before each cell.
    """
    warm_end = time.perf_counter() + budget.warmup_seconds
    for i in range(10_000):
        call()
        if i + 1 >= budget.warmup_calls and time.perf_counter() >= warm_end:
            break
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    samples: list[int] = []
    try:
        start = time.perf_counter()
        deadline = start + budget.seconds
        cap = start + budget.cap_seconds
        clock = time.perf_counter_ns
        while True:
            t0 = clock()
            call()
            samples.append(clock() - t0)
            now = time.perf_counter()
            if now >= deadline and len(samples) >= budget.min_calls:
                break
            if now >= cap and len(samples) >= budget.floor_calls:
                break
    finally:
        if was_enabled:
            gc.enable()
    return summarize(samples)


def machine() -> dict[str, object]:
    """When and on what a run took place, for the JSON a bench keeps."""
    import numpy as np

    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
