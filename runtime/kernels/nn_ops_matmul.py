"""Matrix product kernels: MatMul, BatchMatMul{,V2,V3} and the fused ``_FusedMatMul``.

float32/float64 go straight to ``np.matmul`` (BLAS); half and bfloat16 are multiplied in float32
and rounded once, as TF's CPU kernels accumulate them in float32.
"""

from __future__ import annotations

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.math_ops_common import FLOAT32, Kernel, Tensor, type_attr
from runtime.kernels.nn_ops_activation import ACTIVATION_NAMES, fused_activation
from runtime.kernels.nn_ops_common import LOW_FLOATS
from runtime.kernels.nn_ops_fused import build_epilogue, fused_op_names
from runtime.kernels.registry import NodeContext, kernel

_matmul = np.matmul


def _rank_error(op: str, a: np.ndarray, b: np.ndarray, minimum: int, exact: bool) -> None:
    which = 0 if (a.ndim != minimum if exact else a.ndim < minimum) else 1
    found = (a if which == 0 else b).shape
    need = f"== {minimum}" if exact else f">= {minimum}"
    raise InvalidArgumentError(
        f"{op}: In[{which}] ndims must be {need}: {len(found)} (shape {list(found)})"
    )


def _low_matmul(a: np.ndarray, b: np.ndarray) -> Tensor:
    """Product of possibly half/bfloat16 operands, in float32 for those, rounded back."""
    if a.dtype in LOW_FLOATS:
        return _matmul(a.astype(FLOAT32), b.astype(FLOAT32)).astype(a.dtype)
    return _matmul(a, b)


def _adjoint(x: np.ndarray) -> np.ndarray:
    x = x.swapaxes(-1, -2)
    return x.conj() if x.dtype.kind == "c" else x


# --- MatMul ------------------------------------------------------------------------------------


