"""CPU kernels: math_ops reductions (Sum, Mean, Prod, Max, Min, Any, All, EuclideanNorm), ArgMax,
ArgMin and the scans Cumsum and Cumprod.

Result dtypes never widen: an int32 Sum wraps like TF's. Where TF accumulates in a wider type the
kernels do too: half and bfloat16 sums and means in float32, integer means in 64 bits (the mean
then truncates toward zero, as C integer division does).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import normalize_axis, shape_str
from runtime.kernels.math_ops_common import FLOAT32, Kernel, Tensor, is_float, is_low_float
from runtime.kernels.registry import NodeContext, kernel

_MEMO_LIMIT = 256


class _Axes:
    """Turns a ``reduction_indices`` tensor into sorted non-negative axes for an input rank,
    checked as TF checks them. Answers are memoized by content: the indices are almost always a
    constant, so the per-call cost is one dict lookup."""

    def __init__(self) -> None:
        self._memo: dict[tuple[bytes, str, int], tuple[int, ...]] = {}

    def __call__(self, indices: Any, ndim: int) -> tuple[int, ...]:
        key = (indices.tobytes(), indices.dtype.char, ndim)
        axes = self._memo.get(key)
        if axes is None:
            axes = _resolve_axes(indices, ndim)
            if len(self._memo) < _MEMO_LIMIT:
                self._memo[key] = axes
        return axes


def _resolve_axes(indices: Any, ndim: int) -> tuple[int, ...]:
    axes: list[int] = []
    for axis in np.asarray(indices).reshape(-1).tolist():
        if not -ndim <= axis < ndim:
            raise InvalidArgumentError(
                f"Invalid reduction dimension ({axis} for input with {ndim} dimension(s)"
            )
        axis %= ndim
        if axis in axes:
            raise InvalidArgumentError(
                f"Invalid reduction arguments: Axes contains duplicate dimension: {axis}"
            )
        axes.append(axis)
    return tuple(sorted(axes))


def _keep_dims(node: NodeContext) -> Any:
    # Typed Any: numpy's stubs accept only a literal True or False for ``keepdims``.
    return bool(node.attr("keep_dims", False))


Reduce = Callable[[Tensor, tuple[int, ...]], Tensor]


def _with_axes(node: NodeContext, reduce: Reduce) -> Kernel:
    """The kernel ``(x, reduction_indices) -> reduce(x, axes)``; with constant indices (the usual
    case) the axes are resolved once per input rank and the indices are baked in."""
    indices = node.constant_input(1)
    if isinstance(indices, np.ndarray) and indices.dtype.kind in "iu":
        by_rank: dict[int, tuple[int, ...]] = {}

        def fixed(x: Tensor) -> Tensor:
            axes = by_rank.get(x.ndim)
            if axes is None:
                axes = by_rank.setdefault(x.ndim, _resolve_axes(indices, x.ndim))
            return reduce(x, axes)

        return node.bake(fixed, 1)
    axes_of = _Axes()
    return lambda x, indices: reduce(x, axes_of(indices, x.ndim))


# np.add.reduce walks short reduced axes one output element at a time (a sum over axis 1 of a
# [256, 12, 8] tensor costs 5x its einsum); np.einsum sums them in vectorized loops. It adds in
# order rather than pairwise, so it is used only for float sums of at most this many terms.
_EINSUM_MAX_TERMS = 1024
_EINSUM_MIN_SIZE = 512
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@functools.cache
def _sum_subscripts(ndim: int, axes: tuple[int, ...]) -> str:
    letters = _LETTERS[:ndim]
    return letters + "->" + "".join(c for i, c in enumerate(letters) if i not in axes)


def _float_sum(x: np.ndarray, axes: tuple[int, ...], keep: Any) -> Tensor:
    """Sum of a float32/float64 tensor over ``axes``, in its own dtype."""
    if (
        x.size >= _EINSUM_MIN_SIZE
        and axes
        and x.ndim <= len(_LETTERS)
        and math.prod(x.shape[a] for a in axes) <= _EINSUM_MAX_TERMS
    ):
        total = np.einsum(_sum_subscripts(x.ndim, axes), x)
        if keep:
            return total.reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
        return total
    return np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=keep)


_FLOAT32_64 = frozenset({FLOAT32, np.dtype(np.float64)})


@kernel("Sum")
def _sum(node: NodeContext) -> Kernel:
    keep = _keep_dims(node)

    def total(x: Tensor, axes: tuple[int, ...]) -> Tensor:
        dtype = x.dtype
        if dtype in _FLOAT32_64 and type(x) is np.ndarray:
            return _float_sum(x, axes, keep)
        if is_low_float(dtype):
            return np.add.reduce(x, axis=axes, dtype=FLOAT32, keepdims=keep).astype(dtype)
        return np.add.reduce(x, axis=axes, dtype=dtype, keepdims=keep)

    return _with_axes(node, total)


@kernel("Mean")
def _mean(node: NodeContext) -> Kernel:
    keep = _keep_dims(node)

    def mean(x: Tensor, axes: tuple[int, ...]) -> Tensor:
        count = math.prod(x.shape[a] for a in axes)
        dtype = x.dtype
        if dtype.kind in "iu":
            wide = np.int64 if dtype.kind == "i" else np.uint64
            total = np.add.reduce(x, axis=axes, dtype=wide, keepdims=keep)
            if count == 0:
                return np.zeros(np.shape(total), dtype=dtype)
            # x - fmod(x, n) is a multiple of n: floor division of it truncates toward zero.
            quotient = np.floor_divide(np.subtract(total, np.fmod(total, count)), count)
            return quotient.astype(dtype)
        if is_low_float(dtype):
            total = np.add.reduce(x, axis=axes, dtype=FLOAT32, keepdims=keep)
            return np.divide(total, count).astype(dtype)
        if dtype in _FLOAT32_64 and type(x) is np.ndarray:
            return np.divide(_float_sum(x, axes, keep), count)
        return np.divide(np.add.reduce(x, axis=axes, dtype=dtype, keepdims=keep), count)

    return _with_axes(node, mean)


@kernel("Prod")
def _prod(node: NodeContext) -> Kernel:
    keep = _keep_dims(node)

    def product(x: Tensor, axes: tuple[int, ...]) -> Tensor:
        return np.multiply.reduce(x, axis=axes, dtype=x.dtype, keepdims=keep)

    return _with_axes(node, product)


def _lowest(dtype: np.dtype) -> Any:
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return False if dtype.kind == "b" else -np.inf


def _highest(dtype: np.dtype) -> Any:
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return True if dtype.kind == "b" else np.inf


def _extreme(ufunc: np.ufunc, empty_value: Callable[[np.dtype], Any]) -> Kernel:
    def factory(node: NodeContext) -> Kernel:
        keep = _keep_dims(node)

        def reduce(x: Tensor, axes: tuple[int, ...]) -> Tensor:
            if x.size:
                return ufunc.reduce(x, axis=axes, keepdims=keep)
            # An empty reduction yields the identity: -inf / +inf, or the integer limits.
            return ufunc.reduce(x, axis=axes, keepdims=keep, initial=empty_value(x.dtype))

        return _with_axes(node, reduce)

    return factory


kernel("Max")(_extreme(np.maximum, _lowest))
kernel("Min")(_extreme(np.minimum, _highest))


def _logical(ufunc: np.ufunc) -> Kernel:
    def factory(node: NodeContext) -> Kernel:
        keep = _keep_dims(node)

        def reduce(x: Tensor, axes: tuple[int, ...]) -> Tensor:
            return ufunc.reduce(x, axis=axes, keepdims=keep)

        return _with_axes(node, reduce)

    return factory


kernel("Any")(_logical(np.logical_or))
kernel("All")(_logical(np.logical_and))


@kernel("EuclideanNorm")
def _euclidean_norm(node: NodeContext) -> Kernel:
    keep = _keep_dims(node)

    def norm(x: Tensor, axes: tuple[int, ...]) -> Tensor:
        dtype = x.dtype
        if dtype.kind == "c":
            squares = np.real(np.multiply(x, np.conjugate(x)))
            return np.sqrt(np.add.reduce(squares, axis=axes, keepdims=keep)).astype(dtype)
        if dtype.kind in "iu":
            # TF squares and sums in the integer type itself (wrapping), then truncates the root.
            squares = np.add.reduce(np.square(x), axis=axes, dtype=dtype, keepdims=keep)
            return np.sqrt(squares.astype(np.float64)).astype(dtype)
        if is_low_float(dtype):
            wide = x.astype(FLOAT32)
            return np.sqrt(np.add.reduce(np.square(wide), axis=axes, keepdims=keep)).astype(dtype)
        return np.sqrt(np.add.reduce(np.square(x), axis=axes, keepdims=keep))

    return _with_axes(node, norm)


# --- ArgMax / ArgMin ------------------------------------------------------------------------


def _arg(pick: Callable[..., Any], nan_fill: float) -> Kernel:
    def factory(node: NodeContext) -> Kernel:
        out_dtype = node.np_dtype("output_type", np.dtype(np.int64))

        def arg_on(x: Tensor, dimension: int) -> Tensor:
            axis = normalize_axis(dimension, x.ndim, "dimension")
            if x.shape[axis] == 0:
                raise InvalidArgumentError(
                    f"Reduction axis {axis} is empty in shape {shape_str(x.shape)}"
                )
            if is_float(x.dtype) and x.size and np.isnan(np.minimum.reduce(x, axis=None)):
                # TF's comparison never lets NaN win (numpy's picks the first NaN).
                x = np.where(np.isnan(x), nan_fill, x)
            return pick(x, axis).astype(out_dtype, copy=False)

        def arg(x: Tensor, dimension: Tensor) -> Tensor:
            if np.ndim(dimension) != 0:
                raise InvalidArgumentError(
                    "dim must be a scalar, but received tensor of shape: "
                    f"{shape_str(np.shape(dimension))}"
                )
            return arg_on(x, int(dimension))

        dimension = node.constant_input(1)
        if isinstance(dimension, np.ndarray) and dimension.ndim == 0:
            fixed = int(dimension)
            return node.bake(lambda x: arg_on(x, fixed), 1)
        return arg

    return factory


kernel("ArgMax")(_arg(np.ndarray.argmax, -np.inf))
kernel("ArgMin")(_arg(np.ndarray.argmin, np.inf))


# --- Cumsum / Cumprod -----------------------------------------------------------------------


def _scan(ufunc: np.ufunc, identity: int) -> Kernel:
    def factory(node: NodeContext) -> Kernel:
        exclusive = bool(node.attr("exclusive", False))
        reverse = bool(node.attr("reverse", False))

        def scan(x: Tensor, axis_tensor: Tensor) -> Tensor:
            if np.ndim(axis_tensor) != 0:
                raise InvalidArgumentError(
                    f"ScanOp: axis must be a scalar, not {shape_str(np.shape(axis_tensor))}"
                )
            axis, rank = int(axis_tensor), np.ndim(x)
            if not -rank <= axis < rank:
                raise InvalidArgumentError(
                    f"ScanOp: Expected scan axis in the range [{-rank}, {rank}), but got {axis}"
                )
            axis %= rank
            if reverse:
                x = np.flip(x, axis)
            result = ufunc.accumulate(x, axis=axis, dtype=x.dtype)
            if exclusive:
                # Shift by one along the axis, the identity taking the first place.
                lead = (slice(None),) * axis
                shifted = np.empty_like(result)
                shifted[lead + (slice(0, 1),)] = identity
                shifted[lead + (slice(1, None),)] = result[lead + (slice(None, -1),)]
                result = shifted
            return np.flip(result, axis) if reverse else result

        return scan

    return factory


kernel("Cumsum")(_scan(np.add, 0))
kernel("Cumprod")(_scan(np.multiply, 1))
