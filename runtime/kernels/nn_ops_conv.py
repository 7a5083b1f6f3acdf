"""2-D convolution kernels: Conv2D, DepthwiseConv2dNative, Conv2DBackpropInput and the fused forms.

The kernels validate, pick an algorithm once per input shape (``nn_ops_conv_gemm``,
``nn_ops_depthwise``, ``nn_ops_conv_transpose``) and remember the filter in the layout that
algorithm multiplies with while the filter is a constant. Inputs are NHWC internally; NCHW nodes
are transposed in and out. Half-precision types compute in float32, as TensorFlow's CPU kernels
accumulate them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from runtime.errors import InternalError, InvalidArgumentError, UnimplementedError
from runtime.kernels.clamps import relu_
from runtime.kernels.math_ops_common import FLOAT32, Kernel
from runtime.kernels.nn_ops_activation import fused_activation
from runtime.kernels.nn_ops_common import (
    LOW_FLOATS,
    Derived,
    Window,
    channels_last,
    check_padding,
    explicit_pads,
    spatial_pair,
    to_nchw,
    to_nhwc,
    window,
)
from runtime.kernels.nn_ops_conv_gemm import (
    Activation,
    ConvAlgorithm,
    ConvShape,
    Weights,
    choose,
)
from runtime.kernels.nn_ops_conv_transpose import TransposeConv, TransposeWeights
from runtime.kernels.nn_ops_conv_winograd import Winograd
from runtime.kernels.nn_ops_conv_winograd import applies as winograd_applies
from runtime.kernels.nn_ops_depthwise import (
    Depthwise,
    DepthwiseShape,
    DepthwiseTaps,
    choose_depthwise,
)
from runtime.kernels.nn_ops_fused import Epilogue, bias_arg, build_epilogue
from runtime.kernels.registry import NodeContext, kernel

# Input shapes remembered per kernel (a node sees a few batch sizes).
_PLANS_PER_KERNEL = 16


@dataclass(frozen=True)
class ConvAttrs:
    nhwc: bool
    strides: tuple[int, int]
    dilations: tuple[int, int]
    padding: str
    explicit: tuple[tuple[int, int], tuple[int, int]]

    @classmethod
    def of(cls, node: NodeContext) -> ConvAttrs:
        nhwc = channels_last(node)
        padding = check_padding(node)
        explicit = ((0, 0), (0, 0))
        if padding == "EXPLICIT":
            explicit = explicit_pads(node.attr("explicit_paddings"), nhwc, node.op)
        strides = spatial_pair(node.attr("strides"), nhwc, "strides", node.op)
        dilations = spatial_pair(node.attr("dilations", [1, 1, 1, 1]), nhwc, "dilations", node.op)
        return cls(nhwc, strides, dilations, padding, explicit)

    def geometry(self, h: int, w: int, kh: int, kw: int) -> tuple[Window, Window]:
        rows = window(h, kh, self.strides[0], self.dilations[0], self.padding, self.explicit[0])
        cols = window(w, kw, self.strides[1], self.dilations[1], self.padding, self.explicit[1])
        return rows, cols


def _check_4d(op: str, x: np.ndarray, f: np.ndarray) -> None:
    if x.ndim != 4:
        raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got {list(x.shape)}")
    if f.ndim != 4:
        raise InvalidArgumentError(f"{op}: filter must be 4-dimensional, got {list(f.shape)}")


def _compute_dtype(*dtypes: np.dtype) -> np.dtype:
    if any(d in LOW_FLOATS for d in dtypes):
        return FLOAT32
    return np.result_type(*dtypes)


P = TypeVar("P")


class _Plans(Generic[P]):
    """A kernel's plans by input shape, built on first sight of a shape."""

    def __init__(self, build: Callable[..., P]) -> None:
        self._build = build
        self._plans: dict[Hashable, P] = {}

    def get(self, *key: Any) -> P:
        plan = self._plans.get(key)
        if plan is None:
            plan = self._build(*key)
            if len(self._plans) >= _PLANS_PER_KERNEL:
                self._plans.clear()
            self._plans[key] = plan
        return plan


