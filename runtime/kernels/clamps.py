"""Relu and Relu6 at numpy's fastest.

``np.clip`` runs 2-3x faster than ``np.maximum``/``np.fmax`` against a scalar (numpy vectorizes
clip's loop, not those ops' with a scalar operand): on a cached block of float32 values 2.4
against 0.8 billion a second. Relu and Relu6 use it for float16/32/64 (other dtypes keep
maximum/minimum). Plain Relu keeps NaN, as clip does; TensorFlow's fused activations map NaN to 0
(fmax), so their forms clip, then look for NaN with one max over the result (4 billion a second,
NaN propagates through it) and map it only when there is one.
"""

from __future__ import annotations

import numpy as np

_CLIPPED = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})
_INF = np.inf


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0), a new array; NaN stays NaN."""
    result: np.ndarray = (
        np.clip(x, 0, _INF) if x.dtype in _CLIPPED else np.maximum(x, x.dtype.type(0))
    )
    return result


def relu6(x: np.ndarray) -> np.ndarray:
    """min(max(x, 0), 6), a new array; NaN stays NaN."""
    result: np.ndarray = (
        np.clip(x, 0, 6)
        if x.dtype in _CLIPPED
        else np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6))
    )
    return result


def _nan_to_zero_(y: np.ndarray) -> None:
    if y.size and np.isnan(y.max()):
        np.fmax(y, 0, out=y)


def relu_(y: np.ndarray) -> np.ndarray:
    """The fused Relu in place: max(y, 0) with NaN as 0."""
    if y.dtype in _CLIPPED:
        np.clip(y, 0, _INF, out=y)
        _nan_to_zero_(y)
        return y
    result: np.ndarray = np.fmax(y, 0, out=y)
    return result


def relu6_(y: np.ndarray) -> np.ndarray:
    """The fused Relu6 in place: min(max(y, 0), 6) with NaN as 0."""
    if y.dtype in _CLIPPED:
        np.clip(y, 0, 6, out=y)
        _nan_to_zero_(y)
        return y
    np.fmax(y, 0, out=y)
    result: np.ndarray = np.minimum(y, 6, out=y)
    return result


def relu_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The fused Relu of ``x`` written to ``out`` (a copy and the Relu in one pass)."""
    if x.dtype in _CLIPPED and out.dtype == x.dtype:
        np.clip(x, 0, _INF, out=out)
        _nan_to_zero_(out)
        return out
    result: np.ndarray = np.fmax(x, 0, out=out)
    return result