@kernel("MatMul")
def matmul(node: NodeContext) -> Kernel:
    ta, tb = bool(node.attr("transpose_a")), bool(node.attr("transpose_b"))
    dtype = type_attr(node)
    mm = _matmul if dtype is not None and dtype not in LOW_FLOATS else _low_matmul

    def bad(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        _rank_error("MatMul", a, b, 2, exact=True)
        raise AssertionError  # unreachable

    # MatMul's transposes are plain (no conjugate), as in TF.
    if not ta and not tb:
        return lambda a, b: mm(a, b) if a.ndim == 2 and b.ndim == 2 else bad(a, b)
    if ta and not tb:
        return lambda a, b: mm(a.T, b) if a.ndim == 2 and b.ndim == 2 else bad(a, b)
    if tb and not ta:
        return lambda a, b: mm(a, b.T) if a.ndim == 2 and b.ndim == 2 else bad(a, b)
    return lambda a, b: mm(a.T, b.T) if a.ndim == 2 and b.ndim == 2 else bad(a, b)


# --- BatchMatMul -------------------------------------------------------------------------------


def _batch_matmul(node: NodeContext, broadcast: bool, out_dtype: np.dtype | None) -> Kernel:
    adj_x, adj_y = bool(node.attr("adj_x")), bool(node.attr("adj_y"))
    op = node.op

    def run(x: np.ndarray, y: np.ndarray) -> Tensor:
        if x.ndim < 2 or y.ndim < 2:
            _rank_error(op, x, y, 2, exact=False)
        if not broadcast and x.shape[:-2] != y.shape[:-2]:
            raise InvalidArgumentError(
                f"{op}: batch dimensions must be the same: {list(x.shape)} vs {list(y.shape)}"
            )
        if out_dtype is not None:
            if x.dtype != out_dtype:
                x = x.astype(out_dtype)
            if y.dtype != out_dtype:
                y = y.astype(out_dtype)
        if adj_x:
            x = _adjoint(x)
        if adj_y:
            y = _adjoint(y)
        if x.shape[-1] != y.shape[-2]:
            raise InvalidArgumentError(
                f"{op}: Matrix size-incompatible: In[0]: {list(x.shape)}, In[1]: {list(y.shape)}"
                f" (adj_x={adj_x}, adj_y={adj_y})"
            )
        try:
            return _low_matmul(x, y)
        except ValueError as err:  # batch dims that do not broadcast
            raise InvalidArgumentError(
                f"{op}: In[0] and In[1] must have compatible batch dimensions: "
                f"{list(x.shape)} vs. {list(y.shape)}"
            ) from err

    return run


@kernel("BatchMatMul")
def batch_matmul(node: NodeContext) -> Kernel:
    return _batch_matmul(node, broadcast=False, out_dtype=None)


@kernel("BatchMatMulV2")
def batch_matmul_v2(node: NodeContext) -> Kernel:
    return _batch_matmul(node, broadcast=True, out_dtype=None)


@kernel("BatchMatMulV3")
def batch_matmul_v3(node: NodeContext) -> Kernel:
    # Tout has no default, so a real node always carries it; the inputs are cast to it (int8 x
    # int8 -> int32 and the like).
    return _batch_matmul(node, broadcast=True, out_dtype=type_attr(node, "Tout"))


# --- _FusedMatMul ------------------------------------------------------------------------------


@kernel("_FusedMatMul")
def fused_matmul(node: NodeContext) -> Kernel:
    """TF's ``_FusedMatMul``, and one extension: without ``transpose_a``, ``a`` may have rank > 2
    (the product is then over its last axis, as ``BatchMatMulV2`` by a matrix computes it); the
    fusion pass emits that form for dense layers over rank-3 inputs."""
    ta, tb = bool(node.attr("transpose_a")), bool(node.attr("transpose_b"))
    epilogue = build_epilogue(node)
    apply, num_args = epilogue.apply, epilogue.num_args
    baked = _fused_matmul_with_constants(node, ta, tb)
    if baked is not None:
        return baked

    def run(a: np.ndarray, b: np.ndarray, *args: np.ndarray) -> np.ndarray:
        if (a.ndim != 2 and (ta or a.ndim < 2)) or b.ndim != 2:
            _rank_error("_FusedMatMul", a, b, 2, exact=True)
        if (b.shape[1] if tb else b.shape[0]) != (a.shape[-2] if ta else a.shape[-1]):
            raise InvalidArgumentError(
                f"_FusedMatMul: Matrix size-incompatible: In[0]: {list(a.shape)}, "
                f"In[1]: {list(b.shape)} (transpose_a={ta}, transpose_b={tb})"
            )
        if len(args) < num_args:
            raise InvalidArgumentError(
                f"_FusedMatMul: expected {num_args} fused args, got {len(args)}"
            )
        dtype = a.dtype
        if dtype in LOW_FLOATS:
            a, b = a.astype(FLOAT32), b.astype(FLOAT32)
        product = _matmul(a.T if ta else a, b.T if tb else b)
        return apply(product, args).astype(dtype, copy=False)

    return run


def _fused_matmul_with_constants(node: NodeContext, ta: bool, tb: bool) -> Kernel | None:
    """``a @ W + bias`` then an activation, with constant float32/float64 ``W`` and ``bias``
    checked once and baked in: a dense layer's whole per-call work is three numpy calls."""
    fused = fused_op_names(node)
    if not fused or fused[0] != "BiasAdd" or len(fused) > 2:
        return None
    weights, bias = node.constant_input(1), node.constant_input(2)
    if not isinstance(weights, np.ndarray) or not isinstance(bias, np.ndarray):
        return None
    if weights.ndim != 2 or weights.dtype not in (FLOAT32, np.dtype(np.float64)):
        return None
    w = weights.T if tb else weights
    if bias.shape != (w.shape[1],) or bias.dtype != weights.dtype:
        return None
    activate = None
    if len(fused) == 2:
        if fused[1] not in ACTIVATION_NAMES:
            return None
        activate = fused_activation(fused[1], float(node.attr("leakyrelu_alpha", 0.2)))
    k = w.shape[0]
    dtype = weights.dtype

    def check(a: np.ndarray) -> None:
        if a.dtype != dtype:
            raise InvalidArgumentError(f"_FusedMatMul: a is {a.dtype}, b is {dtype}")
        if a.ndim != 2 and (ta or a.ndim < 2):
            _rank_error("_FusedMatMul", a, weights, 2, exact=True)
        raise InvalidArgumentError(
            f"_FusedMatMul: Matrix size-incompatible: In[0]: {list(a.shape)}, "
            f"In[1]: {list(weights.shape)} (transpose_a={ta}, transpose_b={tb})"
        )

    def run(a: np.ndarray) -> np.ndarray:
        x = a.T if ta else a
        if x.ndim < 2 or x.shape[-1] != k or a.dtype != dtype or (ta and a.ndim != 2):
            check(a)
        y = _matmul(x, w)
        y += bias
        return y if activate is None else activate(y)

    return node.bake(run, 1, 2)
