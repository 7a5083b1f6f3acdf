"""Serving-graph rewrites: every pass keeps outputs unchanged, and every pass still does its job.

Each fixture model is loaded once, unoptimized; each pass of ``DEFAULT_PASSES`` is then checked by
running the model's recorded calls through graphs optimized without that pass, with only that pass,
with only freezing and that pass, and with the default pipeline up to that pass, comparing with
the unoptimized outputs and with TensorFlow's recordings. Small hand-built graphs pin down what
each pass must and must not rewrite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.dtypes import DataType, from_numpy
from runtime.errors import OpError
from runtime.graph import Graph, Node, TensorRef, fill_default_attrs
from runtime.optimize import DEFAULT_PASSES, PassContext, optimize_for_serving
from runtime.optimize.controls import drop_constant_controls
from runtime.optimize.cse import eliminate_common_subexpressions
from runtime.optimize.embedding import fuse_embedding_lookups
from runtime.optimize.fold_affine import fold_affine
from runtime.optimize.folding import fold_constants
from runtime.optimize.freeze import freeze_variables
from runtime.optimize.fusion import fuse_patterns
from runtime.optimize.identity import remove_identities
from runtime.optimize.input_affine import fold_affine_into_consumer, move_affine_past_max_pool
from runtime.optimize.layer_norm import fuse_layer_norm
from runtime.optimize.pad_into_conv import fold_pads_into_convs
from runtime.optimize.prune import prune_to_protected
from runtime.optimize.repeat import fuse_repeats
from runtime.optimize.reshape import reshape_by_template
from runtime.optimize.split_bias import move_bias_before_split
from runtime.optimize.tensordot import simplify_tensordot
from runtime.resources import ResourceManager
from runtime.saved_model import LoadedModel, load_saved_model
from runtime.session import Session
from tests.runtime.model_fixtures import RecordedCall, all_recorded_calls, assert_outputs_match

CALLS = all_recorded_calls()
MODEL_DIRS = sorted({c.export_dir for c in CALLS})
PASSES = dict(DEFAULT_PASSES)
RTOL, ATOL = 1e-5, 1e-6


def _model_id(export_dir: Path) -> str:
    return export_dir.parent.name


# --- fixture models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    model: LoadedModel  # unoptimized
    protected: frozenset[TensorRef]
    calls: tuple[RecordedCall, ...]
    reference: tuple[dict[str, np.ndarray], ...]  # the unoptimized graph's outputs, per call

    @property
    def graph(self) -> Graph:
        return self.model.session.graph

    def optimize(self, passes: Sequence[tuple[str, Any]]) -> Graph:
        return optimize_for_serving(self.graph, self.protected, self.model.session.resources,
                                    passes)


def _run(session: Session, model: LoadedModel, call: RecordedCall) -> dict[str, np.ndarray]:
    sig = model.signature(call.signature)
    aliases = sorted(sig.outputs)
    feeds = {sig.inputs[a].name: call.inputs[a] for a in sorted(sig.inputs)}
    values = session.run([sig.outputs[a].name for a in aliases], feeds)
    return dict(zip(aliases, values))


@cache
def _fixture(export_dir: Path) -> Fixture:
    model = load_saved_model(export_dir, optimize=False)
    protected = frozenset(
        TensorRef.parse(spec.name) for sig in model.signatures.values()
        for spec in (*sig.inputs.values(), *sig.outputs.values())
    )
    calls = tuple(c for c in CALLS if c.export_dir == export_dir)
    reference = tuple(_run(model.session, model, c) for c in calls)
    return Fixture(model, protected, calls, reference)


@cache
def _default_stages(export_dir: Path) -> tuple[Graph, ...]:
    """The graph after each pass of the default pipeline, in order."""
    fx = _fixture(export_dir)
    context = PassContext(fx.protected, fx.model.session.resources)
    graph, stages = fx.graph, []
    for _name, rewrite in DEFAULT_PASSES:
        graph = rewrite(graph, context)
        stages.append(graph)
    return tuple(stages)


def _optimized(export_dir: Path) -> Graph:
    return _default_stages(export_dir)[-1]


def _assert_same_outputs(fx: Fixture, graph: Graph, label: str) -> None:
    session = Session(graph, fx.model.session.resources)
    for call, reference in zip(fx.calls, fx.reference):
        where = f"{label}/{call.id}"
        ours = _run(session, fx.model, call)
        assert set(ours) == set(call.outputs), where
        for alias, want in reference.items():
            got, recorded = ours[alias], call.outputs[alias]
            assert got.dtype == want.dtype and got.shape == want.shape, f"{where}/{alias}"
            # Where the unfused graph yields NaN (0/0 on an all-padding row), TensorFlow's value
            # comes from its fused Relu, which maps NaN to 0: a pipeline gives one or the other.
            fused_only = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
            if fused_only.any():
                ok = np.isnan(got[fused_only]) | np.isclose(
                    got[fused_only], recorded[fused_only], rtol=RTOL, atol=ATOL)
                assert ok.all(), f"{where}/{alias}: NaN rows neither NaN nor TensorFlow's value"
                keep = ~fused_only
                got, want, recorded = got[keep], want[keep], recorded[keep]
            assert_outputs_match({alias: got}, {alias: recorded}, f"{where}/{alias}")
            if want.dtype == object:  # strings
                np.testing.assert_array_equal(got, want, err_msg=f"{where}/{alias}")
            else:
                np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                           err_msg=f"{where}/{alias}")


@pytest.mark.parametrize("pass_name", list(PASSES))
@pytest.mark.parametrize("export_dir", MODEL_DIRS, ids=_model_id)
def test_pass_keeps_outputs(export_dir: Path, pass_name: str) -> None:
    fx = _fixture(export_dir)
    index = [name for name, _ in DEFAULT_PASSES].index(pass_name)
    rewrite = PASSES[pass_name]
    pipelines = {
        "without": [p for p in DEFAULT_PASSES if p[0] != pass_name],
        "alone": [(pass_name, rewrite)],
        "frozen": [("freeze_variables", freeze_variables), (pass_name, rewrite)],
    }
    for label, passes in pipelines.items():
        _assert_same_outputs(fx, fx.optimize(passes), f"{pass_name}:{label}")
    _assert_same_outputs(fx, _default_stages(export_dir)[index], f"{pass_name}:default-prefix")


def _fingerprint(graph: Graph) -> list[tuple[Any, ...]]:
    return [(n.name, n.op, tuple(n.inputs), tuple(n.control_inputs),
             tuple(sorted((k, id(v)) for k, v in n.attrs.items()))) for n in graph]


@pytest.mark.parametrize("export_dir", MODEL_DIRS, ids=_model_id)
def test_passes_leave_their_input_graph_alone(export_dir: Path) -> None:
    fx = _fixture(export_dir)
    before = _fingerprint(fx.graph)
    values = {id(n.attrs["value"]): n.attrs["value"].copy() for n in fx.graph if n.op == "Const"}
    _optimized(export_dir)
    fx.optimize(DEFAULT_PASSES)
    assert _fingerprint(fx.graph) == before
    for node in fx.graph:
        if node.op == "Const" and node.attrs["value"].dtype != object:
            np.testing.assert_array_equal(node.attrs["value"], values[id(node.attrs["value"])])


# --- the optimized fixture graphs are smaller and fused --------------------------------------


def _ops(graph: Graph) -> Counter[str]:
    return Counter(n.op for n in graph)


def _dir(name: str) -> Path:
    return next(d for d in MODEL_DIRS if _model_id(d) == name)


@pytest.mark.parametrize("export_dir", MODEL_DIRS, ids=_model_id)
def test_optimized_graph_is_smaller_and_reads_no_variables(export_dir: Path) -> None:
    fx = _fixture(export_dir)
    optimized = _optimized(export_dir)
    assert len(optimized) < len(fx.graph)
    stateful = {"ReadVariableOp", "VarHandleOp", "ResourceGather", "AssignVariableOp", "RestoreV2"}
    assert not stateful & set(_ops(optimized))
    for node in optimized:
        if node.op in ("Identity", "IdentityN", "StopGradient", "Snapshot"):
            # Identities of a TF1 Switch output stay: they are branch pivots (see identity.py).
            pivot = any(optimized.nodes[r.node].op == "Switch" for r in node.inputs)
            assert node.name in {r.node for r in fx.protected} or node.control_inputs or pivot, (
                node.name
            )


def test_mlp_is_fused() -> None:
    ops = _ops(_optimized(_dir("mlp")))
    assert ops["_FusedMatMul"] == 4  # two dense layers, two signatures
    assert not {"MatMul", "BiasAdd", "Relu", "ReadVariableOp"} & set(ops)
    fused = [n for n in _optimized(_dir("mlp")) if n.op == "_FusedMatMul"]
    assert sorted(tuple(n.attrs["fused_ops"]) for n in fused) == [
        ("BiasAdd",), ("BiasAdd",), ("BiasAdd", "Relu"), ("BiasAdd", "Relu")
    ]


def test_each_pass_changes_the_models_it_should() -> None:
    names = [name for name, _ in DEFAULT_PASSES]

    def before_after(model: str, pass_name: str) -> tuple[Counter[str], Counter[str]]:
        stages = _default_stages(_dir(model))
        index = names.index(pass_name)
        before = _fixture(_dir(model)).graph if index == 0 else stages[index - 1]
        return _ops(before), _ops(stages[index])

    before, after = before_after("mlp", "prune")
    assert before["RestoreV2"] and before["AssignVariableOp"]
    assert not after["RestoreV2"] and not after["AssignVariableOp"]
    before, after = before_after("mlp", "freeze_variables")
    assert before["ReadVariableOp"] == 8 and after["ReadVariableOp"] == 0
    before, after = before_after("transformer_block", "remove_identities")
    assert before["StopGradient"] and not after["StopGradient"]
    before, after = before_after("cnn_bn", "fold_constants")
    assert before["Rsqrt"] and not after["Rsqrt"]
    before, after = before_after("separable_cnn", "cse")
    assert after["Const"] < before["Const"]
    # cnn_bn, per signature: the second batch norm folds into the convolution before it; the
    # first follows a ReLU and precedes a max pool, which it moves past and into the next
    # (unpadded) convolution, whose two biases then merge.
    before, after = before_after("cnn_bn", "fold_affine")
    assert after["Mul"] == before["Mul"] - 2 and after["BiasAdd"] == before["BiasAdd"] + 2
    before, after = before_after("cnn_bn", "move_affine_past_max_pool")
    assert after == before  # the same ops, in another order
    pools = [n for n in _default_stages(_dir("cnn_bn"))[names.index("move_affine_past_max_pool")]
             if n.op == "MaxPool"]
    assert len(pools) == 2 and all(n.name.endswith("/before_affine") for n in pools)
    before, after = before_after("cnn_bn", "fold_affine_into_consumer")
    assert after["Mul"] == before["Mul"] - 2 == 0 and after["AddV2"] == before["AddV2"] - 2 == 0
    assert after["BiasAdd"] == before["BiasAdd"] + 2
    before, after = before_after("cnn_bn", "fold_affine_again")
    assert after["BiasAdd"] == before["BiasAdd"] - 2
    before, after = before_after("cnn_bn", "fuse_patterns")
    assert not after["Conv2D"] and after["_FusedConv2D"] == 4
    before, after = before_after("separable_cnn", "fuse_patterns")
    # Per signature: the DepthwiseConv2D layer's bias fuses; SeparableConv2D's depthwise half
    # feeds its pointwise Conv2D and stays. Both transposed convolutions fuse their bias (and
    # the second its ReLU).
    assert before["DepthwiseConv2dNative"] == 4 and after["DepthwiseConv2dNative"] == 2
    assert after["_FusedDepthwiseConv2dNative"] == 2
    assert before["Conv2DBackpropInput"] == 4 and not after["Conv2DBackpropInput"]
    assert after["_FusedConv2DBackpropInput"] == 4 and not after["Relu"]
    # UpSampling2D(nearest) repeats rows, then columns: one node per signature (the rows
    # repeat it absorbed is left for pruning).
    before, after = before_after("separable_cnn", "fuse_repeats")
    assert before["Tile"] == 4 and after["_RepeatAxes"] == 4 and after["Reshape"] == 0
    optimized = _optimized(_dir("separable_cnn"))
    assert not {"Tile", "ExpandDims"} & set(_ops(optimized))
    assert [n.attrs["repeats"] for n in optimized if n.op == "_RepeatAxes"] == [(1, 2, 2, 1)] * 2
    before, after = before_after("cnn_bn", "prune_again")
    assert sum(after.values()) < sum(before.values()) and not after["VarHandleOp"]


def test_cnn_bn_batch_norm_folds_into_the_convolution() -> None:
    export_dir = _dir("cnn_bn")
    fx = _fixture(export_dir)
    optimized = _optimized(export_dir)
    convs = [n for n in optimized if n.op == "_FusedConv2D"]
    assert len(convs) == 4 and all(list(n.attrs["fused_ops"]) == ["BiasAdd", "Relu"] for n in convs)
    # Both batch norms are gone: the second into the weights before it, the first (after a
    # ReLU) past the max pool and into the weights after it.
    assert not {"Mul", "AddV2", "Add", "Sub", "BiasAdd"} & set(_ops(optimized))
    # Both signatures share the folded weights.
    assert len([n for n in optimized if n.name.endswith("/input_scaled_weights")]) == 1
    # Without the affine passes the second stays arithmetic (the first fuses after its ReLU).
    unfolded = fx.optimize([p for p in DEFAULT_PASSES if "affine" not in p[0]])
    assert _ops(unfolded)["Mul"] == 2 and _ops(unfolded)["AddV2"] == 2
    # Without the move past the max pool, the first batch norm fuses into the convolution
    # before it, after its ReLU.
    unmoved = fx.optimize([p for p in DEFAULT_PASSES if p[0] != "move_affine_past_max_pool"])
    assert not {"Mul", "AddV2"} & set(_ops(unmoved))
    post = [n for n in unmoved if n.op == "_FusedConv2D" and "Mul" in n.attrs["fused_ops"]]
    assert len(post) == 2 and all(
        list(n.attrs["fused_ops"]) == ["BiasAdd", "Relu", "Mul", "AddV2"] for n in post)
    for graph in (optimized, unmoved):
        session = Session(graph, fx.model.session.resources)
        for call in fx.calls:
            assert_outputs_match(_run(session, fx.model, call), call.outputs, call.id)


# --- hand-built graphs ---------------------------------------------------------------------------

F32 = DataType.DT_FLOAT


def const(name: str, value: Any, dtype: Any = None) -> Node:
    array = np.asarray(value, dtype=dtype)
    return Node(name, "Const", attrs={"value": array, "dtype": from_numpy(array.dtype)})


def placeholder(name: str, dtype: Any = np.float32) -> Node:
    return Node(name, "Placeholder", attrs={"dtype": from_numpy(np.dtype(dtype)), "shape": None})


def op(name: str, op_type: str, *inputs: str, controls: Iterable[str] = (), **attrs: Any) -> Node:
    return Node(name, op_type, [TensorRef.parse(i) for i in inputs], list(controls),
                fill_default_attrs(op_type, attrs))


def context(*protected: str, resources: ResourceManager | None = None) -> PassContext:
    return PassContext(frozenset(TensorRef.parse(p) for p in protected),
                       resources if resources is not None else ResourceManager())


def run(graph: Graph, fetches: Sequence[str], feeds: dict[str, Any],
        resources: ResourceManager | None = None) -> list[np.ndarray]:
    return Session(graph, resources).run(list(fetches), feeds)


def assert_same_results(before: Graph, after: Graph, fetches: Sequence[str],
                        feeds: dict[str, Any]) -> None:
    for want, got in zip(run(before, fetches, feeds), run(after, fetches, feeds)):
        assert got.dtype == want.dtype and got.shape == want.shape
        # Folding reorders float32 arithmetic: near-zero sums of large terms differ by an ulp
        # of the terms, not of the result.
        finite = np.abs(want[np.isfinite(want)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale)


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# identity removal


def test_identity_removal_keeps_control_edges_and_protected_tensors() -> None:
    graph = Graph([
        placeholder("x"),
        op("n", "NoOp"),
        op("y", "Neg", "x", T=F32),
        op("a", "Identity", "y", T=F32),
        op("b", "Identity", "a", controls=["n"], T=F32),  # carries a control edge: stays
        op("out", "Exp", "b", controls=["a"], T=F32),
        op("p", "Identity", "x", T=F32),  # protected: stays fetchable
        op("q", "StopGradient", "p", T=F32),
        op("out2", "Neg", "q", T=F32),
    ])
    after = remove_identities(graph, context("out", "p", "out2"))
    assert set(after.nodes) == {"x", "n", "y", "b", "out", "p", "out2"}
    assert after.node("b").inputs == [TensorRef("y")] and after.node("b").control_inputs == ["n"]
    # The control edge on the removed identity moves to what it forwarded.
    assert after.node("out").control_inputs == ["y"]
    assert after.node("out2").inputs == [TensorRef("p")]
    feeds = {"x": _x(3)}
    assert_same_results(graph, after, ["out", "p", "out2"], feeds)


# constant folding


def test_folding_preserves_dtypes() -> None:
    graph = Graph([
        const("i1", [1, 2], np.int32), const("i2", [3, 4], np.int32),
        op("isum", "AddV2", "i1", "i2", T=DataType.DT_INT32),
        op("half", "Cast", "isum", SrcT=DataType.DT_INT32, DstT=DataType.DT_HALF),
        const("axis", 0, np.int32),
        op("total", "Sum", "half", "axis", T=DataType.DT_HALF, Tidx=DataType.DT_INT32),
        placeholder("x", np.float16),
        op("out", "Mul", "x", "total", T=DataType.DT_HALF),
        op("iout", "Mul", "isum", "isum", T=DataType.DT_INT32),
    ])
    after = fold_constants(graph, context("out", "x"))
    assert _ops(after)["Const"] >= 2 and not {"AddV2", "Cast", "Sum"} & set(_ops(after))
    folded = {ref.node: after.node(ref.node) for ref in after.node("out").inputs[1:]}
    (total,) = folded.values()
    assert total.op == "Const" and total.attrs["dtype"] == DataType.DT_HALF
    assert total.attrs["value"].dtype == np.float16 and total.attrs["value"].shape == ()
    iout = after.node("iout/folded")
    assert iout.attrs["value"].dtype == np.int32 and iout.attrs["dtype"] == DataType.DT_INT32
    np.testing.assert_array_equal(iout.attrs["value"], [16, 36])
    assert_same_results(graph, after, ["out"], {"x": np.array([1.5, -2], np.float16)})


def test_folding_skips_stateful_protected_and_huge_results() -> None:
    graph = Graph([
        const("c", [1.0, 2.0], np.float32),
        op("checked", "CheckNumerics", "c", T=F32, message="bad"),  # stateful
        op("kept", "Neg", "c", T=F32),  # protected
        const("big_dims", [512, 1024], np.int32), const("one", 1.0, np.float32),
        op("big", "Fill", "big_dims", "one", T=F32),  # 2 MiB from 12 bytes
        const("small_dims", [2, 2], np.int32),
        op("small", "Fill", "small_dims", "one", T=F32),
        const("axis", 1, np.int32),
        op("s1", "Sum", "big", "axis", T=F32, Tidx=DataType.DT_INT32),
        op("s2", "AddV2", "small", "checked", T=F32),
    ])
    after = fold_constants(graph, context("kept", "s1", "s2"))
    assert after.node("checked").op == "CheckNumerics"
    assert after.node("kept").op == "Neg"
    assert after.node("big").op == "Fill"
    assert "small" not in after and after.node("s2").inputs[0] == TensorRef("small/folded")
    assert_same_results(graph, after, ["kept", "s1", "s2"], {})


# common subexpressions


def test_cse_merges_duplicates_but_not_stateful_ops() -> None:
    graph = Graph([
        placeholder("x"),
        const("c1", [1.0, 2.0], np.float32), const("c2", [1.0, 2.0], np.float32),
        const("c3", [1.0, 2.0], np.float64),  # same numbers, other dtype
        op("a1", "AddV2", "x", "c1", T=F32), op("a2", "AddV2", "x", "c2", T=F32),
        op("o1", "Neg", "a1", T=F32), op("o2", "Neg", "a2", T=F32),
        op("k1", "CheckNumerics", "x", T=F32, message="m"),
        op("k2", "CheckNumerics", "x", T=F32, message="m"),
        op("k", "AddV2", "k1", "k2", T=F32),
        op("cast1", "Cast", "x", SrcT=F32, DstT=DataType.DT_DOUBLE),
        op("cast2", "Cast", "x", SrcT=F32, DstT=DataType.DT_INT32),
        op("d", "AddV2", "cast1", "c3", T=DataType.DT_DOUBLE),
    ])
    fetches = ["o1", "o2", "k", "d", "cast2"]
    after = eliminate_common_subexpressions(graph, context(*fetches))
    assert "a2" not in after and "c2" not in after
    assert after.node("o2").inputs == [TensorRef("a1")]
    assert {"o1", "o2", "k1", "k2", "cast1", "cast2", "c3"} <= set(after.nodes)
    assert_same_results(graph, after, fetches, {"x": _x(2)})


# fusion


def _dense(relu: bool = True) -> list[Node]:
    nodes = [placeholder("x"), const("w", _x(4, 3, seed=1)), const("b", _x(3, seed=2)),
             op("mm", "MatMul", "x", "w", T=F32), op("ba", "BiasAdd", "mm", "b", T=F32)]
    if relu:
        nodes.append(op("act", "Relu", "ba", T=F32))
    return nodes


def test_fusion_merges_a_private_chain() -> None:
    graph = Graph(_dense())
    after = fuse_patterns(graph, context("act"))
    assert list(_ops(after).elements()).count("_FusedMatMul") == 1 and len(after) == 4
    assert after.node("act").op == "_FusedMatMul"
    assert list(after.node("act").attrs["fused_ops"]) == ["BiasAdd", "Relu"]
    assert_same_results(graph, after, ["act"], {"x": _x(5, 4)})


def test_fusion_stops_at_shared_or_protected_intermediates() -> None:
    shared = Graph([*_dense(), op("side", "Neg", "mm", T=F32)])
    assert _ops(fuse_patterns(shared, context("act", "side"))) == _ops(shared)

    protected = Graph(_dense())
    after = fuse_patterns(protected, context("act", "ba"))
    assert after.node("ba").op == "_FusedMatMul" and after.node("act").op == "Relu"
    assert list(after.node("ba").attrs["fused_ops"]) == ["BiasAdd"]
    assert_same_results(protected, after, ["act", "ba"], {"x": _x(5, 4)})

    watched = Graph([*_dense(), op("after", "Neg", "act", controls=["mm"], T=F32)])
    assert _ops(fuse_patterns(watched, context("after"))) == _ops(watched)


def test_fusion_of_conv2d() -> None:
    graph = Graph([
        placeholder("x"), const("w", _x(3, 3, 2, 4, seed=1)), const("b", _x(4, seed=2)),
        op("conv", "Conv2D", "x", "w", T=F32, strides=[1, 1, 1, 1], padding="SAME"),
        op("ba", "BiasAdd", "conv", "b", T=F32), op("act", "Relu6", "ba", T=F32),
    ])
    after = fuse_patterns(graph, context("act"))
    assert after.node("act").op == "_FusedConv2D" and "conv" not in after
    assert_same_results(graph, after, ["act"], {"x": _x(2, 5, 5, 2)})


# freezing


def _variables() -> tuple[ResourceManager, list[Node]]:
    resources = ResourceManager()
    resources.variable("", "v1", np.dtype(np.float32), (2,)).assign([1.0, 2.0])
    resources.variable("", "v2", np.dtype(np.float32), (2,)).assign([3.0, 4.0])
    handle = {"dtype": F32, "shape": (2,), "container": ""}
    nodes = [
        Node("h1", "VarHandleOp", attrs={**handle, "shared_name": "v1"}),
        Node("h2", "VarHandleOp", attrs={**handle, "shared_name": "v2"}),
        op("h1_id", "Identity", "h1", T=DataType.DT_RESOURCE),
        op("r1", "ReadVariableOp", "h1_id", dtype=F32),
        op("r2", "ReadVariableOp", "h2", dtype=F32),
        op("out", "AddV2", "r1", "r2", T=F32),
    ]
    return resources, nodes


def test_freeze_turns_read_only_variables_into_constants() -> None:
    resources, nodes = _variables()
    graph = Graph(nodes)
    after = freeze_variables(graph, context("out", resources=resources))
    assert after.node("r1").op == "Const" and after.node("r2").op == "Const"
    np.testing.assert_array_equal(after.node("r1").attrs["value"], [1.0, 2.0])
    np.testing.assert_array_equal(run(after, ["out"], {}, resources)[0], [4.0, 6.0])


def test_freeze_leaves_written_variables_alone() -> None:
    resources, nodes = _variables()
    graph = Graph([*nodes, op("write", "AssignVariableOp", "h2", "r1", dtype=F32)])
    after = freeze_variables(graph, context("out", "write", resources=resources))
    assert after.node("r1").op == "Const"
    assert after.node("r2").op == "ReadVariableOp"


# affine folding


def _conv(op_type: str = "Conv2D", weights: Any = None, **attrs: Any) -> list[Node]:
    if weights is None:
        weights = _x(3, 3, 3, 4, seed=1)
    return [placeholder("x"), const("w", weights),
            op("conv", op_type, "x", "w", T=F32, strides=[1, 1, 1, 1], padding="SAME", **attrs)]


def test_affine_after_conv2d_becomes_weights_and_bias_then_fuses() -> None:
    graph = Graph([
        *_conv(),
        const("scale", _x(4, seed=3)), const("shift", _x(1, 1, 1, 4, seed=4)),
        op("mul", "Mul", "conv", "scale", T=F32),
        op("add", "AddV2", "shift", "mul", T=F32),  # operands either way round
        op("act", "Relu", "add", T=F32),
    ])
    ctx = context("act")
    folded = fold_affine(graph, ctx)
    assert not {"Mul", "AddV2"} & set(_ops(folded))
    assert folded.node("add").op == "BiasAdd" and folded.node("add").inputs[0] == TensorRef("conv")
    feeds = {"x": _x(2, 6, 6, 3, seed=5)}
    assert_same_results(graph, folded, ["act"], feeds)
    fused = prune_to_protected(fuse_patterns(folded, ctx), ctx)
    assert _ops(fused) == Counter({"Placeholder": 1, "Const": 2, "_FusedConv2D": 1})
    assert list(fused.node("act").attrs["fused_ops"]) == ["BiasAdd", "Relu"]
    assert_same_results(graph, fused, ["act"], feeds)


def test_affine_after_bias_add_and_sub() -> None:
    graph = Graph([
        *_conv(),
        const("bias", _x(4, seed=3)), const("scale", _x(1, 4, seed=4)),
        const("mean", _x(4, seed=6)), const("two", 2.0, np.float32),
        op("ba", "BiasAdd", "conv", "bias", T=F32),
        op("sub", "Sub", "ba", "mean", T=F32),
        op("mul", "Mul", "scale", "sub", T=F32),
        op("mul2", "Mul", "mul", "two", T=F32),  # a scalar broadcasts to every channel
    ])
    folded = fold_affine(graph, context("mul2"))
    assert _ops(folded)["BiasAdd"] == 1 and not {"Sub", "Mul"} & set(_ops(folded))
    assert_same_results(graph, folded, ["mul2"], {"x": _x(1, 5, 5, 3, seed=5)})


def test_affine_after_depthwise_conv() -> None:
    graph = Graph([
        *_conv("DepthwiseConv2dNative", _x(3, 3, 3, 2, seed=1)),  # 3 inputs x multiplier 2
        const("scale", _x(6, seed=3)), const("shift", _x(6, seed=4)),
        op("mul", "Mul", "conv", "scale", T=F32), op("add", "Add", "mul", "shift", T=F32),
    ])
    ctx = context("add")
    folded = fold_affine(graph, ctx)
    assert _ops(folded)["DepthwiseConv2dNative"] == 1 and folded.node("add").op == "BiasAdd"
    assert not {"Mul", "Add"} & set(_ops(folded))
    feeds = {"x": _x(2, 4, 4, 3, seed=5)}
    assert_same_results(graph, folded, ["add"], feeds)
    fused = fuse_patterns(folded, ctx)
    assert fused.node("add").op == "_FusedDepthwiseConv2dNative" and "conv" not in fused
    assert_same_results(graph, fused, ["add"], feeds)


@pytest.mark.parametrize("transpose_b", [False, True])
def test_scale_after_matmul(transpose_b: bool) -> None:
    # Square weights: scaling the wrong axis would still run, and give wrong numbers.
    graph = Graph([
        placeholder("x"), const("w", _x(4, 4, seed=1)), const("scale", _x(4, seed=2)),
        op("mm", "MatMul", "x", "w", T=F32, transpose_b=transpose_b),
        op("mul", "Mul", "mm", "scale", T=F32),
    ])
    folded = fold_affine(graph, context("mul"))
    assert folded.node("mul").op == "MatMul" and "mm" not in folded
    assert_same_results(graph, folded, ["mul"], {"x": _x(5, 4, seed=3)})


def test_affine_folding_refuses_what_it_cannot_prove() -> None:
    feeds = {"x": _x(1, 5, 5, 3, seed=5), "s": _x(4, seed=6)}
    cases = {
        # The scale varies along W, not only by channel.
        "not per channel": ([const("scale", _x(5, 4, seed=3)),
                             op("mul", "Mul", "conv", "scale", T=F32)], ["mul"]),
        "infinite scale": ([const("scale", np.array([1, np.inf, 2, 3], np.float32)),
                            op("mul", "Mul", "conv", "scale", T=F32)], ["mul"]),
        "overflowing weights": ([const("scale", np.full(4, 3e38, np.float32)),
                                 op("mul", "Mul", "conv", "scale", T=F32)], ["mul"]),
        "fed scale": ([placeholder("s"), op("mul", "Mul", "conv", "s", T=F32)], ["mul"]),
        "const minus product": ([const("t", _x(4, seed=3)),
                                 op("sub", "Sub", "t", "conv", T=F32)], ["sub"]),
        "protected product": ([const("scale", _x(4, seed=3)),
                               op("mul", "Mul", "conv", "scale", T=F32)], ["mul", "conv"]),
        "shared product": ([const("scale", _x(4, seed=3)),
                            op("mul", "Mul", "conv", "scale", T=F32),
                            op("other", "Neg", "conv", T=F32)], ["mul", "other"]),
        "product read by control edge": ([const("scale", _x(4, seed=3)),
                                          op("mul", "Mul", "conv", "scale", T=F32),
                                          op("other", "Neg", "mul", controls=["conv"], T=F32)],
                                         ["other"]),
    }
    for label, (tail, fetches) in cases.items():
        graph = Graph([*_conv(), *tail])
        after = fold_affine(graph, context(*fetches))
        assert _ops(after) == _ops(graph), label
        assert after.node("w").op == "Const" and after.node("conv").inputs[1] == TensorRef("w")
        used = {k: v for k, v in feeds.items() if k in graph}
        with np.errstate(over="ignore"):  # the overflowing case computes inf, as TF would
            assert_same_results(graph, after, fetches, used)
    fed_weights = Graph([placeholder("x"), placeholder("w"), const("scale", _x(4, seed=3)),
                         op("conv", "Conv2D", "x", "w", T=F32, strides=[1, 1, 1, 1],
                            padding="SAME"),
                         op("mul", "Mul", "conv", "scale", T=F32)])
    assert fold_affine(fed_weights, context("mul")) is fed_weights


def test_affine_folding_stops_at_a_protected_step() -> None:
    graph = Graph([
        *_conv(), const("scale", _x(4, seed=3)), const("shift", _x(4, seed=4)),
        op("mul", "Mul", "conv", "scale", T=F32), op("add", "AddV2", "mul", "shift", T=F32),
    ])
    after = fold_affine(graph, context("mul", "add"))
    # The scale folds into the weights, and the rescaled product keeps the protected name.
    assert after.node("mul").op == "Conv2D" and after.node("add").op == "AddV2"
    assert_same_results(graph, after, ["mul", "add"], {"x": _x(1, 5, 5, 3, seed=5)})


# control edges on constants


def test_control_edges_on_constants_go_and_identities_follow() -> None:
    resources, variables = _variables()
    graph = Graph([
        *variables,  # r1, r2 read variables; out = r1 + r2
        placeholder("x"),
        const("w", _x(2, seed=1)),
        op("wait", "NoOp", controls=["w"]),  # what an inlined call leaves behind
        op("y", "Mul", "x", "w", T=F32),
        op("y_out", "Identity", "y", controls=["wait"], T=F32),
        op("call", "IdentityN", "y_out", controls=["w", "wait"], T=[F32]),
        op("read_wait", "NoOp", controls=["r1"]),  # waits on a variable read: kept
        op("after_read", "Neg", "x", controls=["read_wait"], T=F32),
        op("done", "NoOp", controls=["y"]),  # waits on a computation...
        op("z", "Neg", "y", controls=["done"], T=F32),  # ...that z reads anyway: dropped
        op("z2", "Neg", "x", controls=["done"], T=F32),  # ...that z2 does not read: kept
    ])
    protected = ("call", "after_read", "z", "z2", "out")
    ctx = context(*protected, resources=resources)
    after = drop_constant_controls(graph, ctx)
    assert after.node("y_out").control_inputs == [] and after.node("call").control_inputs == []
    assert after.node("after_read").control_inputs == ["read_wait"]
    assert after.node("z").control_inputs == [] and after.node("z2").control_inputs == ["done"]
    cleaned = prune_to_protected(remove_identities(after, ctx), ctx)
    assert "y_out" not in cleaned and "wait" not in cleaned
    assert cleaned.node("call").inputs == [TensorRef("y")]  # protected: stays fetchable
    feeds = {"x": _x(2, seed=3)}
    for got, want in zip(run(cleaned, protected, feeds, resources),
                         run(graph, protected, feeds, resources)):
        np.testing.assert_array_equal(got, want)


# tensordot


def _tensordot(perm: Sequence[int] = (0, 1, 2), flat: str = "stack",
               rank_known: bool = True) -> list[Node]:
    """``y = tf.tensordot(x, w, [[2], [0]])`` as TensorFlow exports it, for a rank-3 ``x``."""
    shape_attrs = {"_output_shapes": [(3,)]} if rank_known else {}
    i32 = DataType.DT_INT32
    gather = {"Tparams": i32, "Tindices": i32, "Taxis": i32}
    return [
        placeholder("x"), const("w", _x(4, 3, seed=1)),
        const("free", [0, 1], np.int32), const("axes", [2], np.int32),
        const("axis0", 0, np.int32), const("zero", [0], np.int32), const("n", [3], np.int32),
        const("perm", list(perm), np.int32), const("flat_const", [-1, 4], np.int32),
        op("shape", "Shape", "x", T=F32, **shape_attrs),
        op("g_free", "GatherV2", "shape", "free", "axis0", **gather),
        op("g_axes", "GatherV2", "shape", "axes", "axis0", **gather),
        op("p_free", "Prod", "g_free", "zero", T=i32),
        op("p_axes", "Prod", "g_axes", "zero", T=i32),
        op("stack", "Pack", "p_free", "p_axes", T=i32, N=2),
        op("xt", "Transpose", "x", "perm", T=F32),
        op("x2", "Reshape", "xt", flat, T=F32),
        op("mm", "MatMul", "x2", "w", T=F32),
        op("out_shape", "ConcatV2", "g_free", "n", "axis0", T=i32, N=2),
        op("y", "Reshape", "mm", "out_shape", T=F32),
    ]


def test_tensordot_becomes_one_batch_matmul() -> None:
    graph = Graph(_tensordot())
    ctx = context("y")
    after = prune_to_protected(simplify_tensordot(graph, ctx), ctx)
    assert after.node("y").op == "BatchMatMulV2"
    assert after.node("y").inputs == [TensorRef("x"), TensorRef("w")]
    assert _ops(after) == Counter({"Placeholder": 1, "Const": 1, "BatchMatMulV2": 1})
    for shape in ((2, 5, 4), (1, 1, 4), (0, 3, 4)):
        assert_same_results(graph, after, ["y"], {"x": _x(*shape)})


def test_tensordot_rewrite_needs_proof() -> None:
    cases = {
        "permuted": (Graph(_tensordot(perm=(1, 0, 2))), ("y",)),
        "constant flat shape": (Graph(_tensordot(flat="flat_const")), ("y",)),
        "unknown rank": (Graph(_tensordot(perm=(), rank_known=False)), ("y",)),
        "protected matmul": (Graph(_tensordot()), ("y", "mm")),
        "shared flat input": (Graph([*_tensordot(), op("side", "Neg", "x2", T=F32)]),
                              ("y", "side")),
    }
    for label, (graph, protected) in cases.items():
        if label == "unknown rank":  # no Transpose either: nothing pins x's rank
            graph = Graph([n if n.name != "xt" else op("xt", "Identity", "x", T=F32)
                           for n in graph])
        after = simplify_tensordot(graph, context(*protected))
        assert after.node("y").op == "Reshape", label


# reshape to a shape of the input's own dims


def _flatten(trailing: int | None = 4) -> list[Node]:
    i32 = DataType.DT_INT32
    return [
        placeholder("x"),
        const("b0", [0], np.int32), const("b1", [1], np.int32),
        const("rest", trailing if trailing is not None else -1, np.int32),
        op("shape", "Shape", "x", T=F32, _output_shapes=[(3,)]),
        op("batch", "StridedSlice", "shape", "b0", "b1", "b1", T=i32, Index=i32,
           shrink_axis_mask=1),
        op("target", "Pack", "batch", "rest", T=i32, N=2),
        op("flat", "Reshape", "x", "target", T=F32),
        op("out", "Neg", "flat", T=F32),
    ]


@pytest.mark.parametrize("trailing", [4, None])
def test_flatten_reshape_takes_its_shape_from_its_input(trailing) -> None:
    graph = Graph(_flatten(trailing))
    ctx = context("out")
    after = prune_to_protected(reshape_by_template(graph, ctx), ctx)
    assert after.node("flat").op == "_ReshapeByTemplate"
    assert _ops(after) == Counter({"Placeholder": 1, "_ReshapeByTemplate": 1, "Neg": 1})
    for shape in ((3, 2, 2), (1, 4, 1), (0, 2, 2)):
        assert_same_results(graph, after, ["out"], {"x": _x(*shape)})
    bad = {"x": _x(2, 3, 3)} if trailing else {"x": np.float32(1)}  # 18 values; rank 0
    for g in (graph, after):
        with pytest.raises(OpError):
            run(g, ["out"], bad)


def test_reshape_of_another_tensors_shape_stays() -> None:
    nodes = [n if n.name != "shape" else op("shape", "Shape", "y", T=F32,
                                            _output_shapes=[(3,)]) for n in _flatten()]
    graph = Graph([*nodes, placeholder("y")])
    assert reshape_by_template(graph, context("out")).node("flat").op == "Reshape"


# embedding lookups


def _embedding(rows: int = 5) -> list[Node]:
    i32 = DataType.DT_INT32
    return [
        placeholder("ids", np.int32), const("table", _x(5, 3, seed=1)),
        const("rows", rows, np.int32), const("zero", 0, np.int32), const("axis", 0, np.int32),
        op("add", "AddV2", "ids", "rows", T=i32), op("less", "Less", "ids", "zero", T=i32),
        op("select", "SelectV2", "less", "add", "ids", T=i32),
        op("emb", "GatherV2", "table", "select", "axis", Tparams=F32, Tindices=i32, Taxis=i32),
    ]


def test_embedding_lookup_becomes_one_gather() -> None:
    graph = Graph(_embedding())
    ctx = context("emb")
    after = prune_to_protected(fuse_embedding_lookups(graph, ctx), ctx)
    assert after.node("emb").op == "_GatherWrapNegative"
    assert not {"AddV2", "Less", "SelectV2"} & set(_ops(after))
    assert_same_results(graph, after, ["emb"], {"ids": np.array([[0, -1, 4, -5]], np.int32)})
    for bad in (5, -6):
        for g in (graph, after):
            with pytest.raises(OpError, match="is not in \\[0, 5\\)"):
                run(g, ["emb"], {"ids": np.array([bad], np.int32)})


def test_embedding_lookup_with_other_row_count_stays() -> None:
    graph = Graph(_embedding(rows=4))
    assert fuse_embedding_lookups(graph, context("emb")).node("emb").op == "GatherV2"
    shared = Graph(_embedding())
    assert fuse_embedding_lookups(shared, context("emb", "less")).node("emb").op == "GatherV2"


# layer normalization


def _layer_norm(scale: bool = True, center: bool = True, axis: int = -1,
                gamma_shape: tuple[int, ...] = (6,), x_rank: int | None = None) -> list[Node]:
    x = placeholder("x")
    if x_rank is not None:  # as TensorFlow's shape inference records it
        x.attrs["_output_shapes"] = [(-1,) * (x_rank - 1) + (6,)]
    nodes = [
        x, const("axes", [axis], np.int32),
        const("eps", 1e-3, np.float32), const("gamma", _x(*gamma_shape, seed=1)),
        const("beta", _x(6, seed=2)),
        op("mean", "Mean", "x", "axes", T=F32, keep_dims=True),
        op("sq", "SquaredDifference", "x", "mean", T=F32),
        op("var", "Mean", "sq", "axes", T=F32, keep_dims=True),
        op("add", "AddV2", "var", "eps", T=F32),
        op("rsqrt", "Rsqrt", "add", T=F32),
    ]
    inv = "rsqrt"
    if scale:
        nodes.append(op("inv", "Mul", "rsqrt", "gamma", T=F32))
        inv = "inv"
    nodes += [op("scaled", "Mul", "x", inv, T=F32), op("neg", "Neg", "mean", T=F32),
              op("centered", "Mul", "neg", inv, T=F32)]
    shift = "centered"
    if center:
        nodes.append(op("shift", "AddV2", "centered", "beta", T=F32))
        shift = "shift"
    nodes.append(op("out", "AddV2", "scaled", shift, T=F32))
    return nodes


@pytest.mark.parametrize("scale, center", [(True, True), (False, True), (True, False)])
def test_layer_norm_becomes_one_node(scale, center) -> None:
    graph = Graph(_layer_norm(scale, center))
    ctx = context("out")
    after = prune_to_protected(fuse_layer_norm(graph, ctx), ctx)
    assert after.node("out").op == "_FusedLayerNorm"
    assert set(_ops(after)) == {"Placeholder", "Const", "_FusedLayerNorm"}
    for shape in ((2, 3, 6), (4, 6), (0, 6)):
        assert_same_results(graph, after, ["out"], {"x": _x(*shape) * 3 + 1})


def test_layer_norm_with_keras_broadcast_parameters() -> None:
    # Keras reshapes gamma to [1, 1, C] for a rank-3 input; fused only when x's rank is known
    # to be at least that (otherwise gamma could add dims to the result).
    graph = Graph(_layer_norm(gamma_shape=(1, 1, 6), x_rank=3))
    after = fuse_layer_norm(graph, context("out"))
    assert after.node("out").op == "_FusedLayerNorm"
    assert_same_results(graph, after, ["out"], {"x": _x(2, 3, 6)})
    unknown_rank = Graph(_layer_norm(gamma_shape=(1, 1, 6)))
    assert fuse_layer_norm(unknown_rank, context("out")).node("out").op == "AddV2"


def test_layer_norm_fusion_needs_the_whole_private_pattern() -> None:
    cases = {
        "protected mean": (_layer_norm(), ("out", "mean")),
        "shared variance": ([*_layer_norm(), op("side", "Neg", "var", T=F32)], ("out", "side")),
        "first axis": (_layer_norm(axis=0), ("out",)),
    }
    for label, (nodes, protected) in cases.items():
        graph = Graph(nodes)
        assert fuse_layer_norm(graph, context(*protected)).node("out").op == "AddV2", label


# GELU and BatchMatMulV2 in fusion


def _gelu(after: str, factor: float = 0.7071067690849304) -> list[Node]:
    return [
        const("half", 0.5, np.float32), const("factor", factor, np.float32),
        op("g_neg", "Neg", after, T=F32), op("g_half", "Mul", "half", after, T=F32),
        op("g_scaled", "Mul", "g_neg", "factor", T=F32), op("g_erfc", "Erfc", "g_scaled", T=F32),
        op("gelu", "Mul", "g_half", "g_erfc", T=F32),
    ]


@pytest.mark.parametrize("base", ["MatMul", "BatchMatMulV2"])
def test_dense_with_exact_gelu_fuses(base) -> None:
    graph = Graph([
        placeholder("x"), const("w", _x(4, 3, seed=1)), const("b", _x(3, seed=2)),
        op("mm", base, "x", "w", T=F32), op("ba", "BiasAdd", "mm", "b", T=F32),
        *_gelu("ba"),
    ])
    ctx = context("gelu")
    after = prune_to_protected(fuse_patterns(graph, ctx), ctx)
    assert after.node("gelu").op == "_FusedMatMul"
    assert list(after.node("gelu").attrs["fused_ops"]) == ["BiasAdd", "GeluExact"]
    assert _ops(after) == Counter({"Placeholder": 1, "Const": 2, "_FusedMatMul": 1})
    x = _x(2, 5, 4) * 4 if base == "BatchMatMulV2" else _x(5, 4) * 4
    assert_same_results(graph, after, ["gelu"], {"x": x})


@pytest.mark.parametrize("base", ["Conv2D", "DepthwiseConv2dNative"])
@pytest.mark.parametrize("form", ["sigmoid_first", "sigmoid_second", "silu_beta"])
def test_convolution_with_swish_fuses(base: str, form: str) -> None:
    weights = _x(3, 3, 3, 4 if base == "Conv2D" else 1, seed=1)
    product = ["sig", "ba"] if form == "sigmoid_first" else ["ba", "sig"]
    # tf.nn.silu: Sigmoid(Mul(beta, y)) with beta 1.
    beta = [const("beta", 1.0, np.float32), op("scaled", "Mul", "beta", "ba", T=F32)]
    graph = Graph([
        *_conv(base, weights), const("b", _x(4 if base == "Conv2D" else 3, seed=2)),
        op("ba", "BiasAdd", "conv", "b", T=F32),
        *(beta if form == "silu_beta" else []),
        op("sig", "Sigmoid", "scaled" if form == "silu_beta" else "ba", T=F32),
        op("swish", "Mul", *product, T=F32),
    ])
    ctx = context("swish")
    after = prune_to_protected(fuse_patterns(graph, ctx), ctx)
    assert after.node("swish").op == f"_Fused{base}"
    assert list(after.node("swish").attrs["fused_ops"]) == ["BiasAdd", "Swish"]
    assert _ops(after) == Counter({"Placeholder": 1, "Const": 2, f"_Fused{base}": 1})
    # Large values of both signs: exp(-y) overflows to inf, and underflows to 0.
    assert_same_results(graph, after, ["swish"], {"x": _x(2, 6, 6, 3, seed=3) * 40})


@pytest.mark.parametrize("relu", [True, False])
def test_residual_add_after_a_convolution_fuses(relu: bool) -> None:
    graph = Graph([
        *_conv(), placeholder("shortcut"), const("b", _x(4, seed=2)),
        op("ba", "BiasAdd", "conv", "b", T=F32),
        op("sum", "AddV2", "shortcut", "ba", T=F32),  # operands either way round
        *([op("out", "Relu", "sum", T=F32)] if relu else [op("out", "Identity", "sum", T=F32)]),
    ])
    ctx = context("out")
    after = prune_to_protected(fuse_patterns(graph, ctx), ctx)
    fused = after.node("out" if relu else "sum")
    assert fused.op == "_FusedConv2D" and fused.inputs[3] == TensorRef("shortcut")
    assert list(fused.attrs["fused_ops"]) == ["BiasAdd", "Add", *(["Relu"] if relu else [])]
    x = _x(2, 6, 6, 3, seed=3)
    # The shortcut as large as the output, broadcast to it, and broadcasting it.
    for shortcut in (_x(2, 6, 6, 4, seed=4), _x(1, 1, 4, seed=5), _x(3, 2, 6, 6, 4, seed=6)):
        assert_same_results(graph, after, ["out"], {"x": x, "shortcut": shortcut})


def test_adds_that_are_not_residual_connections_stay() -> None:
    base = [*_conv(), const("b", _x(4, seed=2)), op("ba", "BiasAdd", "conv", "b", T=F32)]
    cases = {
        # A constant: affine folding's business, and a bias of its own.
        "constant": [const("c", _x(4, seed=3)), op("sum", "AddV2", "ba", "c", T=F32)],
        "biased value read twice": [placeholder("s"), op("sum", "AddV2", "ba", "s", T=F32),
                                    op("side", "Neg", "ba", T=F32)],
        "added to itself": [op("sum", "AddV2", "ba", "ba", T=F32)],
    }
    for label, tail in cases.items():
        graph = Graph([*base, *tail])
        fetches = ("sum", "side") if label == "biased value read twice" else ("sum",)
        after = fuse_patterns(graph, context(*fetches))
        assert after.node("sum").op == "AddV2", label


def test_swish_like_patterns_that_are_not_swish_stay() -> None:
    base = [*_conv(), const("b", _x(4, seed=2)), op("ba", "BiasAdd", "conv", "b", T=F32)]
    cases = {
        "sigmoid read elsewhere": [op("sig", "Sigmoid", "ba", T=F32),
                                   op("swish", "Mul", "ba", "sig", T=F32),
                                   op("side", "Neg", "sig", T=F32)],
        "sigmoid of another value": [op("neg", "Neg", "ba", T=F32),
                                     op("sig", "Sigmoid", "neg", T=F32),
                                     op("swish", "Mul", "ba", "sig", T=F32)],
        "square": [op("swish", "Mul", "ba", "ba", T=F32)],
        "beta of 2": [const("beta", 2.0, np.float32), op("scaled", "Mul", "beta", "ba", T=F32),
                      op("sig", "Sigmoid", "scaled", T=F32),
                      op("swish", "Mul", "ba", "sig", T=F32)],
    }
    for label, tail in cases.items():
        graph = Graph([*base, *tail])
        fetches = ("swish", "side") if label == "sigmoid read elsewhere" else ("swish",)
        after = fuse_patterns(graph, context(*fetches))
        assert after.node("swish").op == "Mul", label
    # The sigmoid fetched: it stays, and so does the product that reads it.
    graph = Graph([*base, op("sig", "Sigmoid", "ba", T=F32),
                   op("swish", "Mul", "ba", "sig", T=F32)])
    assert fuse_patterns(graph, context("swish", "sig")).node("swish").op == "Mul"


def test_gelu_like_patterns_that_are_not_gelu_stay() -> None:
    dense = [placeholder("x"), const("w", _x(4, 3, seed=1)), const("b", _x(3, seed=2)),
             op("mm", "MatMul", "x", "w", T=F32), op("ba", "BiasAdd", "mm", "b", T=F32)]
    other_factor = Graph([*dense, *_gelu("ba", factor=0.75)])
    after = fuse_patterns(other_factor, context("gelu"))
    assert after.node("gelu").op == "Mul" and after.node("ba").op == "_FusedMatMul"
    batched_weights = Graph([
        placeholder("x"), placeholder("w"), const("b", _x(3, seed=2)),
        op("mm", "BatchMatMulV2", "x", "w", T=F32), op("ba", "BiasAdd", "mm", "b", T=F32),
    ])
    assert fuse_patterns(batched_weights, context("ba")).node("ba").op == "BiasAdd"


def test_keras_patterns_in_the_fixture_models_are_rewritten() -> None:
    names = [name for name, _ in DEFAULT_PASSES]

    def before_after(model: str, pass_name: str) -> tuple[Counter[str], Counter[str]]:
        stages = _default_stages(_dir(model))
        index = names.index(pass_name)
        return _ops(stages[index - 1]), _ops(stages[index])

    def controls(model: str, pass_name: str) -> int:
        graph = _default_stages(_dir(model))[names.index(pass_name)]
        return sum(len(n.control_inputs) for n in graph)

    # Per model, two signatures. Frozen variable reads leave control edges on constants.
    assert controls("transformer_block", "freeze_variables") > 80
    assert controls("transformer_block", "drop_constant_controls") <= 4
    before, after = before_after("transformer_block", "simplify_tensordot")
    assert after["BatchMatMulV2"] == before["BatchMatMulV2"] + 4  # two dense layers each
    before, after = before_after("transformer_block", "fuse_layer_norm")
    assert after["_FusedLayerNorm"] == 4 and not after["Rsqrt"] and not after["SquaredDifference"]
    before, after = before_after("transformer_block", "move_bias_before_split")
    # The query, key and value projections' biases: 3 per signature.
    assert after["BiasAdd"] == before["BiasAdd"] + 6 and after["AddV2"] == before["AddV2"] - 6
    before, after = before_after("transformer_block", "fuse_patterns")
    # Per signature: query, key, value, attention output, two feed-forward layers, logits.
    assert not after["Erfc"] and not after["BiasAdd"] and after["_FusedMatMul"] == 14
    gelu = [n for n in _default_stages(_dir("transformer_block"))[-1] if n.op == "_FusedMatMul"
            and list(n.attrs["fused_ops"]) == ["BiasAdd", "GeluExact"]]
    assert len(gelu) == 2
    for model in ("transformer_block", "functional_multi_io", "text_classifier"):
        before, after = before_after(model, "fuse_embedding_lookups")
        assert after["_GatherWrapNegative"] == 2, model
    before, after = before_after("functional_multi_io", "reshape_by_template")
    assert before["Reshape"] == 2 and after["_ReshapeByTemplate"] == 2
    optimized = _optimized(_dir("transformer_block"))
    assert not {"Shape", "Prod", "Pack", "Transpose", "MatMul", "Less"} & set(_ops(optimized))
    assert not any(n.control_inputs for n in optimized)


# a bias added after a Reshape that splits the product's last axis


def _split_heads(target: Sequence[int] = (-1, 3, 2, 4), bias_shape: Sequence[int] = (2, 4),
                 base: str = "BatchMatMulV2") -> list[Node]:
    return [
        placeholder("x"), const("w", _x(5, 8, seed=1)), const("b", _x(*bias_shape, seed=2)),
        const("target", list(target), np.int32),
        op("mm", base, "x", "w", T=F32),
        op("heads", "Reshape", "mm", "target", T=F32),
        op("out", "AddV2", "heads", "b", T=F32),
    ]


def test_bias_after_a_head_split_moves_before_it_and_fuses() -> None:
    graph = Graph(_split_heads())
    ctx = context("out")
    moved = move_bias_before_split(graph, ctx)
    assert moved.node("out").op == "Reshape" and "heads" not in moved
    biased = moved.node(moved.node("out").inputs[0].node)
    assert biased.op == "BiasAdd" and biased.inputs[0] == TensorRef("mm")
    fused = prune_to_protected(fuse_patterns(moved, ctx), ctx)
    assert _ops(fused)["_FusedMatMul"] == 1 and not {"AddV2", "BiasAdd"} & set(_ops(fused))
    # Whatever the leading dims turn out to be, each group of 8 keeps its layout.
    for shape in ((2, 3, 5), (1, 6, 5), (6, 5)):
        assert_same_results(graph, fused, ["out"], {"x": _x(*shape)})


def test_bias_that_does_not_line_up_with_the_split_stays() -> None:
    cases = {
        "bias across the leading dims": _split_heads(bias_shape=(3, 2, 4)),
        "split of another width": _split_heads(target=(-1, 3, 4, 2)),
        "bias broadcast along a head": _split_heads(bias_shape=(2, 1)),
        "product by a fed matrix": [n if n.name != "w" else placeholder("w")
                                    for n in _split_heads()],
    }
    for label, nodes in cases.items():
        graph = Graph(nodes)
        assert move_bias_before_split(graph, context("out")).node("out").op == "AddV2", label


# a per-channel affine after the activation joins the fused node


def _post_affine(base: str = "Conv2D", activation: str = "Relu", mul: str = "Mul",
                 add: str = "AddV2", scale: Any = None, shift: Any = None,
                 data_format: str = "NHWC") -> list[Node]:
    """base -> BiasAdd -> activation -> Mul(const) -> Add(const), as Keras' BatchNormalization
    after an activation leaves it once its variables are frozen."""
    channels = 4
    if base == "MatMul":
        nodes = [placeholder("x"), const("w", _x(3, channels, seed=1)),
                 op("base", "MatMul", "x", "w", T=F32)]
    elif base == "Conv2DBackpropInput":
        nodes = [placeholder("x"), placeholder("sizes", np.int32),
                 const("w", _x(3, 3, channels, 3, seed=1)),
                 op("base", base, "sizes", "w", "x", T=F32, strides=[1, 2, 2, 1],
                    padding="SAME", data_format=data_format)]
    else:
        weights = _x(3, 3, 3, channels if base == "Conv2D" else 2, seed=1)
        channels = weights.shape[3] if base == "Conv2D" else 6
        nodes = [placeholder("x"), const("w", weights),
                 op("base", base, "x", "w", T=F32, strides=[1, 1, 1, 1], padding="SAME",
                    data_format=data_format)]
    scale = _x(channels, seed=3) if scale is None else scale
    shift = _x(channels, seed=4) if shift is None else shift
    nodes += [const("b", _x(channels, seed=2)), const("scale", scale), const("shift", shift),
              op("ba", "BiasAdd", "base", "b", T=F32, data_format=data_format),
              op("act", activation, "ba", T=F32)]
    if mul:
        nodes.append(op("mul", mul, "act", "scale", T=F32))
    if add:
        nodes.append(op("out", add, "shift", "mul" if mul else "act", T=F32) if add != "Sub"
                     else op("out", "Sub", "mul" if mul else "act", "shift", T=F32))
    return nodes


@pytest.mark.parametrize("base, activation, feed", [
    ("Conv2D", "Relu", (2, 6, 6, 3)),
    ("DepthwiseConv2dNative", "Relu6", (2, 5, 5, 3)),
    ("MatMul", "Tanh", (5, 3)),
    ("Conv2DBackpropInput", "Elu", (2, 3, 3, 3)),
])
def test_affine_after_the_activation_fuses(base, activation, feed) -> None:
    graph = Graph(_post_affine(base, activation))
    ctx = context("out")
    fused = prune_to_protected(fuse_patterns(graph, ctx), ctx)
    node = fused.node("out")
    assert node.op == {"Conv2D": "_FusedConv2D", "MatMul": "_FusedMatMul",
                       "DepthwiseConv2dNative": "_FusedDepthwiseConv2dNative",
                       "Conv2DBackpropInput": "_FusedConv2DBackpropInput"}[base]
    assert list(node.attrs["fused_ops"]) == ["BiasAdd", activation, "Mul", "AddV2"]
    assert node.inputs[-3:] == [TensorRef("b"), TensorRef("scale"), TensorRef("shift")]
    assert not {"BiasAdd", "Mul", "AddV2", activation} & set(_ops(fused))
    feeds = {"x": _x(*feed, seed=5)}
    if base == "Conv2DBackpropInput":
        feeds["sizes"] = np.array([2, 6, 6, 4], np.int32)
    assert_same_results(graph, fused, ["out"], feeds)


def test_post_activation_steps_in_other_forms_fuse() -> None:
    feeds = {"x": _x(2, 6, 6, 3, seed=5)}
    cases = {
        "scale only": (_post_affine(add=""), ["BiasAdd", "Relu", "Mul"]),
        "shift only": (_post_affine(mul=""), ["BiasAdd", "Relu", "AddV2"]),
        "subtracted shift": (_post_affine(add="Sub"), ["BiasAdd", "Relu", "Mul", "AddV2"]),
        "Keras-shaped constants": (_post_affine(scale=_x(1, 1, 1, 4, seed=3),
                                                shift=_x(1, 4, seed=4)),
                                   ["BiasAdd", "Relu", "Mul", "AddV2"]),
        "scalar scale": (_post_affine(scale=np.float32(1.5)), ["BiasAdd", "Relu", "Mul", "AddV2"]),
    }
    for label, (nodes, fused_ops) in cases.items():
        graph = Graph(nodes)
        last = nodes[-1].name
        ctx = context(last)
        fused = prune_to_protected(fuse_patterns(graph, ctx), ctx)
        assert fused.node(last).op == "_FusedConv2D", label
        assert list(fused.node(last).attrs["fused_ops"]) == fused_ops, label
        for ref in fused.node(last).inputs[2:]:  # every arg a [C] vector
            assert fused.node(ref.node).attrs["value"].shape == (4,), label
        assert_same_results(graph, fused, [last], feeds)


def test_post_activation_steps_that_are_not_per_channel_stay() -> None:
    feeds = {"x": _x(2, 6, 6, 3, seed=5), "s": _x(4, seed=7)}
    cases = {
        "fed scale": ([*(n for n in _post_affine(add="") if n.name != "scale"),
                       placeholder("s")], "s"),
        "varies along W": (_post_affine(add="", scale=_x(6, 4, seed=3)), None),
        "vector on another axis": (_post_affine(add="", scale=_x(6, 1, 1, seed=3)), None),
        "rank above the output's": (_post_affine(add="", scale=_x(1, 1, 1, 1, 4, seed=3)), None),
        "integer-typed scale": (_post_affine(add="", scale=np.arange(4, dtype=np.int32)), None),
    }
    for label, (nodes, fed) in cases.items():
        nodes = [n if n.name != "mul" else op("mul", "Mul", "act", fed or "scale", T=F32)
                 for n in nodes]
        graph = Graph(nodes)
        ctx = context("mul")
        fused = fuse_patterns(graph, ctx)
        assert fused.node("mul").op == "Mul", label
        assert list(fused.node("act").attrs["fused_ops"]) == ["BiasAdd", "Relu"], label
        if label != "integer-typed scale":  # (that one does not type-check at all)
            used = {k: v for k, v in feeds.items() if k in graph}
            assert_same_results(graph, fused, ["mul"], used)
    # A protected activation, or a scale read elsewhere too, keeps the Mul out.
    graph = Graph(_post_affine())
    assert fuse_patterns(graph, context("out", "act")).node("out").op == "AddV2"
    shared = Graph([*_post_affine(), op("side", "Neg", "mul", T=F32)])
    after = fuse_patterns(shared, context("out", "side"))
    assert after.node("mul").op == "_FusedConv2D" and after.node("out").op == "AddV2"


def test_channels_first_convolutions_keep_their_affine() -> None:
    graph = Graph(_post_affine(data_format="NCHW"))
    after = fuse_patterns(graph, context("out"))
    assert _ops(after) == _ops(graph)
    nodes = _post_affine("Conv2DBackpropInput", data_format="NCHW")
    graph = Graph(nodes)
    after = fuse_patterns(graph, context("out"))
    assert after.node("out").op == "AddV2" and after.node("base").op == "Conv2DBackpropInput"


def test_transposed_convolution_fuses_its_bias_and_activation() -> None:
    nodes = [n for n in _post_affine("Conv2DBackpropInput", mul="", add="")]
    graph = Graph(nodes)
    ctx = context("act")
    fused = prune_to_protected(fuse_patterns(graph, ctx), ctx)
    assert fused.node("act").op == "_FusedConv2DBackpropInput"
    assert list(fused.node("act").attrs["fused_ops"]) == ["BiasAdd", "Relu"]
    feeds = {"x": _x(3, 3, 3, 3, seed=5), "sizes": np.array([3, 5, 6, 4], np.int32)}
    assert_same_results(graph, fused, ["act"], feeds)
    protected = prune_to_protected(fuse_patterns(graph, context("act", "ba")), context("act", "ba"))
    assert protected.node("ba").op == "_FusedConv2DBackpropInput"
    assert list(protected.node("ba").attrs["fused_ops"]) == ["BiasAdd"]
    assert_same_results(graph, protected, ["act", "ba"], feeds)


# an affine after an activation moves past a max pool and into the next linear op


def _bn_then(tail: list[Node], scale: Any = None, shift: Any = None, channels: int = 4,
             known_channels: int | None = None) -> list[Node]:
    """x -> Relu -> Mul(scale) -> AddV2(shift) -> tail (which reads "bn")."""
    known = channels if known_channels is None else known_channels
    return [
        placeholder("x"),
        const("scale", _x(channels, seed=3) ** 2 + 0.1 if scale is None else scale),
        const("shift", _x(channels, seed=4) if shift is None else shift),
        op("act", "Relu", "x", T=F32, _output_shapes=[(-1, -1, -1, known)]),
        op("mul", "Mul", "act", "scale", T=F32),
        op("bn", "AddV2", "mul", "shift", T=F32),
        *tail,
    ]


def _pool(**attrs: Any) -> Node:
    base = {"T": F32, "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    return op("pool", "MaxPool", "bn", **{**base, **attrs})


def test_affine_moves_past_a_max_pool() -> None:
    graph = Graph(_bn_then([_pool()]))
    after = move_affine_past_max_pool(graph, context("pool"))
    assert after.node("pool").op == "AddV2" and after.node("mul").op == "Mul"
    pooled = after.node(after.node("mul").inputs[0].node)
    assert pooled.op == "MaxPool" and pooled.inputs == [TensorRef("act")]
    x = _x(2, 6, 7, 4, seed=5) * 10
    x[0, 0, 0, 0], x[0, 2, 2, 1], x[1, 3, 3, 2] = np.nan, np.inf, -np.inf
    for feed in (x, -x):
        before_values = run(graph, ["pool"], {"x": feed})[0]
        np.testing.assert_array_equal(run(after, ["pool"], {"x": feed})[0], before_values)
    same = Graph(_bn_then([_pool(padding="SAME", strides=[1, 1, 1, 1], ksize=[1, 3, 3, 1])]))
    moved = move_affine_past_max_pool(same, context("pool"))
    assert moved.node("pool").op == "AddV2"
    np.testing.assert_array_equal(run(moved, ["pool"], {"x": x})[0],
                                  run(same, ["pool"], {"x": x})[0])


def test_affine_stays_before_a_max_pool_it_does_not_commute_with() -> None:
    cases = {
        "negative scale": _bn_then([_pool()], scale=np.array([1, -1, 2, 3], np.float32)),
        "zero scale": _bn_then([_pool()], scale=np.array([1, 0, 2, 3], np.float32)),
        "infinite shift": _bn_then([_pool()], shift=np.array([1, np.inf, 2, 3], np.float32)),
        "channels first": _bn_then([_pool(data_format="NCHW")]),
        "pooling across channels": _bn_then([_pool(ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2])]),
        "scale varies along W": _bn_then([_pool()], scale=_x(7, 4, seed=3) ** 2),
        "one input channel": _bn_then([_pool()], known_channels=1),
        "unknown channels": _bn_then([_pool()], known_channels=-1),
        "shared affine": _bn_then([_pool(), op("side", "Neg", "bn", T=F32)]),
    }
    for label, nodes in cases.items():
        graph = Graph(nodes)
        protected = ("pool", "side") if "side" in graph else ("pool",)
        after = move_affine_past_max_pool(graph, context(*protected))
        assert after.node("pool").op == "MaxPool", label
    graph = Graph(_bn_then([_pool()]))
    assert move_affine_past_max_pool(graph, context("pool", "mul")).node("pool").op == "MaxPool"


def _consumer(op_type: str = "Conv2D", padding: str = "VALID", ksize: int = 3,
              **attrs: Any) -> list[Node]:
    if op_type == "MatMul":
        transpose = attrs.get("transpose_b", False)
        weights = _x(*((5, 4) if transpose else (4, 5)), seed=6)
        return [const("w", weights), op("out", "MatMul", "bn", "w", T=F32, **attrs)]
    weights = _x(ksize, ksize, 4, 5 if op_type == "Conv2D" else 2, seed=6)
    return [const("w", weights),
            op("out", op_type, "bn", "w", T=F32, strides=[1, 2, 2, 1], padding=padding, **attrs)]


@pytest.mark.parametrize("label, tail, feed", [
    ("conv valid", _consumer(), (2, 7, 8, 4)),
    ("conv 1x1 same", _consumer(padding="SAME", ksize=1), (2, 7, 8, 4)),
    ("conv explicit zeros", _consumer(padding="EXPLICIT", explicit_paddings=[0] * 8), (2, 7, 8, 4)),
    ("depthwise valid", _consumer("DepthwiseConv2dNative"), (2, 7, 8, 4)),
    ("dense", _consumer("MatMul"), (3, 4)),
    ("dense, transposed weights", _consumer("MatMul", transpose_b=True), (3, 4)),
])
def test_affine_folds_into_the_linear_op_after_it(label, tail, feed) -> None:
    nodes = _bn_then(tail)
    if len(feed) == 2:
        nodes = [n if n.name != "act" else op("act", "Relu", "x", T=F32, _output_shapes=[(-1, 4)])
                 for n in nodes]
    graph = Graph(nodes)
    ctx = context("out")
    folded = fold_affine_into_consumer(graph, ctx)
    assert folded.node("out").op == "BiasAdd", label
    product = folded.node(folded.node("out").inputs[0].node)
    assert product.inputs[0] == TensorRef("act"), label
    assert not {"Mul", "AddV2"} & set(_ops(prune_to_protected(folded, ctx)))
    feeds = {"x": _x(*feed, seed=5)}
    assert_same_results(graph, folded, ["out"], feeds)
    # Affine folding then merges the new bias with what follows, and fusion takes it in.
    done = optimize_for_serving(graph, [TensorRef("out")], ResourceManager())
    assert_same_results(graph, done, ["out"], feeds)
    assert not {"Mul", "AddV2", "BiasAdd", "Conv2D", "MatMul"} & set(_ops(done)), label
    assert len(done) == 5, label  # x, its ReLU, weights, bias and the fused product


def test_batch_norm_before_the_activation_still_folds_backwards() -> None:
    # conv -> batch norm -> max pool -> conv: the batch norm belongs in the first convolution's
    # weights, not moved past the pool.
    nodes = [
        *_conv(), const("scale", _x(4, seed=3) ** 2), const("shift", _x(4, seed=4)),
        op("mul", "Mul", "conv", "scale", T=F32, _output_shapes=[(-1, -1, -1, 4)]),
        op("bn", "AddV2", "mul", "shift", T=F32, _output_shapes=[(-1, -1, -1, 4)]),
        _pool(), const("w2", _x(3, 3, 4, 2, seed=6)),
        op("out", "Conv2D", "pool", "w2", T=F32, strides=[1, 1, 1, 1], padding="SAME"),
    ]
    nodes = [n if n.name != "conv" else n.copy(attrs={**n.attrs, "_output_shapes": [
        (-1, -1, -1, 4)]}) for n in nodes]
    graph = Graph(nodes)
    done = optimize_for_serving(graph, [TensorRef("out")], ResourceManager())
    assert _ops(done) == Counter({"Placeholder": 1, "Const": 3, "_FusedConv2D": 1, "MaxPool": 1,
                                  "Conv2D": 1})
    pool = next(n for n in done if n.op == "MaxPool")
    assert done.node(pool.inputs[0].node).op == "_FusedConv2D"
    assert_same_results(graph, done, ["out"], {"x": _x(2, 6, 6, 3, seed=5)})


def test_a_scale_alone_folds_into_a_padded_convolution() -> None:
    nodes = [n for n in _bn_then(_consumer(padding="SAME")) if n.name not in ("bn", "shift")]
    nodes = [n if n.name != "out" else n.copy(inputs=[TensorRef("mul"), TensorRef("w")])
             for n in nodes]
    graph = Graph(nodes)
    folded = fold_affine_into_consumer(graph, context("out"))
    assert folded.node("out").op == "Conv2D" and folded.node("out").inputs[0] == TensorRef("act")
    assert_same_results(graph, folded, ["out"], {"x": _x(2, 7, 8, 4, seed=5)})


def test_affine_stays_where_the_linear_op_cannot_absorb_it() -> None:
    cases = {
        # Padding adds zeros after the shift: the border would change.
        "padded convolution": (_bn_then(_consumer(padding="SAME")), "AddV2"),
        "fed weights": ([*(n for n in _bn_then(_consumer()) if n.name != "w"),
                         placeholder("w")], "AddV2"),
        "channel broadcast": (_bn_then(_consumer(), known_channels=1), "AddV2"),
        "unknown channels": (_bn_then(_consumer(), known_channels=-1), "AddV2"),
        "channels first": (_bn_then(_consumer(data_format="NCHW")), "AddV2"),
        "transposed input": (_bn_then(_consumer("MatMul", transpose_a=True)), "AddV2"),
        "overflowing weights": (_bn_then(_consumer(), scale=np.full(4, 3e38, np.float32)), "Mul"),
    }
    for label, (nodes, stays) in cases.items():
        graph = Graph(nodes)
        after = fold_affine_into_consumer(graph, context("out"))
        assert after.node("out").op == graph.node("out").op, label
        assert stays in _ops(after), label
    graph = Graph(_bn_then(_consumer()))
    protected = fold_affine_into_consumer(graph, context("out", "mul"))
    assert protected.node("out").op == "Conv2D" and protected.node("out").inputs[0] == TensorRef("bn")


# tf.repeat by a constant count


def _repeat(x: str, axis: int, k: int, name: str, rank: int = 4, dim: int | None = None,
            multiples: Sequence[int] | None = None, target_axis: int | None = None) -> list[Node]:
    """``tf.repeat(x, k, axis)`` as TensorFlow exports it for a scalar ``k``."""
    i32 = DataType.DT_INT32
    counts = [1] * (rank + 1)
    counts[axis + 1] = k
    scaled = axis if target_axis is None else target_axis
    slices = {"T": i32, "Index": i32}
    return [
        const(f"{name}/dim", axis + 1 if dim is None else dim, np.int32),
        const(f"{name}/multiples", counts if multiples is None else list(multiples), np.int32),
        const(f"{name}/k", k, np.int32), const(f"{name}/axis0", 0, np.int32),
        const(f"{name}/a", [scaled], np.int32), const(f"{name}/a1", [scaled + 1], np.int32),
        const(f"{name}/one", [1], np.int32),
        op(f"{name}/shape", "Shape", x, T=F32, _output_shapes=[(rank,)]),
        op(f"{name}/expand", "ExpandDims", x, f"{name}/dim", T=F32),
        op(f"{name}/tile", "Tile", f"{name}/expand", f"{name}/multiples", T=F32),
        op(f"{name}/head", "StridedSlice", f"{name}/shape", f"{name}/a", f"{name}/a",
           f"{name}/one", begin_mask=1, **slices),
        op(f"{name}/dim_size", "StridedSlice", f"{name}/shape", f"{name}/a", f"{name}/a1",
           f"{name}/one", shrink_axis_mask=1, **slices),
        op(f"{name}/scaled", "Mul", f"{name}/k", f"{name}/dim_size", T=i32),
        op(f"{name}/packed", "Pack", f"{name}/scaled", T=i32, N=1),
        op(f"{name}/tail", "StridedSlice", f"{name}/shape", f"{name}/a1", f"{name}/a",
           f"{name}/one", end_mask=1, **slices),
        op(f"{name}/target", "ConcatV2", f"{name}/head", f"{name}/packed", f"{name}/tail",
           f"{name}/axis0", T=i32, N=3),
        op(name, "Reshape", f"{name}/tile", f"{name}/target", T=F32),
    ]


def test_nearest_upsampling_becomes_one_repeat() -> None:
    graph = Graph([placeholder("x"), *_repeat("x", 1, 2, "rows"),
                   *_repeat("rows", 2, 3, "cols"), op("out", "Neg", "cols", T=F32)])
    ctx = context("out")
    after = prune_to_protected(fuse_repeats(graph, ctx), ctx)
    assert after.node("cols").op == "_RepeatAxes" and after.node("cols").inputs == [TensorRef("x")]
    assert after.node("cols").attrs["repeats"] == (1, 2, 3, 1)
    assert _ops(after) == Counter({"Placeholder": 1, "_RepeatAxes": 1, "Neg": 1})
    for shape in ((2, 3, 4, 3), (1, 1, 1, 1), (0, 2, 2, 5)):
        assert_same_results(graph, after, ["out"], {"x": _x(*shape)})
    # The rows repeat is fetched too: both stay, each one node.
    both = prune_to_protected(fuse_repeats(graph, context("out", "rows")), context("out", "rows"))
    assert both.node("rows").attrs["repeats"] == (1, 2, 1, 1)
    assert both.node("cols").attrs["repeats"] == (1, 1, 3, 1)
    assert both.node("cols").inputs == [TensorRef("rows")]
    assert_same_results(graph, both, ["out", "rows"], {"x": _x(2, 3, 4, 3)})


def test_repeat_rewrite_needs_proof() -> None:
    cases = {
        "tiled on two axes": _repeat("x", 1, 2, "r", multiples=(1, 1, 2, 2, 1)),
        "target scales another axis": _repeat("x", 1, 2, "r", target_axis=2),
        "expanded elsewhere": _repeat("x", 1, 2, "r", dim=1),
    }
    for label, nodes in cases.items():
        graph = Graph([placeholder("x"), *nodes, op("out", "Neg", "r", T=F32)])
        assert fuse_repeats(graph, context("out")).node("r").op == "Reshape", label
    graph = Graph([placeholder("x"), *_repeat("x", 1, 2, "r"), op("out", "Neg", "r", T=F32),
                   op("side", "Neg", "r/tile", T=F32)])
    assert fuse_repeats(graph, context("out", "side")).node("r").op == "Reshape"


# a zero Pad before a convolution


def _padded_conv(pads: Sequence[Sequence[int]], op_type: str = "Conv2D", pad_op: str = "Pad",
                 fill: float = 0.0, data_format: str = "NHWC", padding: str = "VALID",
                 explicit: Sequence[int] = ()) -> list[Node]:
    weights = _x(3, 3, 4, 2 if op_type == "Conv2D" else 1, seed=1)
    pad_inputs = ["x", "pads", "fill"] if pad_op == "PadV2" else ["x", "pads"]
    strides = [1, 2, 2, 1] if data_format == "NHWC" else [1, 1, 2, 2]
    return [
        placeholder("x"), const("w", weights), const("pads", list(pads), np.int32),
        const("fill", fill, np.float32), const("bias", _x(weights.shape[3] * (
            1 if op_type == "Conv2D" else 4), seed=2)),
        op("pad", pad_op, *pad_inputs, T=F32),
        op("conv", op_type, "pad", "w", T=F32, strides=strides, padding=padding,
           data_format=data_format, explicit_paddings=list(explicit)),
        op("biased", "BiasAdd", "conv", "bias", T=F32, data_format=data_format),
        op("out", "Relu", "biased", T=F32),
    ]


@pytest.mark.parametrize("case", [
    {"pads": [[0, 0], [1, 1], [0, 1], [0, 0]]},
    {"pads": [[0, 0], [2, 0], [1, 2], [0, 0]], "op_type": "DepthwiseConv2dNative",
     "pad_op": "PadV2"},
    {"pads": [[0, 0], [1, 0], [0, 1], [0, 0]], "padding": "EXPLICIT",
     "explicit": [0, 0, 1, 1, 2, 0, 0, 0]},
    {"pads": [[0, 0], [0, 0], [1, 1], [1, 1]], "data_format": "NCHW"},
], ids=["conv", "depthwise_padv2", "added_to_explicit", "nchw"])
def test_zero_pad_becomes_the_convolutions_padding(case: dict[str, Any]) -> None:
    graph = Graph(_padded_conv(**case))
    ctx = context("out")
    folded = prune_to_protected(fold_pads_into_convs(graph, ctx), ctx)
    assert "pad" not in folded and folded.node("conv").inputs[0] == TensorRef("x")
    assert folded.node("conv").attrs["padding"] == "EXPLICIT"
    shape = (2, 7, 8, 4) if case.get("data_format", "NHWC") == "NHWC" else (2, 4, 7, 8)
    feeds = {"x": _x(*shape, seed=3)}
    assert_same_results(graph, folded, ["out"], feeds)
    if case.get("data_format", "NHWC") == "NHWC":  # the fused kernels are NHWC only
        fused = fuse_patterns(folded, ctx)
        assert fused.node("out").op.startswith("_Fused")
        assert_same_results(graph, fused, ["out"], feeds)


def test_pads_that_are_not_the_convolutions_stay() -> None:
    spatial = [[0, 0], [1, 1], [1, 1], [0, 0]]
    cases = {
        "channels padded": _padded_conv([[0, 0], [1, 1], [1, 1], [0, 1]]),
        "batch padded": _padded_conv([[1, 0], [1, 1], [1, 1], [0, 0]]),
        "filled with ones": _padded_conv(spatial, pad_op="PadV2", fill=1.0),
        "SAME convolution": _padded_conv(spatial, padding="SAME"),
        "pad read twice": [*_padded_conv(spatial), op("side", "Neg", "pad", T=F32)],
    }
    for label, nodes in cases.items():
        graph = Graph(nodes)
        after = fold_pads_into_convs(graph, context("out"))
        assert after.node("conv").inputs[0] == TensorRef("pad"), label
    graph = Graph(_padded_conv(spatial))
    assert fold_pads_into_convs(graph, context("out", "pad")).node("conv").inputs[0] == \
        TensorRef("pad")
