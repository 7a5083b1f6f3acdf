"""Per-queue batching numbers, kept in memory for the metrics endpoint.

One ``BatchStats`` per batch queue (model version x signature). The batch threads record into
it once per batch; the model's batch function records padding; anyone may read ``snapshot()``.
The buckets follow TensorFlow Serving's batching metrics: batch sizes in powers of two
(``1 * 2^i``, 14 buckets) and queueing latency in microseconds (``100 * 1.2^i``, 52 buckets).
Bucket ``i`` counts values ``v`` with ``bounds[i-1] < v <= bounds[i]`` (Prometheus' ``le``);
the last count is the overflow above the largest bound.

Every record also goes to TensorFlow Serving's process-wide ``batching_session`` metrics
(``serving.metrics.catalog``), which outlive the queue.

Thread safety: every method may be called from any thread; each takes one short lock.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from serving.metrics.catalog import BATCH_THREAD_POOL, METRICS

BATCH_SIZE_BOUNDS: tuple[int, ...] = tuple(2**i for i in range(14))
QUEUEING_LATENCY_BOUNDS_US: tuple[float, ...] = tuple(100.0 * 1.2**i for i in range(52))


class Histogram:
    """Counts of values per bucket, with their sum. Not locked: its owner locks."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def add(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def snapshot(self) -> dict[str, Any]:
        return {
            "bounds": list(self.bounds),
            "counts": list(self.counts),
            "count": self.count,
            "sum": self.sum,
        }


class BatchStats:
    """Batches, tasks, batch sizes, padding and queueing latency of one queue."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._batches = 0  # batches handed to the batch function
        self._tasks = 0  # tasks in those batches
        self._rows = 0
        self._expired = 0  # dropped: deadline passed while queued
        self._cancelled = 0  # dropped: caller gone while queued
        self._failed_batches = 0  # the batch function raised
        self._batch_sizes = Histogram(BATCH_SIZE_BOUNDS)
        self._queueing_us = Histogram(QUEUEING_LATENCY_BOUNDS_US)
        self._padded_batches = 0
        self._padding_rows = 0
        self._padding_by_size: dict[int, list[int]] = {}  # padded size -> [batches, rows]

    def record_batch(
        self,
        *,
        rows: int,
        tasks: int,
        queueing_us: Iterable[float] = (),
        expired: int = 0,
        cancelled: int = 0,
        failed: bool = False,
    ) -> None:
        """One dequeued batch: ``rows``/``tasks`` that reached the batch function (0 when every
        task was dropped), each dequeued task's time in the queue, and the drops."""
        pool = (BATCH_THREAD_POOL,)
        with self._lock:
            for latency in queueing_us:
                self._queueing_us.add(latency)
                METRICS.queuing_latency.observe(pool, latency)
            self._expired += expired
            self._cancelled += cancelled
            if tasks:
                self._batches += 1
                self._tasks += tasks
                self._rows += rows
                self._batch_sizes.add(rows)
                METRICS.wrapped_run_count.add(())
                METRICS.input_batch_size.observe((), rows)
                if failed:
                    self._failed_batches += 1

    def record_padding(self, batch_rows: int, padding_rows: int) -> None:
        """A batch of ``batch_rows`` real rows ran padded with ``padding_rows`` more (to an
        allowed batch size)."""
        padded = batch_rows + padding_rows
        METRICS.processed_batch_size.observe((), padded)
        METRICS.padding_size.observe((str(padded),), padding_rows)
        with self._lock:
            entry = self._padding_by_size.get(padded)
            if entry is None:
                entry = self._padding_by_size[padded] = [0, 0]
            entry[0] += 1
            entry[1] += padding_rows
            if padding_rows:
                self._padded_batches += 1
                self._padding_rows += padding_rows

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of every number, as plain JSON-able values."""
        with self._lock:
            return {
                "name": self.name,
                "batches": self._batches,
                "tasks": self._tasks,
                "rows": self._rows,
                "expired": self._expired,
                "cancelled": self._cancelled,
                "failed_batches": self._failed_batches,
                "batch_size": self._batch_sizes.snapshot(),
                "queueing_latency_us": self._queueing_us.snapshot(),
                "padding": {
                    "padded_batches": self._padded_batches,
                    "rows": self._padding_rows,
                    "by_execution_batch_size": {
                        size: {"batches": batches, "padding_rows": rows}
                        for size, (batches, rows) in sorted(self._padding_by_size.items())
                    },
                },
            }
