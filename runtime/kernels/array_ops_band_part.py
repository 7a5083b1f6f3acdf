"""CPU kernel: MatrixBandPart, which keeps a band around the diagonal of each innermost matrix and
zeroes the rest (``matrix_band_part_op.cc``).

Element ``(m, n)`` is kept when ``(num_lower < 0 or m - n <= num_lower)`` and
``(num_upper < 0 or n - m <= num_upper)``; a band as wide as the matrix keeps all of it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.string_common import shape_text


def _diagonals(value: np.ndarray, what: str) -> int:
    if value.ndim != 0:
        raise InvalidArgumentError(f"{what} must be scalar, got shape {shape_text(value.shape)}")
    return int(value)


def _band_part(x: np.ndarray, num_lower: np.ndarray, num_upper: np.ndarray) -> np.ndarray:
    if x.ndim < 2:
        raise InvalidArgumentError(
            f"input must be at least 2-dim, received shape: {shape_text(x.shape)}"
        )
    rows, cols = x.shape[-2:]
    lower = _diagonals(num_lower, "num_lower")
    if lower > rows:
        raise InvalidArgumentError(
            f"num_lower must be negative or less or equal to number of rows ({rows}) got: {lower}"
        )
    upper = _diagonals(num_upper, "num_upper")
    if upper > cols:
        raise InvalidArgumentError(
            "num_upper must be negative or less or equal to number of columns "
            f"({cols}) got: {upper}"
        )
    if x.size == 0 or ((lower < 0 or lower == rows) and (upper < 0 or upper == cols)):
        return x
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]  # column minus row
    keep = np.ones((rows, cols), dtype=bool)
    if lower >= 0:
        keep &= offset >= -lower
    if upper >= 0:
        keep &= offset <= upper
    return np.where(keep, x, np.zeros((), x.dtype))


@kernel("MatrixBandPart")
def matrix_band_part(node: NodeContext) -> Callable[..., np.ndarray]:
    return _band_part
