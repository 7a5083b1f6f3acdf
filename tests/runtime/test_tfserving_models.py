"""TensorFlow Serving's own test models (tests/fixtures/tfserving) load with the runtime and give
half_plus_two's numbers: y = 0.5x + 2, y2 = 0.5x + 3, y3 = 0.5x2 + 3, half_plus_three
y = 0.5x + 3, and the counter counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from runtime.checkpoint import BundleReader, Table
from runtime.checkpoint.sstable import SNAPPY_COMPRESSION
from runtime.dtypes import DataType
from runtime.saved_model import LoadedModel, load_saved_model

TFSERVING = Path(__file__).resolve().parents[1] / "fixtures" / "tfserving"
HALF_PLUS_TWO = {
    "tf1": TFSERVING / "saved_model_half_plus_two_cpu" / "00000123",
    "tf2": TFSERVING / "saved_model_half_plus_two_tf2_cpu" / "00000123",
    "v123": TFSERVING / "saved_model_half_plus_two_2_versions" / "00000123",
    "v124": TFSERVING / "saved_model_half_plus_two_2_versions" / "00000124",
}
HALF_PLUS_THREE = TFSERVING / "saved_model_half_plus_three" / "00000123"
COUNTER = TFSERVING / "saved_model_counter" / "00000123"


def examples(**features: list[float]) -> np.ndarray:
    """Serialized tf.Examples, one per position of the given float feature lists."""
    count = len(next(iter(features.values())))
    out = []
    for i in range(count):
        example = example_pb2.Example()
        for name, values in features.items():
            example.features.feature[name].float_list.value.append(values[i])
        out.append(example.SerializeToString())
    return np.array(out, dtype=object)


@pytest.fixture(scope="module", params=sorted(HALF_PLUS_TWO))
def half_plus_two(request: pytest.FixtureRequest) -> Iterator[LoadedModel]:
    model = load_saved_model(HALF_PLUS_TWO[request.param])
    yield model
    model.close()


def test_the_tf1_14_and_tf2_checkpoints_have_snappy_compressed_indexes() -> None:
    """What used to stop these models loading: their index blocks are snappy-compressed."""
    for key in ("tf1", "tf2"):
        prefix = HALF_PLUS_TWO[key] / "variables" / "variables"
        table = Table.open(f"{prefix}.index")
        handle = table._index_handles[0]
        assert table._data[handle.offset + handle.size] == SNAPPY_COMPRESSION, key
        with BundleReader(prefix) as reader:
            names = reader.keys()
            values = {name.split("/")[0]: float(reader.read(name)) for name in names
                      if reader.dtype_and_shape(name) == (DataType.DT_FLOAT, ())}
        assert {"a": 0.5, "b": 2.0, "c": 3.0}.items() <= values.items(), (key, values)


def test_predict(half_plus_two: LoadedModel) -> None:
    # The TF2 signature declares x as [1]; like TensorFlow Serving, shapes are not enforced.
    x = np.array([[1.0], [2.0], [5.0]], dtype=np.float32)
    if half_plus_two.signatures["serving_default"].inputs["x"].shape == (1,):
        x = x.reshape(-1)
    y = half_plus_two.run("serving_default", {"x": x})["y"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, 0.5 * x + 2)


def test_regress_and_classify_over_examples(half_plus_two: LoadedModel) -> None:
    serialized = examples(x=[2.0, 80.0, 20.0, -1.0])
    expected = np.array([[3.0], [42.0], [12.0], [1.5]], dtype=np.float32)
    out = half_plus_two.run("regress_x_to_y", {"inputs": serialized})["outputs"]
    np.testing.assert_array_equal(out, expected)
    out = half_plus_two.run("regress_x_to_y2", {"inputs": serialized})["outputs"]
    np.testing.assert_array_equal(out, expected + 1)
    scores = half_plus_two.run("classify_x_to_y", {"inputs": serialized})["scores"]
    np.testing.assert_array_equal(scores, expected)


def test_x2_signatures(half_plus_two: LoadedModel) -> None:
    x2 = np.array([[4.0], [0.0]], dtype=np.float32)
    if half_plus_two.signatures["regress_x2_to_y3"].inputs["inputs"].shape == (1,):
        x2 = x2[:1].reshape(-1)
    out = half_plus_two.run("regress_x2_to_y3", {"inputs": x2})["outputs"]
    np.testing.assert_array_equal(out, 0.5 * x2 + 3)
    if "classify_x2_to_y3" in half_plus_two.signatures:
        scores = half_plus_two.run("classify_x2_to_y3", {"inputs": x2})["scores"]
        np.testing.assert_array_equal(scores, 0.5 * x2 + 3)


def test_half_plus_three() -> None:
    model = load_saved_model(HALF_PLUS_THREE)
    try:
        for x in (2.0, -4.0):
            y = model.run("serving_default", {"x": np.array(x, dtype=np.float32)})["y"]
            assert y.shape == () and float(y) == 0.5 * x + 3
    finally:
        model.close()


def test_counter_keeps_state_across_calls() -> None:
    """predict_impl_test.cc's PredictionWithCustomizedSignatures sequence, then more."""
    model = load_saved_model(COUNTER)
    try:
        def call(signature: str, **inputs: float) -> float:
            feeds = {k: np.array(v, dtype=np.float32) for k, v in inputs.items()}
            out = model.run(signature, feeds)["output"]
            assert out.shape == () and out.dtype == np.float32
            return float(out)

        assert call("get_counter") == 0.0
        assert call("incr_counter") == 1.0
        assert call("reset_counter") == 0.0
        assert call("incr_counter") == 1.0
        assert call("incr_counter_by", delta=3.0) == 4.0
        assert call("get_counter") == 4.0
        assert call("incr_counter") == 5.0
    finally:
        model.close()
    # Each load restores the checkpoint: the state is per loaded version, not on disk.
    again = load_saved_model(COUNTER)
    try:
        assert float(again.run("get_counter", {})["output"]) == 0.0
    finally:
        again.close()
