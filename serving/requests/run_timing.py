"""``runtime_latency``: the time a run spends inside the model, by model and API.

TensorFlow Serving times ``Session::Run``: for a batching version that is the batching session's
``Run``, the wait for the batch included. Predict's runs are timed by the dispatcher (the CPU
time of an unbatched run, the wall time of a batched one); Classify, Regress and MultiInference
run here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from serving.metrics.catalog import METRICS, RUNTIME
from serving.servable import Servable


def record(model_name: str, api: str, seconds: float) -> None:
    METRICS.runtime_latency.observe((model_name, api, RUNTIME), seconds * 1e6)


def timed_run(
    model: Servable,
    model_name: str,
    api: str,
    key: str,
    inputs: Mapping[str, Any],
    aliases: Sequence[str] | None,
) -> Mapping[str, Any]:
    """``model.run``, its time recorded when it succeeds."""
    start = time.perf_counter()
    outputs = model.run(key, inputs, aliases)
    record(model_name, api, time.perf_counter() - start)
    return outputs
