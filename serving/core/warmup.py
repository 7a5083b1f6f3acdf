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
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from protos.tensorflow_serving.apis import prediction_log_pb2
from runtime.errors import DataLossError, InvalidArgumentError, UnimplementedError
from runtime.saved_model import DEFAULT_SIGNATURE_KEY
from runtime.tensor_codec import to_ndarray
from serving.core.single_servable import SingleServableManager
from serving.core.tfrecord import RecordReader
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import PredictRequest, predict
from serving.servable import ServableId

if TYPE_CHECKING:
    from runtime.saved_model import LoadedModel

log = logging.getLogger("graphserve")

ASSETS_EXTRA = "assets.extra"
REQUESTS_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"

# Log types that cannot be replayed; the number is the oneof field's, which TF Serving prints.
_UNSUPPORTED = {"session_run_log": 5, "predict_streamed_log": 7}


def warmup_file(version_dir: str | Path) -> Path:
    return Path(version_dir) / ASSETS_EXTRA / REQUESTS_FILE


def run_warmup(
    servable: LoadedModel,
    version_dir: str | Path,
    *,
    model_name: str,
    version: int,
    iterations: int = 1,
) -> int:
    """Replay the version's warmup records; returns how many records were read (records with
    no log type included, as TF Serving counts them). Raises an ``OpError`` on any failure."""
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


def _parse(record: bytes, path: Path) -> Any:
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

    def replay(self, entry: Any) -> None:
        kind = entry.WhichOneof("log_type")
        if kind is None:
            return
        if kind in _UNSUPPORTED:
            raise UnimplementedError(
                f"Unsupported log_type for warmup: {_UNSUPPORTED[kind]} ({kind})"
            )
        request = getattr(entry, kind).request
        if kind == "predict_log":
            self._predict(request)
        elif kind == "classify_log":
            self._classify(request.model_spec.signature_name, self._examples(request.input))
        elif kind == "regress_log":
            self._regress(request.model_spec.signature_name, self._examples(request.input))
        elif kind == "multi_inference_log":
            self._multi_inference(request)
        else:  # a log type added to the proto after this was written
            raise UnimplementedError(f"Unsupported log_type for warmup: {kind}")

    def _predict(self, request: Any) -> None:
        inputs = {alias: to_ndarray(tensor) for alias, tensor in request.inputs.items()}
        spec = self._spec(request.model_spec.signature_name)
        predict(self.manager, PredictRequest(spec, inputs, tuple(request.output_filter)))

    @staticmethod
    def _examples(input_proto: Any) -> list[bytes]:
        from serving.requests.example_input import serialized_examples

        return serialized_examples(input_proto)

    def _classify(self, signature_name: str, examples: list[bytes]) -> None:
        from serving.requests.classify import ClassifyRequest, classify

        classify(self.manager, ClassifyRequest(self._spec(signature_name), examples))

    def _regress(self, signature_name: str, examples: list[bytes]) -> None:
        from serving.requests.regress import RegressRequest, regress

        regress(self.manager, RegressRequest(self._spec(signature_name), examples))

    def _multi_inference(self, request: Any) -> None:
        """Each task as its own classify or regress call, after TF Serving's request checks."""
        signatures = self.manager.servable.signatures
        model_name = ""
        seen: set[str] = set()
        for task in request.tasks:
            name = task.model_spec.name
            if not name:
                raise InvalidArgumentError("Found ModelSpec with an empty model name.")
            if model_name and name != model_name:
                raise InvalidArgumentError(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name."
                )
            model_name = name
            signature = task.model_spec.signature_name or DEFAULT_SIGNATURE_KEY
            if signature in seen:
                raise InvalidArgumentError(f"Duplicate evaluation of signature: {signature}")
            seen.add(signature)
            if signature not in signatures:
                raise InvalidArgumentError(
                    f"Requested signature not found in model graph: {signature}"
                )
            if task.method_name not in (CLASSIFY_METHOD, REGRESS_METHOD):
                raise UnimplementedError(f"Unsupported signature method_name: {task.method_name}")
        examples = self._examples(request.input)
        for task in request.tasks:
            signature = task.model_spec.signature_name or DEFAULT_SIGNATURE_KEY
            if task.method_name == CLASSIFY_METHOD:
                self._classify(signature, examples)
            else:
                self._regress(signature, examples)
