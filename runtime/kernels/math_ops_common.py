"""Helpers shared by the math_ops and nn_ops kernel modules: dtype classes, attr lookups and
low-precision wrappers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from runtime import dtypes
from runtime.errors import InvalidArgumentError
from runtime.kernels.registry import NodeContext

Kernel = Callable[..., Any]

# A tensor value as kernels see it: an ndarray, or a numpy scalar where another kernel's rank-0
# result arrives as one (numpy returns scalars from ufuncs on rank-0 arrays).
Tensor = Any

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def is_float(dtype: np.dtype) -> bool:
    """Real floating point, bfloat16 included (ml_dtypes reports its kind as 'V')."""
    return dtype.kind == "f" or dtype == BFLOAT16


def is_float_or_complex(dtype: np.dtype) -> bool:
    return is_float(dtype) or dtype.kind == "c"


def is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_low_float(dtype: np.dtype) -> bool:
    """half and bfloat16: TF computes many of their functions in float32."""
    return dtype == FLOAT16 or dtype == BFLOAT16


def type_attr(node: NodeContext, name: str = "T") -> np.dtype | None:
    """A type attr as a numpy dtype, or None when the node does not carry it."""
    value = node.attrs.get(name)
    if value is None:
        return None
    return value if isinstance(value, np.dtype) else dtypes.to_numpy(value)


def type_name(dtype: np.dtype) -> str:
    try:
        return dtypes.short_name(dtypes.from_numpy(dtype))
    except ValueError:
        return str(dtype)


def require_types(node: NodeContext, allowed: Callable[[np.dtype], bool], what: str) -> None:
    """Reject at build time a ``T`` that TF has no CPU kernel for (only when ``T`` is known)."""
    dtype = type_attr(node)
    if dtype is not None and not allowed(dtype):
        raise InvalidArgumentError(
            f"{node.op} node '{node.name}': no kernel for T={type_name(dtype)} (expected {what})",
            node=node.name,
            op=node.op,
        )


def by_int_or_float(
    node: NodeContext, int_fn: Callable[..., Any], float_fn: Callable[..., Any]
) -> Callable[..., Any]:
    """Pick ``int_fn`` or ``float_fn`` from ``T`` now, or from the first input per call."""
    dtype = type_attr(node)
    if dtype is not None:
        return int_fn if is_int(dtype) else float_fn

    def dispatch(x: Any, *rest: Any) -> Any:
        return (int_fn if x.dtype.kind in "iu" else float_fn)(x, *rest)

    return dispatch


def in_float32(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """Run a float function on half/bfloat16 in float32, rounding the result once."""

    def run(x: Tensor) -> Tensor:
        if is_low_float(x.dtype):
            return fn(x.astype(FLOAT32)).astype(x.dtype)
        return fn(x)

    return run


def float_kernel(node: NodeContext, fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """``fn`` itself where ``T`` is known and not half/bfloat16, else ``in_float32(fn)``."""
    dtype = type_attr(node)
    if dtype is not None and not is_low_float(dtype):
        return fn
    return in_float32(fn)


# numpy reduces a short contiguous last axis one row at a time, which at many rows costs far more
# than the arithmetic (a max over [256, 2, 6, 6] takes 100x the time of one element-wise op). Such
# an axis is reduced instead with n - 1 element-wise ufunc calls over strided slices.
_SHORT_AXIS = 16
_MANY_ROWS = 32


def reduce_last_axis(ufunc: np.ufunc, x: np.ndarray) -> Any:
    """``ufunc.reduce(x, axis=-1)`` (left to right), fast for a short last axis and many rows."""
    n = x.shape[-1] if x.ndim else 0
    if n < 2 or n > _SHORT_AXIS or x.size < _MANY_ROWS * n:
        return ufunc.reduce(x, axis=-1)
    out = ufunc(x[..., 0], x[..., 1])
    for i in range(2, n):
        ufunc(out, x[..., i], out=out)
    return out
