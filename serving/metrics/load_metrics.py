"""Loads and warmups into TensorFlow's metrics: ``load_attempt_count{model_path,status}``
(``success``/``fail``), ``load_latency{model_path}`` (a counter of microseconds, successful
loads only, as TensorFlow's SavedModel loader keeps it), ``model_warmup_latency{model_path,
status}`` and ``model_warmup_records_read{model_path,status}`` (of warmups that finished), and
our ``graphserve_load_failures{model_path}``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from serving.metrics.catalog import LOAD_FAIL, LOAD_SUCCESS, METRICS, ServingMetrics

T = TypeVar("T")


def timed_load(path: Path, load: Callable[[], T], metrics: ServingMetrics = METRICS) -> T:
    """``load()``, counted as one load attempt of the SavedModel at ``path``."""
    where = (str(path),)
    start = time.perf_counter()
    try:
        result = load()
    except BaseException:
        metrics.load_attempt_count.add((str(path), LOAD_FAIL))
        metrics.load_failures.add(where)
        raise
    metrics.load_latency.add(where, round((time.perf_counter() - start) * 1e6))
    metrics.load_attempt_count.add((str(path), LOAD_SUCCESS))
    return result


def timed_warmup(
    path: Path, warmup: Callable[[], int], metrics: ServingMetrics = METRICS
) -> int:
    """``warmup()`` (which returns the records it read), its latency recorded with its outcome
    (``OK`` or the error's code)."""
    start = time.perf_counter()
    status = "OK"
    try:
        records = warmup()
        metrics.model_warmup_records_read.add((str(path), status), records)
        return records
    except BaseException as err:
        code = getattr(err, "code", None)
        status = getattr(code, "name", "UNKNOWN")
        raise
    finally:
        metrics.model_warmup_latency.observe(
            (str(path), status), (time.perf_counter() - start) * 1e6
        )
