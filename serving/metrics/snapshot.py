"""Metrics as plain data, to add up over worker processes.

A worker's ``snapshot`` is every cell of the TensorFlow Serving families and our counters, plus
the request gauges read at that moment; ``merged`` adds snapshots into a fresh
``ServingMetrics``: counters and histograms sum, as one process serving every request would
have counted them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from serving.metrics.catalog import ServingMetrics
from serving.metrics.store import Counter, Family, Histogram

Snapshot = dict[str, Any]


def _families(metrics: ServingMetrics) -> list[Family]:
    return [*metrics.tensorflow_families(), metrics.load_failures, metrics.requests_dropped]


def snapshot(
    metrics: ServingMetrics, in_flight: Mapping[str, int], queue_depths: Mapping[str, int]
) -> Snapshot:
    cells: dict[str, list[Any]] = {}
    for family in _families(metrics):
        if isinstance(family, Histogram):
            cells[family.path] = [
                [list(labels), list(value.counts), value.sum, value.count]
                for labels, value in family.values().items()
            ]
        else:
            cells[family.path] = [[list(labels), value] for labels, value in family.values().items()]
    return {"cells": cells, "in_flight": dict(in_flight), "queue_depths": dict(queue_depths)}


def merged(snapshots: Iterable[Snapshot]) -> tuple[ServingMetrics, dict[str, int], dict[str, int]]:
    """The families summed, then the in-flight requests per model and the batch queue depths
    per queue, summed."""
    total = ServingMetrics()
    by_path = {family.path: family for family in _families(total)}
    in_flight: dict[str, int] = {}
    depths: dict[str, int] = {}
    for one in snapshots:
        for path, rows in one["cells"].items():
            family = by_path.get(path)
            for row in rows:
                labels = tuple(str(v) for v in row[0])
                if isinstance(family, Histogram):
                    family.merge(labels, [int(c) for c in row[1]], float(row[2]), int(row[3]))
                elif isinstance(family, Counter):
                    family.add(labels, float(row[1]))
        for model, count in one["in_flight"].items():
            in_flight[model] = in_flight.get(model, 0) + int(count)
        for queue, count in one["queue_depths"].items():
            depths[queue] = depths.get(queue, 0) + int(count)
    return total, in_flight, depths
