"""Kernel cases for LRN, Reverse (v1) and MatrixBandPart, which TF1-era graphs carry, recorded via
tf.raw_ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(9)
CASES: list[Case] = []


def floats(*shape: int, dtype: type = np.float32, scale: float = 1.0) -> np.ndarray:
    return (R.standard_normal(shape) * scale).astype(dtype)


def add(name: str, op: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
        node_attrs: dict[str, Any] | None = None, **tolerance: float) -> None:
    CASES.append(Case(f"{op}_{name}", op, inputs, dict(attrs or {}), dict(node_attrs or {}),
                      expect_error="error" in name, **tolerance))


# --- LRN -----------------------------------------------------------------------------------------


def lrn(name: str, x: np.ndarray, **attrs: Any) -> None:
    # TF's band-matrix product may add a window's squares in another order: a few ulp.
    tolerance = {"rtol": 2e-3, "atol": 2e-3} if x.dtype == np.float16 else {"rtol": 2e-6}
    add(name, "LRN", {"input": x}, attrs, {"T": x.dtype.type}, **tolerance)


ALEXNET = {"depth_radius": 2, "bias": 2.0, "alpha": 1e-4, "beta": 0.75}
GOOGLENET = {"depth_radius": 5, "bias": 1.0, "alpha": 1e-4, "beta": 0.75}
lrn("defaults", floats(2, 3, 4, 8))
lrn("alexnet", floats(2, 5, 5, 16, scale=30), **ALEXNET)
lrn("googlenet", floats(1, 4, 4, 64, scale=50), **GOOGLENET)
lrn("beta_one", floats(2, 2, 3, 7), depth_radius=1, bias=0.5, alpha=0.3, beta=1.0)
lrn("beta_half", floats(2, 2, 3, 7), depth_radius=3, bias=1.5, alpha=0.2, beta=0.5)
lrn("radius_zero", floats(1, 3, 3, 5), depth_radius=0, alpha=0.5, beta=0.6)
lrn("radius_past_depth", floats(1, 2, 2, 4), depth_radius=9, alpha=0.25, beta=0.75)
lrn("one_channel", floats(2, 3, 3, 1), depth_radius=2)
lrn("deep_band", floats(1, 2, 3, 400), depth_radius=4, alpha=0.01, beta=0.75)
lrn("deep_running_half", floats(1, 2, 3, 400), depth_radius=4, alpha=0.01, beta=0.5)
lrn("deep_running_one", floats(1, 2, 2, 390), depth_radius=3, bias=1.0, alpha=0.05, beta=1.0)
lrn("deep_running_wide", floats(1, 1, 2, 385), depth_radius=500, alpha=0.001, beta=0.5)
lrn("half", floats(2, 3, 3, 8, dtype=np.float16), **ALEXNET)
lrn("half_beta_one", floats(1, 2, 2, 6, dtype=np.float16), depth_radius=1, beta=1.0)
lrn("empty", floats(0, 3, 3, 4))
lrn("no_channels", floats(2, 3, 3, 0))
_SPECIAL = floats(1, 1, 3, 8)
_SPECIAL[0, 0, 0, 1] = np.inf
_SPECIAL[0, 0, 1, 6] = np.nan
_SPECIAL[0, 0, 2, 3] = 3e20  # its square overflows
lrn("nonfinite", _SPECIAL, depth_radius=2)
lrn("nonfinite_beta", _SPECIAL, depth_radius=1, beta=0.75)
lrn("error_rank3", floats(3, 3, 4))
lrn("error_negative_radius", floats(1, 2, 2, 3), depth_radius=-1)

# --- Reverse -------------------------------------------------------------------------------------


def reverse(name: str, x: np.ndarray, dims: Any) -> None:
    add(name, "Reverse", {"tensor": x, "dims": np.array(dims, np.bool_)})


_CUBE = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
reverse("some_dims", _CUBE, [True, False, True])
reverse("no_dims", _CUBE, [False, False, False])
reverse("all_dims", floats(2, 3, 2, 2), [True] * 4)
reverse("vector", np.arange(5, dtype=np.int64), [True])
reverse("scalar", np.array(3.5, np.float32), [])
reverse("scalar_any_dims", np.array(7, np.int32), [True, False])
reverse("strings", np.array([[b"a", b"bb"], [b"c", b""]], dtype=object), [True, True])
reverse("bool", np.array([[True, False, False]]), [False, True])
reverse("empty_inner", np.zeros((2, 0), np.float32), [True, True])
reverse("rank8", np.arange(256, dtype=np.uint8).reshape((2,) * 8), [True, False] * 4)
reverse("error_empty_first", np.zeros((0, 3), np.float32), [True, False])
reverse("error_dims_size", _CUBE, [True, False])
reverse("error_dims_rank", _CUBE, [[True, False, True]])
reverse("error_rank9", np.zeros((1,) * 9, np.float32), [True] * 9)

# --- MatrixBandPart ------------------------------------------------------------------------------


def band(name: str, x: np.ndarray, lower: Any, upper: Any, index: type = np.int64) -> None:
    add(name, "MatrixBandPart", {"input": x, "num_lower": np.array(lower, index),
                                 "num_upper": np.array(upper, index)},
        node_attrs={"Tindex": index})


_M = floats(4, 5)
band("lower_one", _M, 1, 0)
band("upper_two", _M, 0, 2)
band("diagonal", _M, 0, 0)
band("lower_triangle", _M, -1, 0)
band("upper_triangle", _M, 0, -1)
band("everything", _M, -1, -1)
band("full_width", _M, 4, 5)
band("rows_only_full", _M, 4, 1)
band("tall", floats(6, 3), 2, 1)
band("batch_int32", R.integers(-9, 9, size=(2, 3, 4, 4)).astype(np.int32), 1, 1, np.int32)
band("bool", R.random((3, 3)) < 0.5, 1, 0)
band("complex", (floats(3, 3) + 1j * floats(3, 3)).astype(np.complex64), 0, 1)
band("empty_batch", floats(0, 3, 3), 1, 1)
band("empty_matrix", floats(2, 0, 3), 0, 0)
band("error_rank1", floats(4), 1, 1)
band("error_lower_too_big", _M, 5, 0)
band("error_upper_too_big", _M, 0, 6)
band("error_lower_not_scalar", _M, [1], 0)
band("error_upper_not_scalar", _M, 1, [[0]])
