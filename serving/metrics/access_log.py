"""The access log (``--enable_access_log``): one line per request on logger
``graphserve.access``.

    REST POST /v1/models/m:predict 200 OK 1.234ms in=123B out=456B model=m
    GRPC /tensorflow.serving.PredictionService/Predict OK 0.456ms in=80B out=64B model=m

Only what the record holds: never headers (credentials live there), never bodies.
"""

from __future__ import annotations

import logging

from serving.metrics.requests import REST, RequestRecord

ACCESS_LOGGER = "graphserve.access"


def access_line(record: RequestRecord) -> str:
    """The log line of ``record`` (pure)."""
    if record.transport == REST:
        head = f"REST {record.method} {record.target} {record.http_status}"
    else:
        head = f"GRPC {record.target}"
    return (
        f"{head} {record.status} {record.latency_s * 1e3:.3f}ms "
        f"in={record.request_bytes}B out={record.response_bytes}B model={record.model or '-'}"
    )


class AccessLog:
    """The request observer that writes the access log."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger or logging.getLogger(ACCESS_LOGGER)

    def observe(self, record: RequestRecord) -> None:
        if self._log.isEnabledFor(logging.INFO):
            self._log.info("%s", access_line(record))
