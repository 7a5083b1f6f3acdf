"""Model warmup: replay a version's recorded requests before the version is published.

A SavedModel may ship ``assets.extra/tf_serving_warmup_requests``, a TFRecord file of serialized
``tensorflow.serving.PredictionLog`` messages. As TensorFlow Serving does, each record's request
is run against the freshly loaded version (its response is ignored) so that the first real
request does not pay for first-call work (plan compilation, caches). The rules are TF Serving's:

* no file: nothing to do, not an error;
* predict, classify, regress and multi-inference logs are replayed through the ordinary request
  layer, ``iterations`` times each; the model name and version in a record's ``model_spec`` are
  not checked (the record may come from another deployment), its signature name is honoured;
* session-run and streamed-predict logs are UNIMPLEMENTED; records with no log set are skipped
  (but counted);
* more than 1000 records, an unparsable record, a corrupted file or any failing request raise,
  which fails the load.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from google.protobuf.message import DecodeError

from protos.tensorflow_serving.apis import prediction_log_pb2
from runtime.errors import (
    CancelledError,
    DataLossError,
    InvalidArgumentError,
    UnimplementedError,
)
from serving.core.single_servable import SingleServableManager
from serving.core.tfrecord import RecordReader
from serving.requests import proto_convert as convert
from serving.requests.classify import ClassifyRequest, classify
from serving.requests.model_spec import ModelSpec
from serving.requests.multi_inference import run_multi_inference
from serving.requests.predict import PredictRequest, predict
from serving.requests.regress import RegressRequest, regress
from serving.servable import Servable, ServableId

log = logging.getLogger("graphserve")

ASSETS_EXTRA = "assets.extra"
REQUESTS_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000

# Log types that cannot be replayed; the number is the oneof field's, which TF Serving prints.
_UNSUPPORTED = {"session_run_log": 5, "predict_streamed_log": 7}


def warmup_file(version_dir: str | Path) -> Path:
    return Path(version_dir) / ASSETS_EXTRA / REQUESTS_FILE


def run_warmup(
    servable: Servable,
    version_dir: str | Path,
    *,
    model_name: str,
    version: int,
    iterations: int = 1,
    stop: threading.Event | None = None,
) -> int:
    """Replay the version's warmup records; returns how many records were read (records with
    no log type included, as TF Serving counts them). Raises an ``OpError`` on any failure,
    and CancelledError once ``stop`` is set (the server is shutting down)."""
    path = warmup_file(version_dir)
    if not path.exists():
        log.info("No warmup data file found at %s", path)
        return 0
    log.info(
        "Starting to read warmup data for model at %s with model-warmup-options "
        'num_request_iterations { value: %d } model_name: "%s" model_version: %d',
        path,
        iterations,
        model_name,
        version,
    )
    start = time.perf_counter_ns()
    replayer = _Replayer(SingleServableManager(ServableId(model_name, version), servable))
    count = 0
    with RecordReader(path) as reader:
        while (record := _next_record(reader)) is not None:
            # TF Serving runs the 1001st record before refusing it; refusing it first gives
            # the same error without the wasted work.
            if count == MAX_RECORDS:
                raise InvalidArgumentError(
                    f"Number of warmup records exceeds the maximum ({MAX_RECORDS}) at {path}"
                )
            entry = _parse(record, path)
            for _ in range(iterations):
                if stop is not None and stop.is_set():
                    raise CancelledError(f"Warmup of {model_name} version {version} stopped: "
                                         "the server is shutting down")
                replayer.replay(entry)
            count += 1
    elapsed_us = (time.perf_counter_ns() - start) // 1000
    log.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d. "
        "Elapsed time (microseconds): %d.",
        path,
        count,
        elapsed_us,
    )
    return count


def _next_record(reader: RecordReader) -> bytes | None:
    try:
        return reader.read_record()
    except DataLossError as err:
        raise DataLossError(
            f"{err.message}. Please verify your warmup data is in TFRecord format."
        ) from err


def _parse(record: bytes, path: Path) -> prediction_log_pb2.PredictionLog:
    entry = prediction_log_pb2.PredictionLog()
    try:
        entry.ParseFromString(record)
    except DecodeError as err:
        # TF Serving prints the raw record; a short prefix is enough to recognise it.
        preview = repr(record[:32]) + ("..." if len(record) > 32 else "")
        raise InvalidArgumentError(
            f"Failed to parse warmup record: {preview} ({len(record)} bytes) from {path}"
        ) from err
    return entry


class _Replayer:
    """Runs one PredictionLog's request against the single servable."""

    def __init__(self, manager: SingleServableManager) -> None:
        self.manager = manager

    def _spec(self, signature_name: str) -> ModelSpec:
        id = self.manager.id
        return ModelSpec(id.name, id.version, None, signature_name)

    def replay(self, entry: prediction_log_pb2.PredictionLog) -> None:
        kind = entry.WhichOneof("log_type")
        if kind is None:
            return
        if kind in _UNSUPPORTED:
            raise UnimplementedError(
                f"Unsupported log_type for warmup: {_UNSUPPORTED[kind]} ({kind})"
            )
        request = getattr(entry, kind).request
        manager = self.manager
        if kind == "predict_log":
            spec = self._spec(request.model_spec.signature_name)
            inputs = convert.TensorInputs(request.inputs)
            predict(manager, PredictRequest(spec, inputs, tuple(request.output_filter)))
        elif kind == "classify_log":
            spec = self._spec(request.model_spec.signature_name)
            classify(manager, ClassifyRequest(spec, convert.examples(request.input)))
        elif kind == "regress_log":
            spec = self._spec(request.model_spec.signature_name)
            regress(manager, RegressRequest(spec, convert.examples(request.input)))
        elif kind == "multi_inference_log":
            run_multi_inference(
                manager.id, manager.servable, convert.multi_inference_request(request)
            )
        else:  # a log type added to the proto after this was written
            raise UnimplementedError(f"Unsupported log_type for warmup: {kind}")
