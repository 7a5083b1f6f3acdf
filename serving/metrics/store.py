"""Labelled counters, gauges and histograms, kept as plain numbers for a scrape to read.

prometheus_client's own metric objects cost a label lookup and a lock per ``labels(...)`` call
on the request path; these are a dict lookup and one short lock, and a scrape turns them into
samples (``exposition``). A family is named by its TensorFlow monitoring path
(``/tensorflow/serving/request_count``); the exposition sanitizes it.

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from serving.metrics.buckets import bucket_index

Kind = Literal["counter", "gauge", "histogram"]
Labels = tuple[str, ...]


@dataclass(frozen=True)
class HistogramValue:
    counts: tuple[int, ...]  # per bucket, the overflow last
    sum: float
    count: int


class Counter:
    kind: Kind = "counter"

    def __init__(self, path: str, labels: Sequence[str] = ()) -> None:
        self.path = path
        self.labels = tuple(labels)
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def add(self, labels: Labels, amount: float = 1) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0) + amount

    def value(self, labels: Labels) -> float:
        with self._lock:
            return self._values.get(labels, 0)

    def values(self) -> dict[Labels, float]:
        with self._lock:
            return dict(self._values)


class Gauge(Counter):
    kind: Kind = "gauge"

    def set(self, labels: Labels, value: float) -> None:
        with self._lock:
            self._values[labels] = value


class Histogram:
    kind: Kind = "histogram"

    def __init__(self, path: str, labels: Sequence[str], bounds: Sequence[float]) -> None:
        self.path = path
        self.labels = tuple(labels)
        self.bounds = tuple(bounds)
        self._cells: dict[Labels, list[float]] = {}  # per-bucket counts, then sum, then count
        self._lock = threading.Lock()

    def observe(self, labels: Labels, value: float) -> None:
        index = bucket_index(self.bounds, value)
        with self._lock:
            cell = self._cells.get(labels)
            if cell is None:
                cell = self._cells[labels] = [0] * (len(self.bounds) + 3)
            cell[index] += 1
            cell[-2] += value
            cell[-1] += 1

    def merge(self, labels: Labels, counts: list[int], total: float, count: int) -> None:
        """Add another histogram's cell (same bounds) to this one's."""
        with self._lock:
            cell = self._cells.get(labels)
            if cell is None:
                cell = self._cells[labels] = [0] * (len(self.bounds) + 3)
            for index, value in enumerate(counts[: len(self.bounds) + 1]):
                cell[index] += value
            cell[-2] += total
            cell[-1] += count

    def values(self) -> dict[Labels, HistogramValue]:
        with self._lock:
            cells = {labels: list(cell) for labels, cell in self._cells.items()}
        return {
            labels: HistogramValue(tuple(int(c) for c in cell[:-2]), cell[-2], int(cell[-1]))
            for labels, cell in cells.items()
        }


Family = Counter | Gauge | Histogram
