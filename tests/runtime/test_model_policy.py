"""The model policy: which ops a served graph may not run (pure decisions over graphs) and the
load error that names every node it refuses, whether or not a kernel exists for it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protos.tensorflow.core.protobuf import saved_model_pb2
from runtime.dtypes import DataType
from runtime.errors import Code, PermissionDeniedError
from runtime.graph import Graph, Node, TensorRef
from runtime.kernels import KERNELS, load_all_kernels
from runtime.model_policy import (
    PATH_INPUTS,
    REFUSED_OPS,
    REFUSED_WITH_ATTR,
    Concern,
    PathRead,
    RefusedNode,
    constant_path_reads,
    policy_message,
    refusal,
    refused_nodes,
)
from runtime.readable_files import FileUse
from runtime.saved_model import load_saved_model
from tests.runtime.model_fixtures import FIXTURE_MODELS

MLP = FIXTURE_MODELS / "mlp" / "1"
STACKED_LSTM = FIXTURE_MODELS / "stacked_lstm" / "1"
TF1_VOCAB = FIXTURE_MODELS / "tf1_vocab_lookup" / "1"


# -- the lists ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "concern"),
    [
        ("PyFunc", Concern.RUNS_CODE),
        ("PyFuncStateless", Concern.RUNS_CODE),
        ("EagerPyFunc", Concern.RUNS_CODE),
        ("WriteFile", Concern.WRITES),
        ("SaveV2", Concern.WRITES),
        ("MergeV2Checkpoints", Concern.WRITES),
        ("CreateSummaryFileWriter", Concern.WRITES),
        ("WriteSummary", Concern.WRITES),
        ("ImportEvent", Concern.WRITES),
        ("ReadFile", Concern.READS_FILES),
        ("MatchingFiles", Concern.READS_FILES),
        ("WholeFileReaderV2", Concern.READS_FILES),
        ("TextLineReaderV2", Concern.READS_FILES),
        ("ReaderReadV2", Concern.READS_FILES),
        ("ImmutableConst", Concern.READS_FILES),
        ("TFRecordDataset", Concern.READS_FILES),
        ("TextLineDataset", Concern.READS_FILES),
        ("LoadAndRemapMatrix", Concern.READS_FILES),
        ("RpcClient", Concern.REACHES_OUT),
        ("DataServiceDatasetV4", Concern.REACHES_OUT),
    ],
)
def test_refused_whatever_the_attrs(op: str, concern: Concern) -> None:
    assert refusal(op, {}) is concern
    assert refusal(op, {"T": DataType.DT_FLOAT}) is concern


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("Print", {"message": "x"}),
        ("PrintV2", {}),
        ("PrintV2", {"output_stream": "stderr"}),
        ("PrintV2", {"output_stream": "log(warning)"}),
        ("Assert", {"summarize": 3}),
        ("StringFormat", {"template": "%s"}),
        ("ScalarSummary", {}),
        ("TensorSummaryV2", {}),
        ("DebugIdentity", {"debug_urls": []}),
        ("DebugIdentityV2", {}),
        ("DecodeProtoV2", {"descriptor_source": "local://"}),
        ("EncodeProto", {}),
        ("Copy", {"debug_ops_spec": []}),
        ("MatMul", {}),
        # Read files, but only where the run-time check allows.
        ("InitializeTableFromTextFileV2", {}),
        ("RestoreV2", {}),
    ],
)
def test_harmless_in_serving(op: str, attrs: dict[str, Any]) -> None:
    assert refusal(op, attrs) is None


@pytest.mark.parametrize(
    ("op", "attrs", "concern"),
    [
        ("PrintV2", {"output_stream": "file:///tmp/out.txt"}, Concern.WRITES),
        ("DebugIdentity", {"debug_urls": ["file:///tmp/dump"]}, Concern.WRITES),
        ("DebugIdentityV3", {"debug_urls": ["grpc://localhost:6064"]}, Concern.WRITES),
        ("DebugNanCount", {"debug_urls": ["file:///tmp/dump"]}, Concern.WRITES),
        ("CopyHost", {"debug_ops_spec": ["DebugIdentity;file:///tmp;0"]}, Concern.WRITES),
        ("DecodeProtoV2", {"descriptor_source": "/etc/descriptors.bin"}, Concern.READS_FILES),
        ("EncodeProto", {"descriptor_source": "bytes://..."}, Concern.READS_FILES),
    ],
)
def test_refused_for_some_attrs(op: str, attrs: dict[str, Any], concern: Concern) -> None:
    assert refusal(op, attrs) is concern


def test_the_lists_do_not_overlap() -> None:
    assert not set(REFUSED_OPS) & set(REFUSED_WITH_ATTR)
    assert not set(REFUSED_OPS) & set(PATH_INPUTS)
    assert not set(REFUSED_WITH_ATTR) & set(PATH_INPUTS)


# -- graphs ------------------------------------------------------------------------------------


def _node(name: str, op: str, *inputs: str, **attrs: Any) -> Node:
    return Node(name, op, [TensorRef.parse(i) for i in inputs], [], dict(attrs))


def _string(value: str) -> np.ndarray:
    return np.array(value.encode(), dtype=object)


def _path_graph(path_producer: Node) -> Graph:
    return Graph([
        path_producer,
        _node("alias", "Identity", path_producer.name, T=DataType.DT_STRING),
        _node("table", "HashTableV2", key_dtype=DataType.DT_STRING, value_dtype=DataType.DT_INT64),
        _node("init", "InitializeTableFromTextFileV2", "table", "alias", key_index=-2,
              value_index=-1),
    ])


def test_a_constant_path_is_found_through_identities() -> None:
    graph = _path_graph(_node("path", "Const", value=_string("/etc/passwd"),
                              dtype=DataType.DT_STRING))
    assert constant_path_reads(graph) == [
        PathRead("init", "InitializeTableFromTextFileV2", "/etc/passwd", FileUse.ASSET)
    ]


def test_a_fed_constant_or_a_placeholder_is_no_constant_path() -> None:
    const = _node("path", "Const", value=_string("/build/vocab.txt"), dtype=DataType.DT_STRING)
    assert constant_path_reads(_path_graph(const), {TensorRef("path")}) == []
    assert constant_path_reads(_path_graph(const), {TensorRef("alias")}) == []
    placeholder = _node("path", "Placeholder", dtype=DataType.DT_STRING)
    assert constant_path_reads(_path_graph(placeholder)) == []


def test_refused_nodes_of_a_graph() -> None:
    graph = Graph([
        _node("name", "Placeholder", dtype=DataType.DT_STRING),
        _node("read", "ReadFile", "name"),
        _node("py", "PyFunc", "read"),
        _node("py2", "PyFunc", "read"),
        _node("show", "PrintV2", "read", output_stream="stderr"),
        _node("dump", "PrintV2", "read", output_stream="file:///tmp/x"),
    ])
    assert refused_nodes(graph) == [
        RefusedNode("read", "ReadFile", Concern.READS_FILES),
        RefusedNode("py", "PyFunc", Concern.RUNS_CODE),
        RefusedNode("py2", "PyFunc", Concern.RUNS_CODE),
        RefusedNode("dump", "PrintV2", Concern.WRITES),
    ]


def test_the_message_names_every_node_and_path() -> None:
    refused = [RefusedNode(f"f/py{i}", "PyFunc", Concern.RUNS_CODE) for i in range(5)]
    refused.append(RefusedNode("w", "WriteFile", Concern.WRITES))
    reads = [PathRead("init", "InitializeTableFromTextFileV2", "/etc/passwd", FileUse.ASSET)]
    assert policy_message(refused, reads, "/models/m/1") == (
        "Refused by the model policy: the model at /models/m/1 may not be served: it uses 2 op "
        "types a served model may not run: PyFunc (runs code the model brings along; 5 nodes: "
        "'f/py0', 'f/py1', 'f/py2', 'f/py3', 'f/py4'); WriteFile (writes files or state outside "
        "the server; 1 node: 'w'); and it reads files outside its version directory: "
        "InitializeTableFromTextFileV2 node 'init' reads '/etc/passwd' (a model reads data files "
        "only from its version directory's assets/ or assets.extra/)"
    )


# -- loading -----------------------------------------------------------------------------------


def _copy_and_edit(source: Path, target: Path, edit: Callable[[Any], None]) -> Path:
    shutil.copytree(source, target)
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((target / "saved_model.pb").read_bytes())
    edit(proto.meta_graphs[0])
    (target / "saved_model.pb").write_bytes(proto.SerializeToString())
    return target


def _refusal_message(export_dir: Path) -> str:
    with pytest.raises(PermissionDeniedError) as info:
        load_saved_model(export_dir)
    assert info.value.code == Code.PERMISSION_DENIED
    return info.value.message


@pytest.mark.parametrize(
    ("model", "op", "node"),
    [
        ("pyfunc_model", "EagerPyFunc", "StatefulPartitionedCall/StatefulPartitionedCall/EagerPyFunc"),
        ("read_file_model", "ReadFile", "PartitionedCall/PartitionedCall/ReadFile"),
    ],
)
def test_fixture_models_meant_to_be_refused_are(model: str, op: str, node: str) -> None:
    message = _refusal_message(FIXTURE_MODELS / model / "1")
    assert message.startswith(
        f"Refused by the model policy: the model at {FIXTURE_MODELS / model / '1'} may not be "
        "served: it uses 1 op type a served model may not run: "
    )
    assert f"{op} (" in message and f"'{node}'" in message


def test_every_refused_node_is_named_with_the_function_it_is_in(tmp_path: Path) -> None:
    # stacked_lstm with the Sigmoid of its While bodies (functions run, not inlined) made
    # EagerPyFunc: three in each of the two bodies.
    def edit(meta_graph: Any) -> None:
        for function in meta_graph.graph_def.library.function:
            for node in function.node_def:
                if node.op == "Sigmoid":
                    node.op = "EagerPyFunc"

    export_dir = _copy_and_edit(STACKED_LSTM, tmp_path / "1", edit)
    message = _refusal_message(export_dir)
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    in_bodies = sorted(
        f"{function.signature.name}/{node.name}"
        for function in proto.meta_graphs[0].graph_def.library.function
        if "while_body" in function.signature.name
        for node in function.node_def
        if node.op == "EagerPyFunc"
    )
    assert len(in_bodies) == 6
    quoted = ", ".join(f"'{name}'" for name in in_bodies)
    assert f"EagerPyFunc (runs code the model brings along; 6 nodes: {quoted})" in message


def test_an_inlined_node_is_named_by_its_call_path(tmp_path: Path) -> None:
    def edit(meta_graph: Any) -> None:
        for function in meta_graph.graph_def.library.function:
            for node in function.node_def:
                if node.op == "Softmax":
                    node.op = "WriteFile"

    # Two signatures call the model, so two inlined copies of its Softmax.
    message = _refusal_message(_copy_and_edit(MLP, tmp_path / "1", edit))
    assert message.endswith(
        "WriteFile (writes files or state outside the server; 2 nodes: "
        "'StatefulPartitionedCall/StatefulPartitionedCall/mlp_1/dense_1_2/Softmax', "
        "'StatefulPartitionedCall_1/StatefulPartitionedCall/mlp_1/dense_1_2/Softmax')"
    )


def test_refused_even_when_a_kernel_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ReadFile kernel, as someone might add one: the policy still keeps it out.
    load_all_kernels()
    monkeypatch.setitem(KERNELS._factories, ("ReadFile", "CPU"), lambda node: lambda name: name)
    assert KERNELS.has("ReadFile")
    message = _refusal_message(FIXTURE_MODELS / "read_file_model" / "1")
    assert "ReadFile (reads arbitrary files or lists directories; 1 node: " in message


def test_refused_ops_are_checked_before_missing_kernels(tmp_path: Path) -> None:
    def edit(meta_graph: Any) -> None:
        for function in meta_graph.graph_def.library.function:
            for node in function.node_def:
                if node.op == "Relu":
                    node.op = "FancyRelu"  # no kernel
                elif node.op == "Softmax":
                    node.op = "PyFuncStateless"

    message = _refusal_message(_copy_and_edit(MLP, tmp_path / "1", edit))
    assert "PyFuncStateless (runs code" in message


def test_a_constant_path_outside_the_version_is_refused_at_load(tmp_path: Path) -> None:
    # tf1_vocab_lookup's table files are constants the loader feeds with asset paths; without
    # the asset collection they are fixed paths of the machine that exported the model.
    def edit(meta_graph: Any) -> None:
        del meta_graph.collection_def["saved_model_assets"]

    export_dir = _copy_and_edit(TF1_VOCAB, tmp_path / "1", edit)
    message = _refusal_message(export_dir)
    assert "it reads files outside its version directory: " in message
    assert "InitializeTableFromTextFileV2 node 'text_file_init/InitializeTableFromTextFileV2' " in (
        message
    )
    assert message.count("InitializeTableFromTextFileV2 node ") == 2
    assert "vocab.txt' (a model reads data files only from its version directory's" in message


def test_a_constant_path_inside_the_assets_loads(tmp_path: Path) -> None:
    export_dir = tmp_path / "1"

    def edit(meta_graph: Any) -> None:
        del meta_graph.collection_def["saved_model_assets"]
        for node in meta_graph.graph_def.node:
            if node.name in ("asset_path", "asset_path_1"):
                name = node.attr["value"].tensor.string_val[0].rsplit(b"/", 1)[1]
                node.attr["value"].tensor.string_val[0] = str(
                    export_dir / "assets" / name.decode()
                ).encode()

    model = load_saved_model(_copy_and_edit(TF1_VOCAB, export_dir, edit))
    assert model.signatures
