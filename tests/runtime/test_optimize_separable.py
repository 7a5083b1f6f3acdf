"""A depthwise convolution read only by a 1x1 convolution fuses with it into
``_FusedSeparableConv2D``, which answers what the two kernels answer, on one thread and spread
over several, in chunks of rows and grouped for the product; every other pair stays apart."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtime import intra_op
from runtime.errors import InvalidArgumentError
from runtime.graph import Graph, Node
from runtime.kernels.nn_ops_common import window
from runtime.kernels.nn_ops_depthwise import DepthwiseShape, DepthwiseTaps
from runtime.kernels.nn_ops_separable import product_runs
from runtime.kernels.registry import instantiate
from runtime.optimize.fusion import fuse_patterns
from runtime.optimize.prune import prune_to_protected
from runtime.optimize.separable import fuse_separable_convs
from tests.runtime.test_optimize import F32, assert_same_results, const, context, op, placeholder

RNG = np.random.default_rng(5)


def _values(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _pair(c: int = 24, o: int = 40, multiplier: int = 1, strides: int = 1,
          padding: str = "SAME", dw_tail: tuple[str, ...] = ("BiasAdd", "Relu6"),
          pw_tail: tuple[str, ...] = ("BiasAdd", "Relu"), pw_kernel: int = 1,
          pw_strides: int = 1, dilations: int = 1, k: int = 3) -> list[Node]:
    """x -> depthwise [-> BiasAdd -> act] -> 1x1 conv [-> BiasAdd -> act] -> out."""
    nodes = [placeholder("x"), const("dw_filter", _values(k, k, c, multiplier)),
             const("pw_filter", _values(pw_kernel, pw_kernel, c * multiplier, o)),
             const("dw_bias", _values(c * multiplier)), const("pw_bias", _values(o)),
             op("dw", "DepthwiseConv2dNative", "x", "dw_filter", T=F32,
                strides=[1, strides, strides, 1], padding=padding,
                dilations=[1, dilations, dilations, 1])]
    last = "dw"
    for step in dw_tail:
        args = [last, "dw_bias"] if step == "BiasAdd" else [last]
        nodes.append(op(f"dw_{step}", step, *args, T=F32))
        last = f"dw_{step}"
    nodes.append(op("pw", "Conv2D", last, "pw_filter", T=F32,
                    strides=[1, pw_strides, pw_strides, 1], padding="VALID"))
    last = "pw"
    for step in pw_tail:
        args = [last, "pw_bias"] if step == "BiasAdd" else [last]
        nodes.append(op(f"pw_{step}", step, *args, T=F32))
        last = f"pw_{step}"
    nodes.append(op("out", "Identity", last, T=F32))
    return nodes


def _optimized(graph: Graph) -> Graph:
    ctx = context("out")
    return prune_to_protected(fuse_separable_convs(fuse_patterns(graph, ctx), ctx), ctx)


FUSED_CASES: dict[str, dict[str, Any]] = {
    "mobilenet_block": {},
    "keras_separable_no_bias": {"dw_tail": (), "pw_tail": ()},
    "strided_valid": {"strides": 2, "padding": "VALID", "dw_tail": ("BiasAdd",)},
    "dilated_sigmoid": {"dilations": 2, "dw_tail": (), "pw_tail": ("BiasAdd", "Sigmoid")},
    "five_by_five_leaky": {"k": 5, "strides": 2, "dw_tail": ("BiasAdd", "LeakyRelu"),
                           "pw_tail": ("BiasAdd",)},
}


@pytest.mark.parametrize("case", FUSED_CASES, ids=list(FUSED_CASES))
@pytest.mark.parametrize("shape", [(1, 30, 26), (3, 9, 11)], ids=["one_image", "three_images"])
@pytest.mark.parametrize("threads", [1, 4])
def test_pairs_fuse_and_answer_what_the_two_kernels_answer(
        case: str, shape: tuple[int, int, int], threads: int) -> None:
    graph = Graph(_pair(**FUSED_CASES[case]))
    fused = _optimized(graph)
    separable = [n for n in fused if n.op == "_FusedSeparableConv2D"]
    assert len(separable) == 1 and "dw" not in fused
    assert fused.node("out").inputs[0].node == separable[0].name
    n, h, w = shape
    feeds = {"x": _values(n, h, w, 24)}
    intra_op.set_threads(threads)
    try:
        # More threads than cores: the groups run in every order; scratch reused between calls.
        for _ in range(3):
            assert_same_results(graph, fused, ["out"], feeds)
    finally:
        intra_op.set_threads(1)


@pytest.mark.parametrize("threads", [1, 4])
def test_chunks_of_rows_are_grouped_into_products(threads: int) -> None:
    # Rows of 64 x 2048 values: the depthwise takes chunks of 2 rows (1 MiB), too few for a
    # product, so groups of 4 chunks (512 rows of the product) each make one.
    graph = Graph(_pair(c=2048, o=16, dw_tail=("BiasAdd",)))
    fused = _optimized(graph)
    feeds = {"x": _values(1, 16, 64, 2048)}
    rows, cols = (window(size, 3, 1, 1, "SAME") for size in (16, 64))
    algorithm = DepthwiseTaps(DepthwiseShape(1, 16, 64, 2048, 3, 3, 1, (1, 1), (1, 1), rows,
                                             cols, np.dtype(np.float32)))
    cut = algorithm.chunking(threads, threads > 1)
    assert len(cut.chunks) == 8
    assert product_runs(cut.chunks, 64, threads, threads > 1) == (
        [(0, 4), (4, 8)] if threads == 1 else [(0, 2), (2, 4), (4, 6), (6, 8)])
    intra_op.set_threads(threads)
    try:
        assert_same_results(graph, fused, ["out"], feeds)
    finally:
        intra_op.set_threads(1)


STAYING: dict[str, list[Node]] = {
    "few_channels": _pair(c=8),
    "channel_multiplier": _pair(multiplier=2),
    "pointwise_3x3": _pair(pw_kernel=3),
    "pointwise_strided": _pair(pw_strides=2),
    "depthwise_read_twice": [*_pair(), op("side", "Neg", "dw_Relu6", T=F32)],
}


@pytest.mark.parametrize("label", STAYING, ids=list(STAYING))
def test_other_pairs_stay_apart(label: str) -> None:
    nodes = STAYING[label]
    ctx = context("out", "side") if label == "depthwise_read_twice" else context("out")
    after = fuse_separable_convs(fuse_patterns(Graph(nodes), ctx), ctx)
    assert not [n for n in after if n.op == "_FusedSeparableConv2D"], label


def test_a_fetched_depthwise_output_stays() -> None:
    ctx = context("out", "dw_Relu6")
    after = fuse_separable_convs(fuse_patterns(Graph(_pair()), ctx), ctx)
    assert not [n for n in after if n.op == "_FusedSeparableConv2D"]


def _kernel(**attrs: Any) -> Any:
    base = {"strides": [1, 1, 1, 1], "padding": "SAME", "T": F32,
            "depthwise_fused_ops": ["BiasAdd", "Relu6"], "num_depthwise_args": 1,
            "fused_ops": ["BiasAdd"], "num_args": 1}
    return instantiate("_FusedSeparableConv2D", {**base, **attrs})


def test_other_dtypes_run_the_two_convolutions_one_after_the_other() -> None:
    x, fd, bd = _values(2, 9, 9, 20), _values(3, 3, 20, 1), _values(20)
    fp, bp = _values(1, 1, 20, 7), _values(7)
    want = _kernel()(x, fd, bd, fp, bp)
    got = _kernel()(*(a.astype(np.float64) for a in (x, fd, bd, fp, bp)))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    depthwise = instantiate("_FusedDepthwiseConv2dNative", {
        "strides": [1, 1, 1, 1], "padding": "SAME", "T": F32, "fused_ops": ["BiasAdd", "Relu6"],
        "num_args": 1})
    pointwise = instantiate("_FusedConv2D", {
        "strides": [1, 1, 1, 1], "padding": "VALID", "T": F32, "fused_ops": ["BiasAdd"],
        "num_args": 1})
    np.testing.assert_allclose(want, pointwise(depthwise(x, fd, bd), fp, bp), rtol=1e-5,
                               atol=1e-5)


def test_a_call_with_missing_inputs_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="expected 5 inputs, got 4"):
        _kernel()(_values(1, 5, 5, 16), _values(3, 3, 16, 1), _values(16),
                  _values(1, 1, 16, 4))
