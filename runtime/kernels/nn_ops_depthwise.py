"""Depthwise convolution as one batched matrix product per block of images.

The input is laid out as a phase grid (``nn_ops_grid``), channels outermost, so that the patch
matrix of each channel, ``[taps, cells]``, is a few large copies. numpy's batched ``matmul`` then
multiplies each channel's ``[multiplier, taps]`` filter with its patches, giving the output
channels first; the valid cells are copied into the NHWC output with the bias added on the way.
This touches each value a few times, where a per-tap multiply-add over NHWC slices would run
numpy's inner loops over only the handful of channels. Every step works on each channel alone,
so with threads inside a run (``runtime.intra_op``) the channels are split between them.

With one filter per channel (multiplier 1) and many channels, summing the taps' windows
straight from the padded input is the faster way (``DepthwiseTaps``): with the input laid out
in column phases, the windows of the taps reading one phase are one strided view whose inner
runs are whole rows of pixels and channels, and one ``einsum`` per phase multiplies and sums
them. On MobileNet's, EfficientNet's and Xception's layers (32 to 1152 channels) it is 2-8x
faster than the grid, strided or not; from 16 channels (``TAPS_MIN_CHANNELS``) it is faster on
all but the smallest maps (28x28x16 at stride 2: 12% slower). Where the package's compiled loop
was built, float32 sums run in it instead of the einsums.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from runtime.intra_op import run_blocks, threads, worth_threads
from runtime.kernels.nn_ops_common import Key, Window, scratch, view
from runtime.kernels.nn_ops_conv_gemm import (
    Activation,
    GridScratch,
    Weights,
    add_bias_,
    crop_into,
    grid_blocks,
)
from runtime.kernels.nn_ops_grid import Grid, grid_axis

_compiled: ModuleType | None
try:
    from runtime.kernels import _depthwise as _compiled
except ImportError:  # built without a C compiler
    _compiled = None

# Whether float32 DepthwiseTaps sum in the compiled loop (``_depthwise.c``), for filters of at
# most its MAX_TAPS taps.
COMPILED = _compiled is not None and _compiled.supported()
COMPILED_MAX_TAPS = 1024

# Grid cells per block: each channel's product is [multiplier, taps] x [taps, cells], far from
# the sizes that BLAS would thread.
_BLOCK_CELLS = 2048
# Channels per thread, at least: fewer make copies too short to be worth a thread.
_MIN_THREAD_CHANNELS = 8
# With one filter per channel and at least this many channels, the tap-by-tap way is used.
TAPS_MIN_CHANNELS = 16
# Output rows per chunk of the tap-by-tap way: about this many bytes. Smaller chunks pay more
# numpy calls and gain nothing from the cache (measured on MobileNetV2's and EfficientNet's
# layers: a row at a time is 1.3-3.2x slower than whole images).
_TAPS_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class DepthwiseShape:
    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    multiplier: int
    strides: tuple[int, int]
    dilations: tuple[int, int]
    rows: Window
    cols: Window
    dtype: np.dtype

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.rows.out, self.cols.out, self.c * self.multiplier)


class _Product:
    """A thread's product buffer for its share of the channels."""

    def __init__(self, size: int, dtype: np.dtype) -> None:
        self.values = np.empty(size, dtype)
        self.nbytes = self.values.nbytes


