from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protos.tensorflow_serving.apis import prediction_log_pb2
from runtime.errors import (
    CancelledError,
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    UnimplementedError,
)
from runtime.saved_model import LoadedModel, load_saved_model
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.single_servable import SingleServableManager
from serving.core.tfrecord import encode_record, read_records, write_records
from serving.core.warmup import run_warmup, warmup_file
from serving.servable import ManagerState, ServableId, ServableRequest
from tests.serving.support import HALF_PLUS_TWO, REPO

WARMUP = REPO / "tests" / "fixtures" / "warmup"
PredictionLog = prediction_log_pb2.PredictionLog
Call = tuple[str, dict[str, np.ndarray]]


class Recorder:
    """The loaded model, recording every signature run the request layer makes."""

    def __init__(self, model: LoadedModel) -> None:
        self.model = model
        self.calls: list[Call] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def run(
        self, key: str, inputs: Mapping[str, Any], aliases: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        outputs = self.model.run(key, inputs, aliases)
        self.calls.append((key, outputs))
        return outputs


def make_version(root: Path, warmup: Path | bytes | None) -> Path:
    """A copy of half_plus_two version 123 under ``root`` with the given warmup file."""
    version_dir = root / "half_plus_two" / "123"
    shutil.copytree(HALF_PLUS_TWO / "00000123", version_dir)
    if warmup is not None:
        target = warmup_file(version_dir)
        target.parent.mkdir()
        if isinstance(warmup, Path):
            shutil.copyfile(warmup, target)
        else:
            target.write_bytes(warmup)
    return version_dir


def warm(version_dir: Path, iterations: int = 1) -> tuple[int, Recorder]:
    model = Recorder(load_saved_model(version_dir))
    try:
        count = run_warmup(
            model,  # type: ignore[arg-type]
            version_dir,
            model_name="half_plus_two",
            version=123,
            iterations=iterations,
        )
    finally:
        model.close()
    return count, model


def records(*entries: PredictionLog) -> bytes:
    return b"".join(encode_record(entry.SerializeToString()) for entry in entries)


def expected_calls(path: Path) -> Iterator[Call]:
    """The signature runs each record asks for, with the outputs TensorFlow recorded in the
    record's response."""
    for record in read_records(path):
        entry = PredictionLog.FromString(record)
        kind = entry.WhichOneof("log_type")
        if kind == "predict_log":
            request, response = entry.predict_log.request, entry.predict_log.response
            outputs = {alias: to_ndarray(t) for alias, t in response.outputs.items()}
            yield request.model_spec.signature_name or "serving_default", outputs
        elif kind == "classify_log":
            log = entry.classify_log
            yield log.request.model_spec.signature_name, _scores(log.response.result)
        elif kind == "regress_log":
            log = entry.regress_log
            yield log.request.model_spec.signature_name, _values(log.response.result)
        elif kind == "multi_inference_log":
            log = entry.multi_inference_log
            for task, result in zip(log.request.tasks, log.response.results, strict=True):
                if result.WhichOneof("result") == "classification_result":
                    yield task.model_spec.signature_name, _scores(result.classification_result)
                else:
                    yield task.model_spec.signature_name, _values(result.regression_result)


def _scores(result: Any) -> dict[str, np.ndarray]:
    rows = [[c.score for c in item.classes] for item in result.classifications]
    return {"scores": np.array(rows, np.float32)}


def _values(result: Any) -> dict[str, np.ndarray]:
    return {"outputs": np.array([[r.value] for r in result.regressions], np.float32)}


def assert_calls(got: list[Call], want: list[Call]) -> None:
    assert [key for key, _ in got] == [key for key, _ in want]
    for (_, outputs), (_, expected) in zip(got, want, strict=True):
        assert sorted(outputs) == sorted(expected)
        for alias, value in expected.items():
            np.testing.assert_allclose(outputs[alias], value, rtol=1e-6)


# -- replay ---------------------------------------------------------------------------------


def test_no_warmup_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    version_dir = make_version(tmp_path, None)
    with caplog.at_level(logging.INFO, logger="graphserve"):
        count, model = warm(version_dir)
    assert count == 0
    assert model.calls == []
    assert f"No warmup data file found at {warmup_file(version_dir)}" in caplog.messages


def test_replays_predict_records(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    version_dir = make_version(tmp_path, WARMUP / "predict.tfrecord")
    with caplog.at_level(logging.INFO, logger="graphserve"):
        count, model = warm(version_dir)
    # Six records read; the one without a log type is skipped; the one naming another model
    # and version still runs against this one.
    assert count == 6
    want = list(expected_calls(WARMUP / "predict.tfrecord"))
    assert len(want) == 5
    assert_calls(model.calls, want)
    path = warmup_file(version_dir)
    assert caplog.messages[0].startswith(
        f"Starting to read warmup data for model at {path} with model-warmup-options "
    )
    assert caplog.messages[-1].startswith(
        f"Finished reading warmup data for model at {path}. Number of warmup records read: 6. "
        "Elapsed time (microseconds): "
    )


def test_output_filter_is_kept(tmp_path: Path) -> None:
    _, model = warm(make_version(tmp_path, WARMUP / "predict.tfrecord"))
    entries = [PredictionLog.FromString(r) for r in read_records(WARMUP / "predict.tfrecord")]
    assert list(entries[2].predict_log.request.output_filter) == ["y"]
    assert sorted(model.calls[2][1]) == ["y"]


def test_iterations(tmp_path: Path) -> None:
    count, model = warm(make_version(tmp_path, WARMUP / "predict.tfrecord"), iterations=3)
    assert count == 6
    want = list(expected_calls(WARMUP / "predict.tfrecord"))
    assert_calls(model.calls, [call for call in want for _ in range(3)])


def test_replays_classify_regress_and_multi_inference(tmp_path: Path) -> None:
    count, model = warm(make_version(tmp_path, WARMUP / "examples.tfrecord"))
    assert count == 3
    want = list(expected_calls(WARMUP / "examples.tfrecord"))
    assert [key for key, _ in want] == [
        "classify_x_to_y",
        "regress_x_to_y",
        "classify_x_to_y",
        "regress_x_to_y2",
    ]
    assert_calls(model.calls, want)


def test_failing_request_fails_warmup(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"Signature input alias: x\(feed name"):
        warm(make_version(tmp_path, WARMUP / "bad_input.tfrecord"))


def predict_entry(signature: str = "", x: float = 1.0) -> PredictionLog:
    entry = PredictionLog()
    request = entry.predict_log.request
    request.model_spec.name = "half_plus_two"
    request.model_spec.signature_name = signature
    request.inputs["x"].CopyFrom(make_tensor_proto(np.array([[x]], np.float32)))
    return entry


def test_later_failure_stops_warmup(tmp_path: Path) -> None:
    data = records(predict_entry(x=1.0), predict_entry("missing"), predict_entry(x=2.0))
    version_dir = make_version(tmp_path, data)
    with pytest.raises(FailedPreconditionError, match='Serving signature key "missing" not found'):
        warm(version_dir)
    # The same records, cut after the first: what ran before the failure.
    count, model = warm(make_version(tmp_path / "first", records(predict_entry(x=1.0))))
    assert count == 1
    np.testing.assert_allclose(model.calls[0][1]["y"], [[2.5]])
    assert len(model.calls) == 1


def test_record_limit(tmp_path: Path) -> None:
    # Records with no log type are read and counted without running anything.
    empty = encode_record(b"")
    assert warm(make_version(tmp_path / "a", empty * 1000))[0] == 1000
    version_dir = make_version(tmp_path / "b", empty * 1001)
    with pytest.raises(InvalidArgumentError) as err:
        warm(version_dir)
    assert err.value.message == (
        f"Number of warmup records exceeds the maximum (1000) at {warmup_file(version_dir)}"
    )


@pytest.mark.parametrize(("kind", "number"), [("session_run_log", 5), ("predict_streamed_log", 7)])
def test_unsupported_log_types(tmp_path: Path, kind: str, number: int) -> None:
    entry = PredictionLog()
    getattr(entry, kind).SetInParent()
    with pytest.raises(UnimplementedError, match=f"^Unsupported log_type for warmup: {number} "):
        warm(make_version(tmp_path, records(predict_entry(), entry)))


def test_unparsable_record(tmp_path: Path) -> None:
    version_dir = make_version(tmp_path, encode_record(b"\xff\x01garbage"))
    with pytest.raises(InvalidArgumentError) as err:
        warm(version_dir)
    assert err.value.message.startswith("Failed to parse warmup record: ")
    assert err.value.message.endswith(f" from {warmup_file(version_dir)}")


def test_corrupted_file(tmp_path: Path) -> None:
    data = bytearray(records(predict_entry(), predict_entry()))
    data[-1] ^= 0x10
    with pytest.raises(DataLossError) as err:
        warm(make_version(tmp_path, bytes(data)))
    assert "corrupted record (data checksum mismatch)" in err.value.message
    assert err.value.message.endswith(". Please verify your warmup data is in TFRecord format.")


def test_truncated_file(tmp_path: Path) -> None:
    data = records(predict_entry())[:-3]
    with pytest.raises(DataLossError, match=r"^truncated record .*TFRecord format\.$"):
        warm(make_version(tmp_path, data))


CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"


def multi_entry(*tasks: tuple[str, str, str]) -> PredictionLog:
    entry = PredictionLog()
    request = entry.multi_inference_log.request
    for name, signature, method in tasks:
        task = request.tasks.add(method_name=method)
        task.model_spec.name = name
        task.model_spec.signature_name = signature
    examples = next(
        PredictionLog.FromString(r) for r in read_records(WARMUP / "examples.tfrecord")
    ).classify_log.request.input
    request.input.CopyFrom(examples)
    return entry


@pytest.mark.parametrize(
    ("tasks", "error", "message"),
    [
        (
            [("", "classify_x_to_y", CLASSIFY)],
            InvalidArgumentError,
            "Found ModelSpec with an empty model name.",
        ),
        (
            [("m", "classify_x_to_y", CLASSIFY), ("n", "regress_x_to_y", REGRESS)],
            InvalidArgumentError,
            "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
        ),
        (
            [("m", "regress_x_to_y", REGRESS), ("m", "regress_x_to_y", REGRESS)],
            InvalidArgumentError,
            "Duplicate evaluation of signature: regress_x_to_y",
        ),
        (
            [("m", "nope", REGRESS)],
            InvalidArgumentError,
            "Requested signature not found in model graph: nope",
        ),
        (  # no signature name: serving_default, a predict signature
            [("m", "", REGRESS)],
            InvalidArgumentError,
            "No regression inputs found in SignatureDef: ",
        ),
        (
            [("m", "regress_x_to_y", "tensorflow/serving/predict")],
            UnimplementedError,
            "Unsupported signature method_name: tensorflow/serving/predict",
        ),
    ],
)
def test_multi_inference_checks(
    tmp_path: Path, tasks: list[tuple[str, str, str]], error: type[OpError], message: str
) -> None:
    version_dir = make_version(tmp_path, records(multi_entry(*tasks)))
    with pytest.raises(error) as err:
        warm(version_dir)
    assert err.value.message.startswith(message)


def test_multi_inference_runs_no_task_before_checking_all(tmp_path: Path) -> None:
    entry = multi_entry(("m", "classify_x_to_y", CLASSIFY), ("m", "missing", REGRESS))
    version_dir = make_version(tmp_path, records(entry))
    model = Recorder(load_saved_model(version_dir))
    try:
        with pytest.raises(InvalidArgumentError, match="not found in model graph: missing"):
            run_warmup(model, version_dir, model_name="m", version=1)  # type: ignore[arg-type]
    finally:
        model.close()
    assert model.calls == []


def test_empty_example_input_fails(tmp_path: Path) -> None:
    entry = PredictionLog()
    entry.regress_log.request.model_spec.signature_name = "regress_x_to_y"
    with pytest.raises(InvalidArgumentError, match="^Input is empty.$"):
        warm(make_version(tmp_path, records(entry)))


def test_warmup_written_by_our_writer(tmp_path: Path) -> None:
    version_dir = make_version(tmp_path, None)
    target = warmup_file(version_dir)
    target.parent.mkdir()
    write_records(target, [predict_entry(x=4.0).SerializeToString()])
    count, model = warm(version_dir)
    assert count == 1
    np.testing.assert_allclose(model.calls[0][1]["y"], [[4.0]])


# -- the single-servable manager ------------------------------------------------------------


@pytest.fixture(scope="module")
def half_plus_two() -> Iterator[LoadedModel]:
    model = load_saved_model(HALF_PLUS_TWO / "00000123")
    yield model
    model.close()


def test_single_servable_resolves_latest_and_its_version(half_plus_two: LoadedModel) -> None:
    manager = SingleServableManager(ServableId("m", 7), half_plus_two)
    for request in (ServableRequest("m"), ServableRequest("m", 7)):
        with manager.handle(request) as handle:
            assert handle.id == ServableId("m", 7)
            assert handle.servable is half_plus_two
    assert manager.model_names() == ["m"]
    assert [(s.id, s.state) for s in manager.version_states("m")] == [
        (ServableId("m", 7), ManagerState.LOADING)
    ]
    assert manager.version_states("other") == []


def test_single_servable_refuses_everything_else(half_plus_two: LoadedModel) -> None:
    manager = SingleServableManager(ServableId("m", 7), half_plus_two)
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Specific\(m, 8\)$"):
        manager.handle(ServableRequest("m", 8))
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(n\)$"):
        manager.handle(ServableRequest("n"))
    with pytest.raises(InvalidArgumentError, match="^Unrecognized servable version label: x$"):
        manager.handle(ServableRequest("m", label="x"))


def test_warmup_stops_at_shutdown(tmp_path: Path) -> None:
    version_dir = make_version(tmp_path, WARMUP / "predict.tfrecord")
    stop = threading.Event()
    model = Recorder(load_saved_model(version_dir))
    run = model.run

    def run_then_shut_down(*args: Any) -> dict[str, np.ndarray]:
        outputs = run(*args)
        if len(model.calls) == 2:
            stop.set()  # SIGTERM arrives while the second request runs
        return outputs

    model.run = run_then_shut_down  # type: ignore[method-assign]
    try:
        with pytest.raises(CancelledError, match="^Warmup of half_plus_two version 123 stopped"):
            run_warmup(
                model,  # type: ignore[arg-type]
                version_dir, model_name="half_plus_two", version=123, stop=stop,
            )
    finally:
        model.close()
    assert len(model.calls) == 2
