"""The workers' weight store: two loads of one version end up reading one file, with the
outputs TensorFlow recorded; an entry nobody serves from is removed; bytes that differ from the
stored ones stay private."""

from __future__ import annotations

import gc
import json
import mmap
from pathlib import Path

import numpy as np
import pytest

from runtime.saved_model import LoadedModel, load_saved_model
from serving.workers.weight_store import WeightStore, large_constants
from tests.serving.support import FIXTURE_MODELS, expected_cases

CNN_BN = FIXTURE_MODELS / "cnn_bn"


def _mapped_file(array: np.ndarray) -> mmap.mmap | None:
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def _check_outputs(model: LoadedModel) -> None:
    for (signature, _), case in expected_cases(CNN_BN).items():
        outputs = model.run(signature, case["in"])
        for alias, expected in case["out"].items():
            np.testing.assert_allclose(outputs[alias], expected, rtol=1e-5, atol=1e-5)


def test_two_loads_of_a_version_read_one_copy(tmp_path: Path) -> None:
    store = WeightStore(tmp_path, min_bytes=1)
    first = load_saved_model(CNN_BN / "1")
    second = load_saved_model(CNN_BN / "1")
    shared = [store.share(first), store.share(second)]
    assert shared[0] == shared[1] and shared[0].constants > 0 and shared[0].private == 0
    assert len(list(tmp_path.glob("*.weights"))) == 1
    for one, two in zip(large_constants(first, 1), large_constants(second, 1), strict=True):
        for _, value in (one, two):
            assert _mapped_file(value) is not None and not value.flags.writeable
        np.testing.assert_array_equal(one[1], two[1])
    # The variables the graph still reads are the same views.
    _check_outputs(first)
    _check_outputs(second)


def test_an_entry_nobody_serves_from_is_collected(tmp_path: Path) -> None:
    store = WeightStore(tmp_path, min_bytes=1)
    model = load_saved_model(CNN_BN / "1")
    store.share(model)
    (old,) = tmp_path.glob("*.weights")
    other = load_saved_model(FIXTURE_MODELS / "mlp" / "1")
    store.share(other)  # the first is still served: kept
    assert old.exists() and len(list(tmp_path.glob("*.weights"))) == 2
    del model
    gc.collect()  # the version is gone: its shared lock with it
    store.share(load_saved_model(FIXTURE_MODELS / "tf212_keras2_mlp" / "1"))
    assert not old.exists() and not old.with_suffix(".json").exists()


def test_bytes_that_differ_stay_private(tmp_path: Path) -> None:
    store = WeightStore(tmp_path, min_bytes=1)
    store.share(load_saved_model(CNN_BN / "1"))
    (data,) = tmp_path.glob("*.weights")
    entries = json.loads(data.with_suffix(".json").read_text())
    victim = entries[0]
    with open(data, "r+b") as out:
        out.seek(victim["offset"])
        out.write(b"\xff" * 4)
    model = load_saved_model(CNN_BN / "1")
    shared = store.share(model)
    assert shared.private == 1 and shared.constants == len(entries) - 1
    value = next(v for n, v in large_constants(model, 1) if n.name == victim["node"])
    assert _mapped_file(value) is None
    _check_outputs(model)


def test_small_constants_are_left_alone(tmp_path: Path) -> None:
    store = WeightStore(tmp_path)  # the default threshold: none of this model's qualify
    shared = store.share(load_saved_model(CNN_BN / "1"))
    assert (shared.constants, shared.bytes) == (0, 0)
    assert not list(tmp_path.glob("*.weights"))


@pytest.mark.parametrize("model", ["cnn_bn", "tf215_dnn_classifier"])
def test_variables_folding_replaced_are_dropped(model: str) -> None:
    loaded = load_saved_model(FIXTURE_MODELS / model / "1")
    graph_variables = {
        (n.attrs.get("container", ""), n.attrs.get("shared_name") or n.name)
        for n in loaded.session.graph if n.op in ("VarHandleOp", "VariableV2")
    }
    kept = {(v.container, v.name) for v in loaded.session.resources.variables()}
    assert kept == graph_variables
