"""CPU kernels: array_ops — constants, feeds, identities, shape queries and tensor construction.

The family is large, so the rest lives in sibling modules imported here (the family list in
``runtime.kernels`` names only this module): ``array_ops_shape`` (reshaping, transposing,
broadcasting, tiling, padding, reversing), ``array_ops_join`` (concat/pack/split),
``array_ops_slice`` (StridedSlice, Slice), ``array_ops_gather`` (gather/scatter/one-hot/where/
unique), ``array_ops_partition`` (DynamicPartition, DynamicStitch), ``array_ops_reverse`` (the
TF1 Reverse) and ``array_ops_band_part`` (MatrixBandPart).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.errors import InvalidArgumentError
from runtime.kernels import (  # noqa: F401  (imported for their registrations)
    array_ops_band_part,
    array_ops_gather,
    array_ops_join,
    array_ops_partition,
    array_ops_reverse,
    array_ops_scatter,
    array_ops_shape,
    array_ops_slice,
)
from runtime.kernels.array_ops_common import int_vector, shape_str
from runtime.kernels.registry import NodeContext, kernel


def _identity(x: np.ndarray) -> np.ndarray:
    # Tensors are immutable once produced, so forwarding the input is TF's copy-free behaviour.
    return x


@kernel("Const")
def const(node: NodeContext) -> Callable[[], np.ndarray]:
    value = np.asarray(node.attr("value"))
    return lambda: value


@kernel("Placeholder")
def placeholder(node: NodeContext) -> Callable[[], np.ndarray]:
    # The session substitutes fed tensors for the node; running the kernel means nothing was fed.
    dtype = dtypes.short_name(node.attr("dtype"))
    shape = node.attr("shape", None)
    message = f"You must feed a value for placeholder tensor '{node.name}' with dtype {dtype}"
    if shape is not None:
        message += f" and shape {shape_str(shape)}"

    def unfed() -> np.ndarray:
        raise InvalidArgumentError(message, node=node.name, op=node.op)

    return unfed


@kernel("NoOp")
def no_op(node: NodeContext) -> Callable[[], None]:
    return lambda: None


@kernel("Identity", "Snapshot", "StopGradient", "PreventGradient", "PlaceholderWithDefault")
def identity(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    return _identity


@kernel("IdentityN")
def identity_n(node: NodeContext) -> Callable[..., Any]:
    if node.num_outputs == 1:
        return _identity
    return lambda *inputs: inputs


@kernel("EnsureShape")
def ensure_shape(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    expected = node.attr("shape", None)
    if expected is None:
        return _identity
    expected = tuple(expected)

    def check(x: np.ndarray) -> np.ndarray:
        shape = x.shape
        if shape != expected and (
            len(shape) != len(expected) or any(e >= 0 and e != d for d, e in zip(shape, expected))
        ):
            raise InvalidArgumentError(
                f"Shape of tensor input {shape_str(shape)} is not compatible with expected "
                f"shape {shape_str(expected)}."
            )
        return x

    return check


def _non_finite_kinds(x: np.ndarray, signed_inf: bool) -> str:
    nan = bool(np.isnan(x).any())
    if signed_inf:
        kinds = [
            name
            for name, present in (
                ("-Inf", bool(np.isneginf(x).any())),
                ("+Inf", bool(np.isposinf(x).any())),
                ("NaN", nan),
            )
            if present
        ]
    else:
        kinds = [
            name for name, present in (("Inf", bool(np.isinf(x).any())), ("NaN", nan)) if present
        ]
    if len(kinds) <= 2:
        return " and ".join(kinds)
    return ", ".join(kinds[:-1]) + ", and " + kinds[-1]


@kernel("CheckNumerics", "CheckNumericsV2")
def check_numerics(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    message = node.attr("message")
    signed_inf = node.op == "CheckNumericsV2"

    def check(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind in "fcV" and not np.isfinite(x).all():
            raise InvalidArgumentError(
                f"{message} : Tensor had {_non_finite_kinds(x, signed_inf)} values"
            )
        return x

    return check


@kernel("Shape")
def shape(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    out = node.np_dtype("out_type")
    return lambda x: np.array(x.shape, dtype=out)


@kernel("ShapeN")
def shape_n(node: NodeContext) -> Callable[..., Any]:
    out = node.np_dtype("out_type")
    if node.num_outputs == 1:
        return lambda x: np.array(x.shape, dtype=out)
    return lambda *xs: [np.array(x.shape, dtype=out) for x in xs]


@kernel("Size")
def size(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    out = node.np_dtype("out_type")
    return lambda x: np.array(x.size, dtype=out)


@kernel("Rank")
def rank(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.array(x.ndim, dtype=np.int32)


@kernel("ZerosLike")
def zeros_like(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    def zeros(x: np.ndarray) -> np.ndarray:
        if x.dtype == object:  # strings: the empty string is TF's zero
            return np.full(x.shape, b"", dtype=object)
        return np.zeros(x.shape, dtype=x.dtype)

    return zeros


@kernel("OnesLike")
def ones_like(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.ones(x.shape, dtype=x.dtype)


@kernel("Fill")
def fill(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fill_(dims: np.ndarray, value: np.ndarray) -> np.ndarray:
        shape = int_vector(dims, "dims")
        if value.size != 1:
            raise InvalidArgumentError(
                f"value must be a scalar, got shape {shape_str(value.shape)}"
            )
        for d in shape:
            if d < 0:
                raise InvalidArgumentError(f"Dimension {d} must be >= 0")
        return np.full(shape, value.reshape(()), dtype=value.dtype)

    return fill_


@kernel("BroadcastArgs")
def broadcast_args(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def args(s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
        a, b = int_vector(s0, "s0"), int_vector(s1, "s1")
        try:
            out = np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError:
            raise InvalidArgumentError(
                f"Incompatible shapes: {shape_str(a)} vs. {shape_str(b)}"
            ) from None
        return np.array(out, dtype=s0.dtype)

    return args


@kernel("InvertPermutation")
def invert_permutation(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    def invert(x: np.ndarray) -> np.ndarray:
        if x.ndim != 1:
            raise InvalidArgumentError("invert_permutation expects a 1D vector.")
        n = x.shape[0]
        out = np.full(n, -1, dtype=x.dtype)
        for i, d in enumerate(x.tolist()):
            if not 0 <= d < n:
                raise InvalidArgumentError(f"{d} is not between 0 and {n}")
            if out[d] != -1:
                raise InvalidArgumentError(f"{d} is duplicated in the input.")
            out[d] = i
        return out

    return invert


@kernel("Bitcast")
def bitcast(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    out_type = node.attr("type")
    out = dtypes.to_numpy(out_type)

    def cast(x: np.ndarray) -> np.ndarray:
        if not x.flags.c_contiguous:
            x = x.copy()
        in_size, out_size = x.dtype.itemsize, out.itemsize
        if in_size == out_size:
            return x.view(out)
        if in_size > out_size:  # one element becomes a trailing dimension of several
            return x.reshape(x.shape + (1,)).view(out)
        if x.ndim == 0 or x.shape[-1] * in_size != out_size:
            raise InvalidArgumentError(
                f"Cannot bitcast from {int(dtypes.from_numpy(x.dtype))} to {int(out_type)}"
            )
        return x.view(out).reshape(x.shape[:-1])

    return cast
