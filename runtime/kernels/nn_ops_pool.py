"""Pooling kernels: MaxPool, MaxPoolV2 and AvgPool.

A pool is a running max (or sum) over the window's taps, each tap a strided slice of the padded
input. MaxPool pads with the type's lowest value; AvgPool pads with zeros and divides each output
by the number of window elements that fall inside the input, as TF does for SAME padding.

Windows that tile the input (window == stride, no padding, the common 2x2/2 pool) reduce first
across the window's rows, whole image rows at a time, then across its columns: numpy's inner
loops then run over long rows instead of the few channels of one pixel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.math_ops_common import FLOAT32, Kernel
from runtime.kernels.nn_ops_common import (
    LOW_FLOATS,
    Key,
    Window,
    channels_last,
    check_padding,
    explicit_pads,
    pad_hw,
    scratch,
    taps,
    to_nchw,
    to_nhwc,
    window,
)
from runtime.kernels.registry import NodeContext, kernel


def _lowest(dtype: np.dtype) -> object:
    """MaxPool's padding value: it never wins a max against a real element."""
    return np.iinfo(dtype).min if dtype.kind in "iu" else dtype.type(-np.inf)


def _pool_params(values: Sequence[int] | np.ndarray, nhwc: bool, what: str, op: str) -> tuple[int, int, int]:
    """(rows, cols, depth) of a 4-element ksize/strides in the node's data format."""
    values = [int(v) for v in np.asarray(values).reshape(-1)]
    if len(values) != 4:
        raise InvalidArgumentError(
            f"{op}: sliding window {what} field must specify 4 dimensions, got {values}"
        )
    n, h, w, c = values if nhwc else (values[0], values[2], values[3], values[1])
    if n != 1:
        raise UnimplementedError(f"{op}: pooling is not yet supported on the batch dimension.")
    if min(values) <= 0:
        raise InvalidArgumentError(f"{op}: sliding window {what} must be positive, got {values}")
    return h, w, c


