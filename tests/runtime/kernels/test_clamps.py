"""Relu and Relu6 in every layout the clamps take: contiguous tensors over several chunks of
the cached bound, views that broadcast it along their rows, and rows too short for that."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.kernels import clamps

RNG = np.random.default_rng(11)


def _values(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    x = np.asarray(RNG.standard_normal(shape) * 8).astype(dtype)
    flat = x.reshape(-1)
    # NaN, infinities and signed zeros, at the first and last value and a chunk's edges.
    for i, v in zip([0, flat.size - 1, clamps._CHUNK - 1, clamps._CHUNK, 7],
                    [np.nan, np.nan, np.inf, -np.inf, -0.0]):
        if 0 <= i < flat.size:
            flat[i] = v
    return x


def _fused(x: np.ndarray, top: float | None) -> np.ndarray:
    """TensorFlow's fused clamp: NaN becomes 0."""
    y = np.nan_to_num(np.clip(x, 0, top), nan=0.0, posinf=np.inf if top is None else top)
    return np.where(np.isnan(x), 0, y).astype(x.dtype)


LAYOUTS = {
    "contiguous_chunks": lambda: _values((3, clamps._CHUNK + 5)),
    "wide_rows_view": lambda: _values((40, 300))[:, 10:290],
    "narrow_rows_view": lambda: _values((50, 40))[:, 3:19],
    "strided_columns": lambda: _values((64, 256))[:, ::2],
    "scalar": lambda: _values(()),
    "empty": lambda: _values((0, 5)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("top", [None, 6.0])
def test_fused_in_place_and_into_map_nan_to_zero(layout: str, top: float | None) -> None:
    x = LAYOUTS[layout]()
    expected = _fused(x, top)
    in_place = x.copy()
    (clamps.relu_ if top is None else clamps.relu6_)(in_place)
    np.testing.assert_array_equal(in_place, expected)
    out = np.full(x.shape, 99, x.dtype)
    (clamps.relu_into if top is None else clamps.relu6_into)(x, out)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_plain_relu_keeps_nan_and_leaves_its_input(layout: str) -> None:
    x = LAYOUTS[layout]()
    before = x.copy()
    np.testing.assert_array_equal(clamps.relu(x), np.maximum(before, 0))
    np.testing.assert_array_equal(clamps.relu6(x), np.minimum(np.maximum(before, 0), 6))
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int8])
def test_other_dtypes(dtype: type) -> None:
    x = (RNG.standard_normal(clamps._CHUNK + 3) * 9).astype(dtype)
    assert clamps.relu6(x).dtype == dtype
    np.testing.assert_array_equal(clamps.relu6(x), np.clip(x, 0, 6))
    np.testing.assert_array_equal(clamps.relu_(x.copy()), np.maximum(x, 0))
