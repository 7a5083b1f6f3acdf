"""Pooling kernels: MaxPool, MaxPoolV2 and AvgPool.

AvgPool is a running sum over the window's taps, each tap a strided slice of the padded input,
padded with zeros; it divides each output by the number of window elements that fall inside the
input, as TF does for SAME padding. MaxPool is separable: a max over the window's rows, then over
its columns (``_separable_max``), with the type's lowest value as padding.

Windows that tile the input (window == stride, no padding, the common 2x2/2 pool) reduce first
across the window's rows, whole image rows at a time, then across its columns: numpy's inner
loops then run over long rows instead of the few channels of one pixel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.intra_op import run_blocks, worth_threads
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
    if x.size == 0 or rows.out == 0 or cols.out == 0:
        return np.empty((x.shape[0], rows.out, cols.out, x.shape[3]), x.dtype)
    return _separable_max(x, rows, cols, ksize[:2], strides[:2])


# Input rows per chunk of the separable max: about this many bytes, so that a chunk's padded rows
# and its row maxima stay in cache between the two passes (Xception's 147x147x128 pool: the two
# passes over whole images 1.9x slower).
_POOL_CHUNK_BYTES = 1 << 20


class _PoolScratch:
    """One thread's padded input rows for a chunk (the border columns hold the type's lowest
    value and are never written) and the chunk's row maxima."""

    def __init__(self, rows: int, width: int, out_rows: int, c: int, dtype: np.dtype) -> None:
        self.padded = np.full((rows, width, c), _lowest(dtype), dtype)
        self.maxima = np.empty((out_rows, width * c), dtype)
        self.nbytes = self.padded.nbytes + self.maxima.nbytes


def _separable_max(x: np.ndarray, rows: Window, cols: Window, ksize: tuple[int, int],
                   strides: tuple[int, int]) -> np.ndarray:
    """The max over each window as a max over its rows, then over its columns (a fresh array).

    The row pass compares whole padded image rows, numpy's inner loops running over
    ``width * C`` values; only the column pass steps through pixels. Against a max over each of
    the window's taps in turn that is kh + kw passes instead of kh * kw, most of them long. Both
    passes run on chunks of output rows whose padded input rows are copied into a small buffer
    first, so the passes read cache, not memory; chunks are independent, so threads inside a run
    share them out (Xception's four 3x3/2 pools: 1.7-3.2x faster on one thread)."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw) = ksize, strides
    oh, ow = rows.out, cols.out
    pt, pl = rows.pad_before, cols.pad_before
    need_w = (ow - 1) * sw + kw
    in_w = max(0, min(w, need_w - pl))
    row_bytes = need_w * c * x.dtype.itemsize
    per_chunk = max(1, min(oh, (max(kh, _POOL_CHUNK_BYTES // max(row_bytes, 1)) - kh) // sh + 1))
    in_rows = (per_chunk - 1) * sh + kh
    key = Key(("max-pool", x.shape, rows, cols, ksize, strides, per_chunk, x.dtype))
    out = np.empty((n, oh, ow, c), x.dtype)
    lowest = _lowest(x.dtype)
    chunks = [(b, r0, min(oh, r0 + per_chunk)) for b in range(n) for r0 in range(0, oh, per_chunk)]

    def chunk(index: int) -> None:
        b, r0, r1 = chunks[index]
        work = scratch(key, lambda: _PoolScratch(in_rows, need_w, per_chunk, c, x.dtype))
        y0 = r0 * sh - pt  # the first input row the chunk reads (negative: padding)
        y1 = (r1 - 1) * sh - pt + kh
        v0, v1 = max(0, y0), min(h, y1)
        padded = work.padded
        padded[:v0 - y0].fill(lowest)
        padded[max(v0, v1) - y0:y1 - y0].fill(lowest)
        if v1 > v0:
            padded[v0 - y0:v1 - y0, pl:pl + in_w] = x[b, v0:v1, :in_w]
        lines = padded.reshape(in_rows, need_w * c)
        count = r1 - r0
        maxima = work.maxima[:count]
        last = (count - 1) * sh + 1
        # TF's max skips NaN, as fmax does.
        np.copyto(maxima, lines[0:last:sh])
        for i in range(1, kh):
            np.fmax(maxima, lines[i:i + last:sh], out=maxima)
        pixels = maxima.reshape(count, need_w, c)
        target = out[b, r0:r1]
        last = (ow - 1) * sw + 1
        np.copyto(target, pixels[:, 0:last:sw])
        for j in range(1, kw):
            np.fmax(target, pixels[:, j:j + last:sw], out=target)

    if worth_threads(out.size * kh * kw):
        run_blocks(chunk, len(chunks))
    else:
        for index in range(len(chunks)):
            chunk(index)
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