def _depth_max_pool(x: np.ndarray, depth: int, stride: int, op: str) -> np.ndarray:
    c = x.shape[-1]
    if depth != stride or c % depth:
        raise UnimplementedError(
            f"{op}: depthwise max pooling needs a window equal to its stride that divides the "
            f"depth, got window {depth}, stride {stride}, depth {c}"
        )
    pooled: np.ndarray = x.reshape(x.shape[:-1] + (c // depth, depth)).max(axis=-1)
    return pooled


def _pool_geometry(x: np.ndarray, ksize: tuple[int, int], strides: tuple[int, int],
                   padding: str, explicit: tuple[tuple[int, int], tuple[int, int]],
                   op: str) -> tuple[Window, Window]:
    if x.ndim != 4:
        raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got {list(x.shape)}")
    rows = window(x.shape[1], ksize[0], strides[0], 1, padding, explicit[0])
    cols = window(x.shape[2], ksize[1], strides[1], 1, padding, explicit[1])
    return rows, cols


def _tiles(x: np.ndarray, rows: Window, cols: Window, ksize: tuple[int, int],
           strides: tuple[int, int]) -> bool:
    """Whether the windows tile the input: window == stride, no padding, more than one tap."""
    return (ksize == strides and ksize[0] * ksize[1] > 1 and rows.pad_before == 0
            and cols.pad_before == 0 and rows.out * ksize[0] <= x.shape[1]
            and cols.out * ksize[1] <= x.shape[2] and x.size > 0)


class _Rows:
    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.rows = np.empty(shape, dtype)
        self.nbytes = self.rows.nbytes


def _tiled_reduce(x: np.ndarray, rows: Window, cols: Window, ksize: tuple[int, int],
                  ufunc: np.ufunc) -> np.ndarray:
    """``ufunc`` over each window of a tiling pool (a fresh array): across window rows into
    scratch, then across columns."""
    n, c = x.shape[0], x.shape[3]
    kh, kw = ksize
    oh, ow = rows.out, cols.out
    lines = x[:, :oh * kh, :ow * kw].reshape(n, oh, kh, ow * kw * c)
    if kh == 1:
        acc = lines[:, :, 0]
    else:
        shape = (n, oh, ow * kw * c)
        acc = scratch(Key(("pool-rows", shape, x.dtype)), lambda: _Rows(shape, x.dtype)).rows
        ufunc(lines[:, :, 0], lines[:, :, 1], out=acc)
        for k in range(2, kh):
            ufunc(acc, lines[:, :, k], out=acc)
    pixels = acc.reshape(n, oh, ow, kw, c)
    out = ufunc(pixels[:, :, :, 0], pixels[:, :, :, 1]) if kw > 1 else pixels[:, :, :, 0].copy()
    for k in range(2, kw):
        ufunc(out, pixels[:, :, :, k], out=out)
    return out


def max_pool_nhwc(x: np.ndarray, ksize: tuple[int, int, int], strides: tuple[int, int, int],
                  padding: str, explicit: tuple[tuple[int, int], tuple[int, int]],
                  op: str = "MaxPool") -> np.ndarray:
    if ksize[2] != 1 or strides[2] != 1:
        if ksize[:2] != (1, 1) or strides[:2] != (1, 1):
            raise UnimplementedError(
                f"{op}: pooling over depth and space at once is not supported"
            )
        if x.ndim != 4:
            raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got {list(x.shape)}")
        return _depth_max_pool(x, ksize[2], strides[2], op)
    rows, cols = _pool_geometry(x, ksize[:2], strides[:2], padding, explicit, op)
    if _tiles(x, rows, cols, ksize[:2], strides[:2]):
        return _tiled_reduce(x, rows, cols, ksize[:2], np.fmax)  # TF's max skips NaN, as fmax
    xp = pad_hw(x, rows, cols, _lowest(x.dtype))
    out: np.ndarray | None = None
    for _, _, (r, s) in taps(rows, cols, ksize[0], ksize[1], strides[:2], (1, 1)):
        if out is None:
            out = xp[:, r, s, :].copy()
        else:
            np.fmax(out, xp[:, r, s, :], out=out)  # TF's max skips NaN, as fmax does
    assert out is not None  # ksize entries are positive
    return out


def _valid_counts(win: Window, size: int, ksize: int, stride: int) -> np.ndarray:
    """Per output position, how many of the window's elements lie inside the input."""
    start = np.arange(win.out) * stride - win.pad_before
    return np.minimum(start + ksize, size) - np.maximum(start, 0)


def avg_pool_nhwc(x: np.ndarray, ksize: tuple[int, int, int], strides: tuple[int, int, int],
                  padding: str, op: str = "AvgPool") -> np.ndarray:
    if ksize[2] != 1 or strides[2] != 1:
        raise UnimplementedError(f"{op}: pooling over the depth dimension is not supported")
    if x.dtype.kind != "f" and x.dtype not in LOW_FLOATS:
        raise InvalidArgumentError(f"{op}: T must be a float type, got {x.dtype}")
    rows, cols = _pool_geometry(x, ksize[:2], strides[:2], padding, ((0, 0), (0, 0)), op)
    dtype = x.dtype
    if dtype in LOW_FLOATS:
        x = x.astype(FLOAT32)
    if _tiles(x, rows, cols, ksize[:2], strides[:2]):
        sums = _tiled_reduce(x, rows, cols, ksize[:2], np.add)
        sums /= sums.dtype.type(ksize[0] * ksize[1])
        return sums.astype(dtype, copy=False)
    xp = pad_hw(x, rows, cols, 0)
    out: np.ndarray | None = None
    for _, _, (r, s) in taps(rows, cols, ksize[0], ksize[1], strides[:2], (1, 1)):
        if out is None:
            out = xp[:, r, s, :].copy()
        else:
            out += xp[:, r, s, :]
    assert out is not None
    if padding == "SAME":
        counts = np.outer(_valid_counts(rows, x.shape[1], ksize[0], strides[0]),
                          _valid_counts(cols, x.shape[2], ksize[1], strides[1]))
        out /= counts.astype(out.dtype)[:, :, None]
    else:
        out /= out.dtype.type(ksize[0] * ksize[1])
    return out.astype(dtype, copy=False)


def _in_nhwc(fn: Kernel, nhwc: bool) -> Kernel:
    if nhwc:
        return fn
    return lambda x, *rest: to_nchw(fn(to_nhwc(x), *rest))


@kernel("MaxPool")
def max_pool(node: NodeContext) -> Kernel:
    nhwc = channels_last(node)
    padding = check_padding(node)
    ksize = _pool_params(node.attr("ksize"), nhwc, "ksize", node.op)
    strides = _pool_params(node.attr("strides"), nhwc, "stride", node.op)
    explicit = ((0, 0), (0, 0))
    if padding == "EXPLICIT":
        explicit = explicit_pads(node.attr("explicit_paddings"), nhwc, node.op)
    return _in_nhwc(lambda x: max_pool_nhwc(x, ksize, strides, padding, explicit, node.op), nhwc)


@kernel("MaxPoolV2")
def max_pool_v2(node: NodeContext) -> Kernel:
    if node.attr("data_format", "NHWC") != "NHWC":
        # TF's CPU kernel takes NHWC only (NCHW_VECT_C is a GPU int8 layout).
        raise InvalidArgumentError(
            f"MaxPoolV2 only supports NHWC on the CPU, got {node.attr('data_format')}",
            node=node.name, op=node.op,
        )
    padding = check_padding(node, allow_explicit=False)
    op = node.op

    def run(x: np.ndarray, ksize: np.ndarray, strides: np.ndarray) -> np.ndarray:
        k = _pool_params(ksize, True, "ksize", op)
        s = _pool_params(strides, True, "stride", op)
        return max_pool_nhwc(x, k, s, padding, ((0, 0), (0, 0)), op)

    return run


@kernel("AvgPool")
def avg_pool(node: NodeContext) -> Kernel:
    nhwc = channels_last(node)
    padding = check_padding(node, allow_explicit=False)
    ksize = _pool_params(node.attr("ksize"), nhwc, "ksize", node.op)
    strides = _pool_params(node.attr("strides"), nhwc, "stride", node.op)
    return _in_nhwc(lambda x: avg_pool_nhwc(x, ksize, strides, padding, node.op), nhwc)
