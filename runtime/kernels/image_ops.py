"""CPU kernels: image_ops — ResizeBilinear, ResizeNearestNeighbor and ResizeBicubic (NHWC); the
decode ops live in ``image_decode``, NonMaxSuppression in ``image_ops_nms`` and CropAndResize in
``image_ops_crop``.

Sampling positions follow TensorFlow's CPU kernels exactly, in float32: the scale is
``in / out`` (or ``(in - 1) / (out - 1)`` with ``align_corners``), and a destination index ``i``
maps to ``i * scale`` (legacy) or ``(i + 0.5) * scale - 0.5`` (``half_pixel_centers``, the mode
Keras' Resizing and UpSampling2D layers use). Bilinear output is float32 whatever the input type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import (  # noqa: F401 - they register kernels
    image_decode,
    image_ops_crop,
    image_ops_nms,
)
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.nn_ops_common import Key, scratch
from runtime.kernels.registry import NodeContext, kernel

_F32 = np.float32
_CACHE_LIMIT = 16
# Output bytes per block of images that ResizeBilinear processes at once (cache-sized).
_BLOCK_BYTES = 256 << 10
# The sampling indices are in range by construction; numpy buffers ``take(out=...)`` in its
# default "raise" mode.
_CLIP: Literal["clip"] = "clip"

Plan = TypeVar("Plan")


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def _validate(images: np.ndarray, size: np.ndarray) -> tuple[int, int]:
    if images.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional{shape_str(images.shape)}")
    if images.shape[3] <= 0:
        raise InvalidArgumentError("image must have at least one channel")
    if images.shape[1] <= 0 or images.shape[2] <= 0:
        raise InvalidArgumentError("input image must be of non-zero size")
    if size.ndim != 1:
        raise InvalidArgumentError(f"shape_t must be 1-dimensional{shape_str(size.shape)}")
    if size.shape[0] != 2:
        raise InvalidArgumentError(f"shape_t must have two elements{shape_str(size.shape)}")
    out_h, out_w = (int(v) for v in size.tolist())
    if out_h <= 0 or out_w <= 0:
        raise InvalidArgumentError("output dimensions must be positive")
    return out_h, out_w


def _memoized(build: Callable[[int, int, int, int], Plan]) -> Callable[[int, int, int, int], Plan]:
    """``build(in_h, in_w, out_h, out_w)`` cached per sizes: a node usually sees one or two."""
    cache: dict[tuple[int, int, int, int], Plan] = {}

    def plan(in_h: int, in_w: int, out_h: int, out_w: int) -> Plan:
        key = (in_h, in_w, out_h, out_w)
        found = cache.get(key)
        if found is None:
            found = build(in_h, in_w, out_h, out_w)
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[key] = found
        return found

    return plan


def _check_modes(node: NodeContext) -> tuple[bool, bool]:
    align, half = bool(node.attr("align_corners")), bool(node.attr("half_pixel_centers"))
    return align, half


def _mode_error() -> InvalidArgumentError:
    return InvalidArgumentError("If half_pixel_centers is True, align_corners must be False.")


def _linear_weights(
    in_size: int, out_size: int, align: bool, half: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per destination index: the lower and upper source index and the weight of the upper."""
    scale = _scale(in_size, out_size, align)
    pos = np.arange(out_size, dtype=_F32)
    pos = (pos + _F32(0.5)) * scale - _F32(0.5) if half else pos * scale
    floor = np.floor(pos)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return lower, upper, (pos - floor).astype(_F32)


