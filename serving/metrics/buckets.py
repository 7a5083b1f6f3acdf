"""Histogram bucket layouts, as TensorFlow's ``monitoring::Buckets::Exponential``.

``exponential(scale, growth, count)`` gives the upper bounds ``scale * growth**i`` for ``i`` in
``0..count-1``; a value ``v`` falls in the first bucket whose bound is ``>= v`` (Prometheus'
``le``), and above the last bound in the overflow bucket (``le="+Inf"``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


def exponential(scale: float, growth: float, count: int) -> tuple[float, ...]:
    if scale <= 0 or growth <= 1 or count < 1:
        raise ValueError(f"bad exponential layout: scale={scale} growth={growth} count={count}")
    return tuple(scale * growth**i for i in range(count))


# Request and runtime latency, in microseconds: 10 us .. ~2.6e9 us (about 43 minutes).
LATENCY_US = exponential(10, 1.8, 33)
# Examples per MultiInference request.
EXAMPLE_COUNTS = exponential(1, 2, 15)
# Batching: sizes in rows, queueing latency in microseconds.
BATCH_SIZES = exponential(1, 2, 14)
QUEUING_LATENCY_US = exponential(100, 1.2, 52)


def bucket_index(bounds: Sequence[float], value: float) -> int:
    """The bucket ``value`` falls in; ``len(bounds)`` is the overflow bucket."""
    return bisect_left(bounds, value)


def cumulative(counts: Sequence[int]) -> list[int]:
    """Per-bucket counts (overflow last) as Prometheus' cumulative ``le`` counts."""
    total = 0
    out = []
    for count in counts:
        total += count
        out.append(total)
    return out
