"""Request records into TensorFlow Serving's request metrics.

Which requests count (reference section 8): every REST ``/v1`` request in ``request_count``
(status and metadata GETs too), and of gRPC the inference RPCs Predict, Classify and Regress
(upstream leaves GetModelStatus, GetModelMetadata and MultiInference out), and the Open
Inference Protocol's ModelInfer (its health and metadata RPCs are left out likewise) and REST
``/v2`` infer (API ``infer``; its other ``/v2`` requests are left out as well).
``request_latency`` takes the counted requests that succeeded, labelled by ``API`` (the gRPC
method, or the REST URL verb, empty for GETs) and ``entrypoint`` (``GRPC``/``REST``). Dropped
requests (deadline, cancellation, full queue) also count in ``graphserve_requests_dropped``.
"""

from __future__ import annotations

from serving.metrics.catalog import METRICS, ServingMetrics
from serving.metrics.requests import REST, RequestRecord

COUNTED_RPCS = frozenset({"Predict", "Classify", "Regress", "ModelInfer", "infer"})


def counted(record: RequestRecord) -> bool:
    """Whether upstream counts ``record`` in request_count and request_latency."""
    if record.transport == REST:
        # /v2: only inference (REST's "infer"), as for gRPC.
        return record.target.startswith("/v1/") or record.api in COUNTED_RPCS
    return record.api in COUNTED_RPCS


class RequestMetrics:
    """The request observer that records into ``metrics``."""

    def __init__(self, metrics: ServingMetrics = METRICS) -> None:
        self._count = metrics.request_count
        self._latency = metrics.request_latency
        self._dropped = metrics.requests_dropped

    def observe(self, record: RequestRecord) -> None:
        if record.dropped:
            self._dropped.add((record.model, record.dropped))
        if not counted(record):
            return
        self._count.add((record.model, record.status))
        if record.status == "OK":
            self._latency.observe(
                (record.model, record.api, record.transport), record.latency_s * 1e6
            )
