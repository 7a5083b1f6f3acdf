"""``graphserve inspect``: signatures as saved_model_cli shows them, plus the op-support check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from protos.tensorflow.core.protobuf import saved_model_pb2
from runtime.inspect import main
from runtime.saved_model import load_graph, read_saved_model
from tests.runtime.model_fixtures import EXAMPLE_MODELS, FIXTURE_MODELS

# Every version directory of every fixture and example model: each must inspect as supported.
ALL_EXPORTS = sorted(
    version
    for base in (FIXTURE_MODELS, EXAMPLE_MODELS)
    for model in base.iterdir()
    if model.is_dir()
    for version in model.iterdir()
    if version.name.isdigit() and (version / "saved_model.pb").exists()
)


def _reported_ops(out: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith("Ops reachable"))
    return line.split(": ", 1)[1].split(", ")


def test_shows_signatures_and_support(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(EXAMPLE_MODELS / "half_plus_two" / "00000123")]) == 0
    out = capsys.readouterr().out
    assert "MetaGraphDef with tag-set: 'serve'" in out
    assert "signature_def['serving_default']:" in out
    assert "inputs['x'] tensor_info:" in out and "dtype: DT_FLOAT" in out
    assert "shape: (-1, 1)" in out
    assert "Method name is: tensorflow/serving/predict" in out
    assert "Every reachable op is supported." in out


def test_names_unsupported_ops_and_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # tf1_cnn with its Relu6 renamed to an op type nothing implements.
    export_dir = tmp_path / "1"
    shutil.copytree(FIXTURE_MODELS / "tf1_cnn" / "1", export_dir)
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    for node in proto.meta_graphs[0].graph_def.node:
        if node.op == "Relu6":
            node.op = "FancyRelu6"
    (export_dir / "saved_model.pb").write_bytes(proto.SerializeToString())
    assert main([str(export_dir), "--signature_def", "serving_default"]) == 1
    out = capsys.readouterr().out
    assert "Unsupported ops (no kernel):" in out and "FancyRelu6" in out


def test_missing_directory_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main([str(tmp_path)]) == 2
    assert "SavedModel file does not exist" in capsys.readouterr().err


def test_lists_the_ops_inside_function_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    export_dir = FIXTURE_MODELS / "stacked_lstm" / "1"
    meta_graph = read_saved_model(str(export_dir)).meta_graphs[0]
    top_level = {node.op for node in load_graph(meta_graph, export_dir)}
    # The LSTM step runs in the While body: these ops are nowhere else.
    body_only = {"Sigmoid", "Split", "TensorListGetItem", "TensorListSetItem"}
    assert "While" in top_level and not body_only & top_level
    assert main([str(export_dir)]) == 0
    ops = _reported_ops(capsys.readouterr().out)
    assert body_only <= set(ops) and "While" in ops
    assert not any(op.startswith("__inference") for op in ops)  # function names are no ops


def test_names_unsupported_ops_inside_function_bodies(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # stacked_lstm with the Sigmoid of its While bodies renamed to an op type nothing implements.
    export_dir = tmp_path / "1"
    shutil.copytree(FIXTURE_MODELS / "stacked_lstm" / "1", export_dir)
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    renamed = 0
    for function in proto.meta_graphs[0].graph_def.library.function:
        for node in function.node_def:
            if node.op == "Sigmoid":
                node.op = "FancySigmoid"
                renamed += 1
    assert renamed
    (export_dir / "saved_model.pb").write_bytes(proto.SerializeToString())
    assert main([str(export_dir)]) == 1
    out = capsys.readouterr().out
    assert "FancySigmoid" in _reported_ops(out)
    assert "Unsupported ops (no kernel):" in out and "  FancySigmoid: " in out


def test_covers_every_fixture_model() -> None:
    names = {path.parent.name for path in ALL_EXPORTS}
    assert {"stacked_lstm", "tf1_control", "vocab_asset", "half_plus_two"} <= names
    assert names == {
        model.name for base in (FIXTURE_MODELS, EXAMPLE_MODELS) for model in base.iterdir()
        if model.is_dir()
    }


def _refused_ops(export_dir: Path) -> list[str]:
    """The op types the fixture declares our model policy refuses (info.json ``refused_ops``)."""
    info = export_dir.parent / "info.json"
    refused: list[str] = json.loads(info.read_text()).get("refused_ops", []) if info.exists() else []
    return refused


@pytest.mark.parametrize(
    "export_dir", ALL_EXPORTS, ids=[f"{p.parent.name}/{p.name}" for p in ALL_EXPORTS]
)
def test_every_fixture_model_is_fully_supported(
    export_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main([str(export_dir)])
    out = capsys.readouterr().out
    assert "Unsupported ops" not in out, out
    refused = _refused_ops(export_dir)
    if refused:
        # Meant to be refused: named as the policy's, and not as missing kernels.
        assert status == 1
        assert "Refused by the model policy:" in out
        for op in refused:
            assert f"\n  {op}: '" in out
        return
    assert "Refused by the model policy" not in out
    assert status == 0
    assert "Every reachable op is supported." in out