class Depthwise:
    """``prepare(f, bias)`` -> weights; ``depthwise(x, weights, activation)`` -> NHWC output, for one
    input shape. The bias rides in the product as an extra tap that reads ones."""

    def __init__(self, shape: DepthwiseShape) -> None:
        s = shape
        self.shape = s
        self.empty = s.n == 0 or s.rows.out == 0 or s.cols.out == 0 or s.c * s.multiplier == 0
        self.empty = self.empty or s.kh * s.kw == 0
        self.filter_key: Hashable = "empty"
        if self.empty:
            return
        self.grid = Grid(
            s.n, s.c,
            grid_axis(s.h, s.kh, s.strides[0], s.dilations[0], s.rows),
            grid_axis(s.w, s.kw, s.strides[1], s.dilations[1], s.cols),
            s.rows.out, s.cols.out,
        )
        self.order = self.grid.tap_order()
        self.filter_key = ("depthwise+bias", tuple(self.order))
        self.blocks = grid_blocks(s.n, self.grid.used, _BLOCK_CELLS)
        self.width = max((i1 - i0) * self.grid.used for i0, i1 in self.blocks)  # widest block
        self.key = Key(("depthwise", s, tuple(self.blocks)))
        self.macs = s.n * s.rows.out * s.cols.out * s.c * s.multiplier * (s.kh * s.kw + 1)

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        """[kh, kw, C, M] (and bias [C * M]) -> [C, M, taps + 1], taps in patch order."""
        s = self.shape
        if self.empty:
            return f, bias
        taps = [f[i, j] for i, j in self.order]
        taps.append(np.zeros((s.c, s.multiplier), f.dtype) if bias is None
                    else bias.reshape(s.c, s.multiplier).astype(f.dtype))
        return np.ascontiguousarray(np.stack(taps, axis=-1)), None

    def _scratch(self) -> GridScratch:
        s = self.shape
        return GridScratch(self.grid, s.c * s.multiplier, self.blocks, s.dtype, s.kh * s.kw,
                            True)

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation) -> np.ndarray:
        s = self.shape
        if self.empty:
            y = add_bias_(np.zeros(s.out_shape, s.dtype), weights[1])
            return y if activation is None else activation(y)
        ws = scratch(self.key, self._scratch)
        gw = self.grid.cols.cells
        oh, ow = s.rows.out, s.cols.out
        cm = s.c * s.multiplier
        mult = s.multiplier
        out = np.empty(s.out_shape, s.dtype)

        def channels(c0: int, c1: int) -> None:
            """Every step for channels [c0, c1): they touch no other channel's cells, and the
            product goes to a buffer of their own (in the shared one, a channel's place moves
            with the block's width, into another thread's channels)."""
            for target, (rows, cols) in ws.fills:
                np.copyto(target[c0:c1], x[:, rows, cols, c0:c1].transpose(3, 0, 1, 2))
            own = (c1 - c0) * mult
            buffer = ws.product if own == cm else scratch(
                Key(("depthwise-product", s, c0, c1)), lambda: _Product(own * self.width, s.dtype)
            ).values
            for i0, i1, pairs, patches in ws.blocks:
                for dst, src in pairs:
                    np.copyto(dst[c0:c1], src[c0:c1])
                m = patches.shape[-1]
                product = buffer[:own * m].reshape(c1 - c0, mult, m)
                np.matmul(weights[0][c0:c1], patches[c0:c1], out=product)
                valid = product.reshape(own, i1 - i0, oh, gw)[..., :ow]
                valid = valid.transpose(1, 2, 3, 0)
                crop_into(valid, out[i0:i1, ..., c0 * mult:c1 * mult], activation)

        # Threads split the channels (one image has work enough): each writes its own
        # channels of the caller's buffers.
        parts = min(threads(), s.c // _MIN_THREAD_CHANNELS)
        if parts > 1 and worth_threads(self.macs):
            bounds = [s.c * i // parts for i in range(parts + 1)]
            run_blocks(lambda i: channels(bounds[i], bounds[i + 1]), parts)
        else:
            channels(0, s.c)
        return out


class _Padded:
    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.values = np.zeros(shape, dtype)
        self.nbytes = self.values.nbytes


@dataclass(frozen=True)
class _TapGroup:
    """The taps ``first``, ``first + step``... of each filter row: ``count`` taps reading one
    phase, from its column ``column`` on, ``column_step`` columns apart."""

    first: int
    step: int
    phase: int
    column: int
    column_step: int
    count: int


@dataclass(frozen=True)
class Chunks:
    """DepthwiseTaps' chunks for one number of threads: (image, first row, end row) each, the
    rows of the largest, and the scratch keys of its sum and of its padded input rows."""

    chunks: list[tuple[int, int, int]]
    rows: int
    key: Key
    window_key: Key


class DepthwiseTaps:
    """Multiplier 1: ``out = sum over taps of window(tap) * filter(tap)``, channel by channel,
    on chunks of output rows; the bias and Relu are applied to those rows while they are in
    cache. Chunks of rows are independent, so threads inside a run share them out.

    The padded input is kept as column phases: phase ``p`` holds the padded columns ``p``,
    ``p + sw``, ``p + 2 sw``... for a stride ``sw`` along the width (stride 1: one phase, the
    padded input itself). A tap's window over an output row is then one run of ``ow * C``
    values of one phase, whatever the stride. The taps reading one phase are evenly spaced in
    it, so their windows are one strided view ``[kh, taps, rows, ow * C]``, and one ``einsum``
    multiplies and sums them all: a single numpy call per phase and chunk, about twice as fast
    as a multiply and an add per tap, and holding the interpreter lock only between calls.

    Each chunk lays out the padded input rows that it reads itself, in its thread's own buffer
    (neighbouring chunks both copy the rows they share): the copy is spread over the threads
    with the sums, and is still in cache when they read it.

    float32 chunks go to the compiled loop instead where it was built (``_depthwise.c``,
    ``COMPILED``): it sums each output value and its bias in registers, reading the taps
    straight from the unpadded input, so there is no copy; the filter is packed for it by
    ``prepare``. It is 1.8-3.9x faster than the einsums on MobileNetV2's and EfficientNetB0's
    layers."""

    def __init__(self, shape: DepthwiseShape) -> None:
        s = shape
        self.shape = s
        self.compiled = COMPILED and s.dtype == np.float32 and s.kh * s.kw <= COMPILED_MAX_TAPS
        self.filter_key: Hashable = (("depthwise-taps-packed",) if self.compiled
                                     else ("depthwise-taps", s.cols.out))
        oh, ow = s.rows.out, s.cols.out
        (sh, sw), (dh, dw) = s.strides, s.dilations
        self.need_h = (oh - 1) * sh + (s.kh - 1) * dh + 1
        self.need_w = (ow - 1) * sw + (s.kw - 1) * dw + 1
        self.phase_w = -(-self.need_w // sw)
        pt, pl = s.rows.pad_before, s.cols.pad_before
        self.copy_in = (sw > 1 or pt > 0 or pl > 0 or self.need_h > s.h
                        or self.need_w > s.w)
        self.in_h = max(0, min(s.h, self.need_h - pt))
        in_w = max(0, min(s.w, self.need_w - pl))
        # (phase, first phase column, input columns) for each phase the input reaches.
        self.fills = []
        for phase in range(sw):
            first = (phase - pl) % sw  # the first input column landing in this phase
            if first < in_w:
                self.fills.append((phase, (first + pl) // sw, slice(first, in_w, sw)))
        # Taps j and j + step read the same phase, step * dw / sw of its columns apart.
        step = sw // math.gcd(dw, sw)
        self.groups = [_TapGroup(first=j, step=step, phase=j * dw % sw, column=j * dw // sw,
                                 column_step=step * dw // sw, count=len(range(j, s.kw, step)))
                       for j in range(min(step, s.kw))]
        self.macs = s.n * oh * ow * s.c * (s.kh * s.kw + 1)
        self._chunks: dict[tuple[int, bool], Chunks] = {}  # by threads and spreading

    def chunking(self, threads: int, spread: bool | None = None) -> Chunks:
        """Chunks of output rows: about ``_TAPS_CHUNK_BYTES`` each, at least one per thread when
        the work is spread (by default: when it is worth it), and an image's all of the same
        size (give or take a row), so that the threads finish together."""
        spread = worth_threads(self.macs) if spread is None else spread
        chunking = self._chunks.get((threads, spread))
        if chunking is None:
            s = self.shape
            oh, ow = s.rows.out, s.cols.out
            rows = max(1, min(oh, _TAPS_CHUNK_BYTES // max(ow * s.c * s.dtype.itemsize, 1)))
            per_image = -(-oh // rows)
            if spread and s.n * per_image < threads:
                per_image = min(oh, -(-threads // s.n))
            rows = -(-oh // max(per_image, 1)) if oh else 1
            chunks = [(b, r0, min(oh, r0 + rows)) for b in range(s.n)
                      for r0 in range(0, oh, rows)]
            span = (rows - 1) * s.strides[0] + (s.kh - 1) * s.dilations[0] + 1
            chunking = self._chunks[(threads, spread)] = Chunks(
                chunks, rows, Key(("depthwise-taps-tmp", s, rows)),
                Key(("depthwise-taps-window", s, span)))
        return chunking

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        """[kh, kw, C, 1] -> each tap (and the bias) tiled along an output row,
        [kh, kw, ow * C]; for the compiled loop, the taps of each 8 channels together,
        [ceil(C / 8), kh * kw, 8], and the bias, both zero past C."""
        s = self.shape
        taps = np.ascontiguousarray(f[:, :, :, 0])
        if self.compiled:
            blocks = -(-s.c // 8)
            padded = np.zeros((s.kh * s.kw, blocks * 8), s.dtype)
            padded[:, :s.c] = taps.reshape(s.kh * s.kw, s.c)
            packed = np.ascontiguousarray(padded.reshape(-1, blocks, 8).transpose(1, 0, 2))
            if bias is None:
                return packed, None
            packed_bias = np.zeros(blocks * 8, s.dtype)
            packed_bias[:s.c] = bias
            return packed, packed_bias
        ow = self.shape.cols.out
        tiled_bias = None if bias is None else np.tile(bias, ow)
        return np.ascontiguousarray(np.tile(taps, (1, 1, ow))), tiled_bias

    def _rows(self, x: np.ndarray, cut: Chunks, b: int, r0: int, r1: int) -> np.ndarray:
        """The padded input rows that output rows [r0, r1) of image ``b`` read, as
        [rows, phase, phase column, C]: a view of ``x`` when no padding or phase is needed,
        else copied into this thread's buffer (padding cells zero)."""
        s = self.shape
        sh, dh = s.strides[0], s.dilations[0]
        first, end = r0 * sh, (r1 - 1) * sh + (s.kh - 1) * dh + 1  # padded rows
        if not self.copy_in:
            return x[b, first:end].reshape(end - first, 1, s.w, s.c)
        span = (cut.rows - 1) * sh + (s.kh - 1) * dh + 1
        rows = scratch(cut.window_key, lambda: _Padded(
            (span, s.strides[1], self.phase_w, s.c), s.dtype)).values
        # Input row i is padded row i + pt: the chunk's input rows are [lo, hi), at its rows
        # [lo + pt - first, hi + pt - first); those above and below are padding, zero when the
        # buffer was made, and again here if another chunk's input may have been there since.
        pt = s.rows.pad_before
        lo = min(max(first - pt, 0), self.in_h)
        hi = max(min(end - pt, self.in_h), lo)
        top, bottom = max(lo + pt - first, 0), max(hi + pt - first, 0)
        if cut.rows < s.rows.out:
            rows[:top].fill(0)
            rows[bottom:end - first].fill(0)
        for phase, column, columns in self.fills:
            part = x[b, lo:hi, columns]
            rows[top:bottom, phase, column:column + part.shape[1]] = part
        return rows

    def sums_into(self, x: np.ndarray, weights: Weights, cut: Chunks, index: int,
                  o: np.ndarray) -> None:
        """Chunk ``index``'s sums over the taps and the bias into ``o`` ([rows, ow * C],
        C-contiguous); ``x`` C-contiguous, ``weights`` as ``prepare`` made them."""
        s = self.shape
        taps, bias = weights
        b, r0, r1 = cut.chunks[index]
        rows = r1 - r0
        c = s.c
        if self.compiled and _compiled is not None:
            _compiled.sums(x[b], taps, bias, o.reshape(rows, s.cols.out, c), r0, s.strides,
                           (s.kh, s.kw), s.dilations, (s.rows.pad_before, s.cols.pad_before))
            return
        sh, dh = s.strides[0], s.dilations[0]
        src = self._rows(x, cut, b, r0, r1)
        phase_w = self.phase_w if self.copy_in else s.w
        row = (s.strides[1] if self.copy_in else 1) * phase_w * c  # one padded input row
        width = s.cols.out * c
        for number, group in enumerate(self.groups):
            windows = view(src, (s.kh, group.count, rows, width),
                           (dh * row, group.column_step * c, sh * row, 1),
                           (group.phase * phase_w + group.column) * c)
            group_taps = taps[:, group.first::group.step]
            if number == 0:
                np.einsum("ijrw,ijw->rw", windows, group_taps, out=o)
            else:
                t = scratch(cut.key, lambda: _Padded((cut.rows, width), s.dtype)).values
                np.einsum("ijrw,ijw->rw", windows, group_taps, out=t[:rows])
                np.add(o, t[:rows], out=o)
        if bias is not None:
            np.add(o, bias, out=o)

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation) -> np.ndarray:
        s = self.shape
        x = np.ascontiguousarray(x)
        out = np.empty(s.out_shape, s.dtype)
        width = s.cols.out * s.c
        cut = self.chunking(threads())

        def chunk(index: int) -> None:
            b, r0, r1 = cut.chunks[index]
            o = out[b, r0:r1].reshape(r1 - r0, width)
            self.sums_into(x, weights, cut, index, o)
            if activation is not None:
                activation(o)

        if worth_threads(self.macs):
            run_blocks(chunk, len(cut.chunks))
        else:
            for index in range(len(cut.chunks)):
                chunk(index)
        return out


def choose_depthwise(shape: DepthwiseShape) -> Depthwise | DepthwiseTaps:
    s = shape
    empty = s.n == 0 or s.rows.out == 0 or s.cols.out == 0 or s.c == 0 or s.kh * s.kw == 0
    if s.multiplier == 1 and s.c >= TAPS_MIN_CHANNELS and not empty:
        return DepthwiseTaps(shape)
    return Depthwise(shape)