# --- Conv2D ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ConvPlan:
    groups: int
    depth: int  # input channels per group
    width: int  # output channels per group
    dtype: np.dtype
    algorithm: ConvAlgorithm

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> list[Weights]:
        f = f.astype(self.dtype, copy=False)
        if bias is not None:
            bias = bias.astype(self.dtype, copy=False)
        w = self.width
        return [
            self.algorithm.prepare(f[..., g * w:(g + 1) * w],
                                   None if bias is None else bias[g * w:(g + 1) * w])
            for g in range(self.groups)
        ]

    def run(self, x: np.ndarray, weights: list[Weights], activation: Activation) -> np.ndarray:
        x = x.astype(self.dtype, copy=False)
        if self.groups == 1:
            return self.algorithm(x, weights[0], activation)
        d = self.depth
        parts = [self.algorithm(x[..., g * d:(g + 1) * d], weights[g], activation)
                 for g in range(self.groups)]
        return np.concatenate(parts, axis=-1)


def _conv_plan(attrs: ConvAttrs, op: str, x_shape: tuple[int, ...], f_shape: tuple[int, ...],
               x_dtype: np.dtype, f_dtype: np.dtype) -> _ConvPlan:
    n, h, w, c = x_shape
    kh, kw, fc, o = f_shape
    if fc == 0 or c % fc:
        raise InvalidArgumentError(
            f"{op}: input depth must be evenly divisible by filter depth: {c} vs {fc}"
        )
    groups = c // fc
    if o % groups:
        raise InvalidArgumentError(
            f"{op}: output depth must be evenly divisible by number of groups: {o} vs {groups}"
        )
    rows, cols = attrs.geometry(h, w, kh, kw)
    dtype = _compute_dtype(x_dtype, f_dtype)
    shape = ConvShape(n, h, w, fc, kh, kw, o // groups, attrs.strides, attrs.dilations, rows, cols,
                      dtype)
    algorithm = Winograd(shape) if winograd_applies(shape) else choose(shape)
    return _ConvPlan(groups, fc, o // groups, dtype, algorithm)


# (NHWC input, filter, bias or None, activation) -> NHWC output in the compute dtype, a fresh
# array
ConvCore = Callable[[np.ndarray, np.ndarray, "np.ndarray | None", Activation], np.ndarray]


def conv_core(node: NodeContext, attrs: ConvAttrs) -> ConvCore:
    op = node.op
    plans: _Plans[_ConvPlan] = _Plans(lambda *key: _conv_plan(attrs, op, *key))
    weights = Derived()

    def run(x: np.ndarray, f: np.ndarray, bias: np.ndarray | None,
            activation: Activation) -> np.ndarray:
        _check_4d(op, x, f)
        plan = plans.get(x.shape, f.shape, x.dtype, f.dtype)
        if bias is None:
            prepared = weights.get((f,), (plan.algorithm.filter_key, plan.dtype),
                                   lambda: plan.prepare(f, None))
        else:
            b = bias_arg((bias,), plan.groups * plan.width)
            prepared = weights.get((f, b), (plan.algorithm.filter_key, plan.dtype),
                                   lambda: plan.prepare(f, b))
        return plan.run(x, prepared, activation)

    return run


# --- DepthwiseConv2dNative ---------------------------------------------------------------------


@dataclass(frozen=True)
class _DepthwisePlan:
    dtype: np.dtype
    algorithm: Depthwise | DepthwiseTaps


def _depthwise_plan(attrs: ConvAttrs, op: str, x_shape: tuple[int, ...],
                    f_shape: tuple[int, ...], x_dtype: np.dtype,
                    f_dtype: np.dtype) -> _DepthwisePlan:
    n, h, w, c = x_shape
    kh, kw, fc, m = f_shape
    if fc != c:
        raise InvalidArgumentError(
            f"{op}: input and filter must have the same depth: {c} vs {fc}"
        )
    rows, cols = attrs.geometry(h, w, kh, kw)
    dtype = _compute_dtype(x_dtype, f_dtype)
    shape = DepthwiseShape(n, h, w, c, kh, kw, m, attrs.strides, attrs.dilations, rows, cols,
                           dtype)
    return _DepthwisePlan(dtype, choose_depthwise(shape))


def depthwise_core(node: NodeContext, attrs: ConvAttrs) -> ConvCore:
    op = node.op
    plans: _Plans[_DepthwisePlan] = _Plans(lambda *key: _depthwise_plan(attrs, op, *key))
    weights = Derived()

    def run(x: np.ndarray, f: np.ndarray, bias: np.ndarray | None,
            activation: Activation) -> np.ndarray:
        _check_4d(op, x, f)
        plan = plans.get(x.shape, f.shape, x.dtype, f.dtype)
        algorithm, dtype = plan.algorithm, plan.dtype
        arrays: tuple[np.ndarray, ...] = (f,)
        if bias is not None:
            bias = bias_arg((bias,), f.shape[2] * f.shape[3])
            arrays = (f, bias)

        def prepare() -> Weights:
            b = None if bias is None else bias.astype(dtype, copy=False)
            return algorithm.prepare(f.astype(dtype, copy=False), b)

        prepared = weights.get(arrays, (algorithm.filter_key, dtype), prepare)
        return algorithm(x.astype(dtype, copy=False), prepared, activation)

    return run


# --- kernels -----------------------------------------------------------------------------------


CoreFactory = Callable[[NodeContext, ConvAttrs], ConvCore]


def _nhwc_kernel(node: NodeContext, core_factory: CoreFactory) -> Kernel:
    attrs = ConvAttrs.of(node)
    core = core_factory(node, attrs)

    def run(x: np.ndarray, f: np.ndarray) -> np.ndarray:
        dtype = x.dtype
        y = core(x if attrs.nhwc else to_nhwc(x), f, None, None).astype(dtype, copy=False)
        return y if attrs.nhwc else to_nchw(y)

    return run


@kernel("Conv2D")
def conv2d(node: NodeContext) -> Kernel:
    return _nhwc_kernel(node, conv_core)


@kernel("DepthwiseConv2dNative")
def depthwise_conv2d(node: NodeContext) -> Kernel:
    return _nhwc_kernel(node, depthwise_core)


def block_activation(name: str, leakyrelu_alpha: float) -> Activation:
    """The in-place activation a convolution applies as it writes its output (None: none)."""
    if not name:
        return None
    if name == "Relu":
        return relu_  # the algorithms recognise it, and fold it into a copy they make anyway
    fn = fused_activation(name, leakyrelu_alpha)

    def in_place(y: np.ndarray) -> np.ndarray:
        result = fn(y)  # some activations return a new array
        if result is not y:
            np.copyto(y, result)
        return y

    return in_place


def _adding(side: np.ndarray, activation: Activation) -> Activation:
    """An in-place block activation that first adds the matching block of ``side``: the
    algorithms hand it views of their output array, which ``side`` matches in shape and layout,
    so a view's offset into that array is its block's offset into ``side``."""

    def block(y: np.ndarray) -> np.ndarray:
        out = y.base if y.base is not None else y
        if not isinstance(out, np.ndarray) or out.shape != side.shape or not out.flags.c_contiguous:
            raise InternalError("a fused side input needs blocks of the output array")
        offset = y.__array_interface__["data"][0] - out.__array_interface__["data"][0]
        part = np.ndarray(y.shape, y.dtype, side, offset, y.strides)
        np.add(y, part, out=y)
        return y if activation is None else activation(y)

    return block


def _fused_kernel(node: NodeContext, core_factory: CoreFactory, epilogue: Epilogue,
                  blocks_add_side_input: bool = False) -> Kernel:
    attrs = ConvAttrs.of(node)
    core = core_factory(node, attrs)
    apply, after_bias, side_input = epilogue.apply, epilogue.after_bias, epilogue.side_input
    post = epilogue.post
    alpha = float(node.attr("leakyrelu_alpha", 0.2))
    # BiasAdd, then nothing or an activation: the convolution does both as it stores each
    # block of its result.
    direct = epilogue.bias_then is not None
    activation = block_activation(epilogue.bias_then or "", alpha)
    # BiasAdd, Add (a residual connection) and nothing or an activation: the same, with the side
    # input's block added first, when it has the output's shape (else it broadcasts, after).
    adding = blocks_add_side_input and epilogue.bias_add_then is not None and attrs.nhwc
    add_activation = block_activation(epilogue.bias_add_then or "", alpha)

    def fits(x: np.ndarray, f: np.ndarray, side: np.ndarray) -> bool:
        """Whether ``side`` has the shape of a one-group convolution's output."""
        if x.ndim != 4 or f.ndim != 4 or x.shape[3] != f.shape[2]:
            return False
        rows, cols = attrs.geometry(x.shape[1], x.shape[2], f.shape[0], f.shape[1])
        return side.shape == (x.shape[0], rows.out, cols.out, f.shape[3])

    def run(x: np.ndarray, f: np.ndarray, *args: np.ndarray) -> np.ndarray:
        dtype = x.dtype
        if len(args) < epilogue.num_args:
            raise InvalidArgumentError(
                f"{node.op}: expected {epilogue.num_args} fused args, got {len(args)}"
            )
        if not attrs.nhwc:
            x = to_nhwc(x)
            if side_input is not None:
                args = args[:side_input] + (to_nhwc(args[side_input]),) + args[side_input + 1:]
        # The convolution's result is a fresh array: the epilogue may work in place on it.
        if adding and fits(x, f, args[1]):
            side = np.ascontiguousarray(args[1], dtype=_compute_dtype(x.dtype, f.dtype))
            y = core(x, f, args[0], _adding(side, add_activation))
        elif direct:
            y = core(x, f, args[0], activation)
            if post is not None:
                y = post(y, args)
        elif after_bias is not None:
            y = after_bias(core(x, f, args[0], None), args)
        else:
            y = apply(core(x, f, None, None), args)
        y = y.astype(dtype, copy=False)
        return y if attrs.nhwc else to_nchw(y)

    return run


@kernel("_FusedConv2D")
def fused_conv2d(node: NodeContext) -> Kernel:
    if node.attr("filter_format", "HWIO") != "HWIO":
        raise InvalidArgumentError("_FusedConv2D: filter_format must be HWIO on CPU",
                                   node=node.name, op=node.op)
    return _fused_kernel(node, conv_core, build_epilogue(node), blocks_add_side_input=True)


@kernel("_FusedDepthwiseConv2dNative")
def fused_depthwise_conv2d(node: NodeContext) -> Kernel:
    return _fused_kernel(node, depthwise_core, build_epilogue(node))


# --- Conv2DBackpropInput (transposed convolution) ----------------------------------------------


def _input_sizes(sizes: np.ndarray, f: np.ndarray, dy: np.ndarray, nhwc: bool) -> tuple[int, ...]:
    """(N, H, W, C) from ``input_sizes``: 4 values in the data format, or just the 2 spatial."""
    values = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if len(values) == 4:
        return tuple(values) if nhwc else (values[0], values[2], values[3], values[1])
    if len(values) == 2:
        batch = dy.shape[0]
        return (batch, values[0], values[1], f.shape[2])
    raise InvalidArgumentError(
        f"Conv2DBackpropInput: input_sizes must have 4 or 2 elements, got {values}"
    )


def _transpose_plan(attrs: ConvAttrs, sizes: tuple[int, int, int, int],
                    f_shape: tuple[int, ...], dy_shape: tuple[int, ...],
                    dtype: np.dtype) -> TransposeConv:
    op = "Conv2DBackpropInput"
    n, h, w, c = sizes
    kh, kw, fc, o = f_shape
    if fc != c:
        raise InvalidArgumentError(
            f"{op}: input depth {c} does not match the filter's input depth {fc}"
        )
    if min(sizes) < 0:
        raise InvalidArgumentError(f"{op}: input_sizes must be nonnegative, got {list(sizes)}")
    rows, cols = attrs.geometry(h, w, kh, kw)
    expected = (n, rows.out, cols.out, o)
    if dy_shape != expected:
        raise InvalidArgumentError(
            f"{op}: out_backprop has shape {list(dy_shape)}, expected {list(expected)} for "
            f"input_sizes {list(sizes)} and filter {list(f_shape)}"
        )
    return TransposeConv(sizes, kh, kw, o, (rows.out, cols.out), attrs.strides, attrs.dilations,
                         rows, cols, dtype)


def _transpose_core(attrs: ConvAttrs) -> Callable[..., np.ndarray]:
    """(input_sizes in the node's format, filter, NHWC dy, bias or None, relu) -> NHWC result
    in the compute dtype."""
    plans: _Plans[TransposeConv] = _Plans(lambda *key: _transpose_plan(attrs, *key))
    weights = Derived()

    def run(input_sizes: np.ndarray, f: np.ndarray, dy: np.ndarray, bias: np.ndarray | None,
            relu: bool) -> np.ndarray:
        _check_4d("Conv2DBackpropInput", dy, f)
        sizes = _input_sizes(input_sizes, f, dy, attrs.nhwc)
        compute = _compute_dtype(dy.dtype, f.dtype)
        plan = plans.get(sizes, f.shape, dy.shape, compute)
        arrays: tuple[np.ndarray, ...] = (f,)
        if bias is not None:
            bias = bias_arg((bias,), sizes[3])
            arrays = (f, bias)

        def prepare() -> TransposeWeights:
            b = None if bias is None else bias.astype(compute, copy=False)
            return plan.prepare(f.astype(compute, copy=False), b)

        prepared = weights.get(arrays, (plan.filter_key, compute), prepare)
        return plan(dy.astype(compute, copy=False), prepared, relu)

    return run


@kernel("Conv2DBackpropInput")
def conv2d_backprop_input(node: NodeContext) -> Kernel:
    attrs = ConvAttrs.of(node)
    core = _transpose_core(attrs)

    def run(input_sizes: np.ndarray, f: np.ndarray, dy: np.ndarray) -> np.ndarray:
        dtype = dy.dtype
        if attrs.nhwc:
            return core(input_sizes, f, dy, None, False).astype(dtype, copy=False)
        grad = core(input_sizes, f, to_nhwc(dy), None, False)
        return to_nchw(grad.astype(dtype, copy=False))

    return run


@kernel("_FusedConv2DBackpropInput")
def fused_conv2d_backprop_input(node: NodeContext) -> Kernel:
    """Conv2DBackpropInput followed by ``fused_ops`` (BiasAdd and an activation, as a
    transposed-convolution layer ends): this runtime's own fused op, which the optimizer may
    form; TensorFlow has none."""
    attrs = ConvAttrs.of(node)
    core = _transpose_core(attrs)
    epilogue = build_epilogue(node, allow_batch_norm=False)
    if epilogue.side_input is not None:
        raise UnimplementedError(f"{node.op}: a side input is not supported", node=node.name,
                                 op=node.op)
    direct = epilogue.bias_then in ("", "Relu")
    relu = epilogue.bias_then == "Relu"

    def run(input_sizes: np.ndarray, f: np.ndarray, dy: np.ndarray,
            *args: np.ndarray) -> np.ndarray:
        dtype = dy.dtype
        if len(args) < epilogue.num_args:
            raise InvalidArgumentError(
                f"{node.op}: expected {epilogue.num_args} fused args, got {len(args)}"
            )
        if not attrs.nhwc:
            dy = to_nhwc(dy)
        if direct:
            y = core(input_sizes, f, dy, args[0], relu)
            if epilogue.post is not None:
                y = epilogue.post(y, args)
        else:
            y = epilogue.apply(core(input_sizes, f, dy, None, False), args)
        y = y.astype(dtype, copy=False)
        return y if attrs.nhwc else to_nchw(y)

    return run