class _BilinearSetup:
    """Sampling weights, block size and scratch layout of one ResizeBilinear shape."""

    def __init__(self, n: int, in_h: int, in_w: int, c: int, out_h: int, out_w: int,
                 align: bool, half: bool) -> None:
        y_lo, y_hi, y_w = _linear_weights(in_h, out_h, align, half)
        x_lo, x_hi, x_w = _linear_weights(in_w, out_w, align, half)
        # The x weights repeated per channel: each weight then multiplies a whole row of
        # (x, channel) values in one inner loop (a per-pixel broadcast is a loop of c).
        self.weights = (y_lo, y_hi, y_w[None, :, None], x_lo, x_hi, _channel_weights(x_w, c))
        # Blocks of images small enough that the passes below run in cache, their
        # intermediates in per-thread scratch.
        self.step = min(n, max(1, _BLOCK_BYTES // (4 * out_h * out_w * c)))
        # Each source row is lerped along x once when upsampling; when shrinking a lot, only
        # the rows used are.
        self.rows_first = in_h > 2 * out_h
        sizes = (self.step, in_h, in_w, out_h, out_w, c, self.rows_first)
        self.key = Key(("resize-bilinear", *sizes))
        self.scratch = lambda: _BilinearScratch(*sizes)


class _BilinearScratch:
    def __init__(self, step: int, in_h: int, in_w: int, out_h: int, out_w: int, c: int,
                 rows_first: bool) -> None:
        width = out_w * c
        self.top = np.empty((step, out_h, width), _F32)
        self.left = np.empty(step * max(in_h, out_h) * width, _F32)
        self.along_x = np.empty((0 if rows_first else step, in_h, width), _F32)
        self.rows = np.empty((step if rows_first else 0, out_h, in_w, c), _F32)
        self.nbytes = sum(a.nbytes for a in (self.top, self.left, self.along_x, self.rows))


def _channel_weights(weights: np.ndarray, channels: int) -> np.ndarray:
    return np.repeat(weights, channels) if channels > 1 else weights


@kernel("ResizeBilinear")
def resize_bilinear(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    align, half = _check_modes(node)

    setups: dict[tuple[int, ...], _BilinearSetup] = {}

    def resize(images: np.ndarray, size: np.ndarray) -> np.ndarray:
        if half and align:
            raise _mode_error()
        out_h, out_w = _validate(images, size)
        n, in_h, in_w, c = images.shape
        images = images.astype(_F32, copy=False)
        if n == 0:
            return np.zeros((0, out_h, out_w, c), _F32)
        if in_h == out_h and in_w == out_w:
            return images
        key = (n, in_h, in_w, c, out_h, out_w)
        setup = setups.get(key)
        if setup is None:
            if len(setups) >= _CACHE_LIMIT:
                setups.clear()
            setup = setups[key] = _BilinearSetup(*key, align, half)
        y_lo, y_hi, y_w, x_lo, x_hi, x_wide = setup.weights
        step, rows_first = setup.step, setup.rows_first
        ws = scratch(setup.key, setup.scratch)

        def lerp_x(rows: np.ndarray, dest: np.ndarray) -> None:
            # dest = left + (right - left) * weight, in TensorFlow's operation order.
            left = ws.left[:dest.size].reshape(dest.shape)
            rows.take(x_lo, axis=2, out=left.reshape(rows.shape[:2] + (out_w, c)), mode=_CLIP)
            rows.take(x_hi, axis=2, out=dest.reshape(rows.shape[:2] + (out_w, c)), mode=_CLIP)
            dest -= left
            dest *= x_wide
            dest += left

        out = np.empty((n, out_h, out_w * c), _F32)
        for first in range(0, n, step):
            block = images[first:first + step]
            count = block.shape[0]
            result = out[first:first + count]
            top = ws.top[:count]
            # Lerp along x, then along y, as TensorFlow does.
            if not rows_first:
                along_x = ws.along_x[:count]
                lerp_x(block, along_x)
                along_x.take(y_lo, axis=1, out=top, mode=_CLIP)
                along_x.take(y_hi, axis=1, out=result, mode=_CLIP)
            else:
                rows = ws.rows[:count]
                block.take(y_lo, axis=1, out=rows, mode=_CLIP)
                lerp_x(rows, top)
                block.take(y_hi, axis=1, out=rows, mode=_CLIP)
                lerp_x(rows, result)
            result -= top
            result *= y_w
            result += top
        return out.reshape(n, out_h, out_w, c)

    return resize


def _nearest_indices(in_size: int, out_size: int, align: bool, half: bool) -> np.ndarray:
    scale = _scale(in_size, out_size, align)
    pos = np.arange(out_size, dtype=_F32)
    pos = (pos + _F32(0.5)) * scale if half else pos * scale
    if align:
        # C's roundf rounds halves away from zero; positions are never negative here.
        index = np.floor(pos.astype(np.float64) + 0.5)
    else:
        index = np.floor(pos)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half else index


@kernel("ResizeNearestNeighbor")
def resize_nearest_neighbor(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    align, half = _check_modes(node)

    @_memoized
    def plan(in_h: int, in_w: int, out_h: int, out_w: int) -> tuple[np.ndarray, np.ndarray]:
        return (
            _nearest_indices(in_h, out_h, align, half),
            _nearest_indices(in_w, out_w, align, half),
        )

    def resize(images: np.ndarray, size: np.ndarray) -> np.ndarray:
        if half and align:
            raise _mode_error()
        out_h, out_w = _validate(images, size)
        _, in_h, in_w, _ = images.shape
        rows, cols = plan(in_h, in_w, out_h, out_w)
        out: np.ndarray = np.take(np.take(images, rows, axis=1), cols, axis=2)
        return out

    return resize


# --- ResizeBicubic --------------------------------------------------------------------------------
# TensorFlow reads the cubic kernel's weights from a table of 1024 steps per pixel, rounding the
# sample's fractional position to a step (``resize_bicubic_op.cc``). Legacy mode uses the a=-0.75
# kernel with taps clamped to the image; half-pixel mode uses Keys' a=-0.5 kernel and instead
# drops taps outside the image, renormalizing the rest. Rows are interpolated first, then
# columns, each as w0*v0 + w1*v1 + w2*v2 + w3*v3 in float32.

_CUBIC_STEPS = 1024


def _cubic_table(a: float) -> np.ndarray:
    table = np.empty((_CUBIC_STEPS + 1, 2), _F32)
    for i in range(_CUBIC_STEPS + 1):
        x = float(_F32(i * 1.0 / _CUBIC_STEPS))
        table[i, 0] = ((a + 2) * x - (a + 3)) * x * x + 1
        x = float(_F32(x + 1.0))
        table[i, 1] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return table


_KEYS_TABLE = _cubic_table(float(_F32(-0.5)))
_LEGACY_TABLE = _cubic_table(float(_F32(-0.75)))


def _cubic_weights(in_size: int, out_size: int, align: bool,
                   half: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per destination index: the 4 source indices and their float32 weights."""
    scale = _scale(in_size, out_size, align)
    pos = np.arange(out_size, dtype=_F32)
    pos = (pos + _F32(0.5)) * scale - _F32(0.5) if half else pos * scale
    start = np.floor(pos)
    step = np.rint((pos - start) * _F32(_CUBIC_STEPS)).astype(np.int64)
    table = _KEYS_TABLE if half else _LEGACY_TABLE
    weights = np.stack([table[step, 1], table[step, 0], table[_CUBIC_STEPS - step, 0],
                        table[_CUBIC_STEPS - step, 1]], axis=1)
    taps = start.astype(np.int64)[:, None] + np.arange(-1, 3)
    index = np.clip(taps, 0, in_size - 1)
    if half:
        weights = np.where(index == taps, weights, _F32(0))
        total = ((weights[:, 0] + weights[:, 1]) + weights[:, 2]) + weights[:, 3]
        usable = np.abs(total) >= _F32(1000) * np.finfo(_F32).tiny
        inverse = np.where(usable, _F32(1) / np.where(usable, total, _F32(1)), _F32(1))
        weights = np.where(usable[:, None], weights * inverse[:, None], weights)
    return index, weights.astype(_F32)


def _four_taps(values: list[np.ndarray], weights: list[np.ndarray]) -> np.ndarray:
    """sum_k weights[k] * values[k], left to right in float32."""
    out: np.ndarray = values[0] * weights[0]
    for k in range(1, 4):
        out = out + values[k] * weights[k]
    return out


@kernel("ResizeBicubic")
def resize_bicubic(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    align, half = _check_modes(node)

    @_memoized
    def plan(in_h: int, in_w: int, out_h: int,
             out_w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (*_cubic_weights(in_h, out_h, align, half), *_cubic_weights(in_w, out_w, align, half))

    def resize(images: np.ndarray, size: np.ndarray) -> np.ndarray:
        if half and align:
            raise _mode_error()
        out_h, out_w = _validate(images, size)
        _, in_h, in_w, _ = images.shape
        rows, row_w, cols, col_w = plan(in_h, in_w, out_h, out_w)
        pixels = images.astype(_F32, copy=False)
        # [n, out_h, in_w, c]: each output row from its 4 source rows.
        along_y = _four_taps([pixels[:, rows[:, k]] for k in range(4)],
                             [row_w[:, k, None, None] for k in range(4)])
        out: np.ndarray = _four_taps([along_y[:, :, cols[:, k]] for k in range(4)],
                                     [col_w[:, k, None] for k in range(4)])
        return out.astype(_F32, copy=False)

    return resize
