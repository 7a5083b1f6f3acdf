"""Convolution as matrix products: the algorithms behind Conv2D (and, through it,
Conv2DBackpropInput), chosen once per input shape.

- ``Pointwise``: a 1x1 filter without padding is one product of the (strided) pixels with the
  filter matrix.
- ``Patches`` (im2col): each output pixel's receptive field copied into a row of a patch
  matrix, straight from a strided view of the padded input, then one product with the filter
  matrix written into the output. The copy moves runs of ``kw * C`` values; with few input
  channels those runs are too short to copy fast.
- ``ChannelMajor``: for few input channels. The input is laid out as a phase grid (see
  ``nn_ops_grid``), where every tap's patch row is one long contiguous run, so building the patch
  matrix is a handful of big copies; the product is computed for the grid's cells and the valid
  outputs cropped out.

The bias rides in the product: the patch matrix has a column (row) of ones and the filter matrix
the bias as an extra row. A fused Relu is applied by the pass that crops the channel-major result
(in place after the product otherwise). Work is done in blocks of whole images (or image rows)
sized to stay in cache (and, when BLAS has threads of its own, below the size at which OpenBLAS
uses them); padded inputs and patch matrices live in per-thread scratch buffers reused from call
to call. With threads inside a run (``runtime.intra_op``), the blocks of a big product are
spread over them (``tiling``): each block writes its own rows of the output from its thread's
own patch matrix, and a product with too few rows to share is shared by its filter's columns.
The channel-major path shares each block's output rows instead: a part copies, multiplies and
crops its own rows. (Shared by the filter's columns, MobileNetV2's 3x3x3->32 stem took longer
on two threads than on one, 1.6 -> 2.5 ms.)
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from runtime.intra_op import (
    BLAS_SINGLE_THREADED,
    PARALLEL_MIN_MACS,
    run_blocks,
    threads,
    worth_threads,
)
from runtime.kernels.clamps import relu6_, relu6_into, relu_, relu_into
from runtime.kernels.nn_ops_common import WIDE_MIN_SIZE, Key, Window, scratch, tiled, view
from runtime.kernels.nn_ops_grid import Grid, grid_axis

# Fewer input channels than this take the channel-major path.
CHANNEL_MAJOR_BELOW = 8
# Rows of the patch matrix per block, with BLAS on the calling thread only. OpenBLAS packs the
# whole filter matrix again on every product, so blocks of few rows spend much of their time
# packing (measured on ResNet50: 64-row blocks cost 17% over the bare products, 512-row blocks
# 8%); a block's patch matrix still fits the last-level cache.
_BLOCK_ROWS = 512
# With BLAS threads of its own: OpenBLAS hands a product of at least this many multiply-adds
# (m * n * k) to a second thread. Its workers then spin for a while, taking a core from the
# caller: on a busy machine that turns a millisecond into tens. The blocks stay below it where
# they can.
_SINGLE_THREAD_MNK = 524288
_MULTI_BLAS_BLOCK_ROWS = 2048
# Threads share a product by rows while each gets at least this many; with fewer they share the
# filter's columns instead (the 7x7 maps at the end of a convnet have 49 rows per image).
_SPLIT_MIN_ROWS = 64
# Column ranges start at multiples of this: whole vector registers of the product's kernel.
_COLUMN_ALIGN = 16


def block_rows(k: int, o: int) -> int:
    """Patch rows per block for a [rows, k] x [k, o] product on one thread."""
    if BLAS_SINGLE_THREADED:
        return _BLOCK_ROWS
    return max(64, min(_MULTI_BLAS_BLOCK_ROWS, (_SINGLE_THREAD_MNK - 1) // max(k * o, 1)))


def spread(work: Callable[[int], None], count: int, macs: int) -> None:
    """``work(i)`` for each block: over the threads when the product is worth it."""
    if count > 1 and worth_threads(macs):
        run_blocks(work, count)
    else:
        for index in range(count):
            work(index)


def column_ranges(o: int, threads: int) -> tuple[tuple[int, int], ...]:
    """``o`` filter columns in ``threads`` ranges of whole vector widths (one range when there
    are too few columns to share)."""
    parts = min(threads, o // _COLUMN_ALIGN)
    if parts <= 1:
        return ((0, o),)
    bounds = [o * i // parts // _COLUMN_ALIGN * _COLUMN_ALIGN for i in range(parts)] + [o]
    return tuple(itertools.pairwise(bounds))


@dataclass(frozen=True)
class Tiling:
    """How a [m, k] x [k, o] product is cut: blocks of at most ``rows`` rows, and within a block
    the column ranges of the filter matrix, each a separate piece of work for the threads."""

    rows: int
    columns: tuple[tuple[int, int], ...]


def tiling(m: int, k: int, o: int, threads: int) -> Tiling:
    """The blocks for ``threads`` threads: as many row blocks as it takes to stay in cache, a
    multiple of ``threads`` so that each thread gets the same share; too few rows to share, one
    block whose filter columns are shared instead."""
    limit = max(1, min(block_rows(k, o), m))
    everything = ((0, o),)
    if threads <= 1 or m * k * o < PARALLEL_MIN_MACS:
        return Tiling(limit, everything)
    if m < _SPLIT_MIN_ROWS * threads:
        return Tiling(m, column_ranges(o, threads))
    blocks = -(-m // limit)
    blocks = -(-blocks // threads) * threads
    return Tiling(-(-m // blocks), everything)


@dataclass(frozen=True)
class ConvShape:
    """Everything a Conv2D computation depends on besides the values (NHWC, HWIO filter)."""

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    o: int
    strides: tuple[int, int]
    dilations: tuple[int, int]
    rows: Window
    cols: Window
    dtype: np.dtype

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.rows.out, self.cols.out, self.o)

    @property
    def padded(self) -> bool:
        return any((self.rows.pad_before, self.rows.pad_after, self.cols.pad_before,
                    self.cols.pad_after))


def add_bias_(y: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``y += bias`` along the last axis of a fresh C-contiguous ``y``, in long inner loops."""
    if bias is None or y.size == 0:
        return y
    if y.size < WIDE_MIN_SIZE or y.ndim < 2:
        np.add(y, bias, out=y)
    else:
        rows = y.reshape(-1, y.shape[-2] * y.shape[-1])
        np.add(rows, tiled(bias, y.shape[-2]), out=rows)
    return y


Weights = tuple[np.ndarray, "np.ndarray | None"]  # (filter matrix, bias not folded into it)
# A fused activation, in place (``nn_ops_activation.fused_activation``), or None. Algorithms
# apply it to each block of output rows as the block is written, while it is still in cache:
# on a large feature map a pass over the whole output afterwards reads it back from memory.
Activation = Callable[[np.ndarray], np.ndarray] | None


class ConvAlgorithm:
    """``prepare(f, bias)`` turns an HWIO filter and optional bias into the weights the
    algorithm multiplies with (callers cache them for constants; ``filter_key`` names their
    layout); ``algorithm(x, weights, activation, out=None)`` computes the NHWC output into ``out``
    (C-contiguous, of ``shape.out_shape``) or a fresh array."""

    filter_key: Hashable = "hwio"

    def __init__(self, shape: ConvShape) -> None:
        self.shape = shape

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        s = self.shape
        return np.ascontiguousarray(f.reshape(s.kh * s.kw * s.c, s.o)), bias

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation,
                 out: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def _output(self, out: np.ndarray | None) -> np.ndarray:
        return np.empty(self.shape.out_shape, self.shape.dtype) if out is None else out


def _with_bias_row(matrix: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """The filter matrix with the bias (or zeros) as an extra last row."""
    extra = np.zeros((1, matrix.shape[1]), matrix.dtype) if bias is None else bias[None, :]
    return np.ascontiguousarray(np.concatenate([matrix, extra.astype(matrix.dtype)]))


class Empty(ConvAlgorithm):
    """No output values, or a filter without taps (every output is the bias)."""

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation,
                 out: np.ndarray | None = None) -> np.ndarray:
        y = self._output(out)
        y.fill(0)
        add_bias_(y, weights[1])
        return y if activation is None else activation(y)


class _Pixels:
    def __init__(self, shape: ConvShape) -> None:
        self.pixels = np.empty((shape.n * shape.rows.out * shape.cols.out, shape.c + 1),
                               shape.dtype)
        self.pixels[:, shape.c] = 1  # the bias column
        self.nbytes = self.pixels.nbytes


class Pointwise(ConvAlgorithm):
    """Pixels read in place when every one is used and the output is no wider than the input;
    otherwise gathered into scratch, with a column of ones that carries the bias. (In place, the
    bias is one more pass over the output: on an expansion, such as MobileNetV2's 24 -> 144
    channels, copying the narrower input is the cheaper pass.)"""

    def __init__(self, shape: ConvShape) -> None:
        super().__init__(shape)
        s = shape
        self.in_place = (s.strides == (1, 1) and (s.h, s.w) == (s.rows.out, s.cols.out)
                         and s.c >= s.o)
        self.filter_key = "hwio" if self.in_place else "hwio+bias"
        self.key = Key(("conv-pointwise", shape))

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        if self.in_place:
            return super().prepare(f, bias)
        matrix, _ = super().prepare(f, None)
        return _with_bias_row(matrix, bias), None

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation,
                 out: np.ndarray | None = None) -> np.ndarray:
        s = self.shape
        (sh, sw), oh, ow = s.strides, s.rows.out, s.cols.out
        if self.in_place:
            pixels = x.reshape(-1, s.c)
        else:
            pixels = scratch(self.key, lambda: _Pixels(s)).pixels
            np.copyto(pixels[:, :s.c].reshape(s.n, oh, ow, s.c),
                      x[:, :(oh - 1) * sh + 1:sh, :(ow - 1) * sw + 1:sw])
        y = self._output(out)
        flat = y.reshape(-1, s.o)
        matrix, bias = weights
        cut = tiling(flat.shape[0], pixels.shape[1], s.o, threads())
        columns = cut.columns
        step = cut.rows

        def block(index: int) -> None:
            part, column = divmod(index, len(columns))
            first, (first_column, end_column) = part * step, columns[column]
            if len(columns) == 1:
                rows = flat[first:first + step]
                np.matmul(pixels[first:first + step], matrix, out=rows)
                add_bias_(rows, bias)
            else:
                rows = flat[first:first + step, first_column:end_column]
                np.matmul(pixels[first:first + step], matrix[:, first_column:end_column],
                          out=rows)
                if bias is not None:
                    np.add(rows, bias[first_column:end_column], out=rows)
            if activation is not None:
                activation(rows)

        spread(block, -(-flat.shape[0] // step) * len(columns),
               flat.shape[0] * pixels.shape[1] * s.o)
        return y


def _blocks(n: int, per_image: int, rows_per_image: int,
            limit: int) -> list[tuple[int, int, int, int]]:
    """(first image, end image, first row, end row) blocks of at most about ``limit`` patch
    rows: several whole images, or row ranges of one image when an image alone is larger."""
    if per_image <= limit:
        step = max(1, limit // max(per_image, 1))
        return [(i, min(n, i + step), 0, rows_per_image) for i in range(0, n, step)]
    step = max(1, limit * rows_per_image // per_image)
    return [(i, i + 1, r, min(rows_per_image, r + step))
            for i in range(n) for r in range(0, rows_per_image, step)]


class PaddedInput:
    """Scratch for the whole batch padded to ``padded_hw``: the padding stays zero, as only the
    input's own cells are written on each call."""

    def __init__(self, shape: ConvShape, padded_hw: tuple[int, int]) -> None:
        s = shape
        self.padded = np.zeros((s.n, *padded_hw, s.c), s.dtype)
        self.nbytes = self.padded.nbytes


@dataclass(frozen=True)
class _PatchBlocks:
    """Patches' blocks for one number of threads: (first image, end image, first row, end
    row) each, the patch rows of the largest, its scratch key, and the filter columns shared
    within a block."""

    blocks: list[tuple[int, int, int, int]]
    rows: int
    key: Key
    columns: tuple[tuple[int, int], ...]


class _PatchRows:
    """One thread's patch matrix: blocks running on other threads have their own."""

    def __init__(self, shape: ConvShape, rows: int) -> None:
        s = shape
        k = s.kh * s.kw * s.c
        self.patches = np.empty((rows, k + 1), s.dtype)
        self.patches[:, k] = 1  # the bias column
        self.nbytes = self.patches.nbytes


class Patches(ConvAlgorithm):
    filter_key = "hwio+bias"

    def __init__(self, shape: ConvShape) -> None:
        super().__init__(shape)
        s = shape
        oh, ow = s.rows.out, s.cols.out
        # The extent of the padded input that the windows read.
        self.need_h = (oh - 1) * s.strides[0] + (s.kh - 1) * s.dilations[0] + 1
        self.need_w = (ow - 1) * s.strides[1] + (s.kw - 1) * s.dilations[1] + 1
        pt, pl = s.rows.pad_before, s.cols.pad_before
        self.copy_in = pt > 0 or pl > 0 or self.need_h > s.h or self.need_w > s.w
        # The part of the input inside that extent.
        self.in_h = max(0, min(s.h, self.need_h - pt))
        self.in_w = max(0, min(s.w, self.need_w - pl))
        self.padded_key = Key(("conv-patches-padded", s, self.need_h, self.need_w))
        self.macs = s.n * oh * ow * (s.kh * s.kw * s.c + 1) * s.o
        self._cuts: dict[int, _PatchBlocks] = {}  # by threads

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        matrix, _ = super().prepare(f, None)
        return _with_bias_row(matrix, bias), None

    def _padded(self) -> PaddedInput:
        return PaddedInput(self.shape, (self.need_h, self.need_w))

    def _cut(self, threads: int) -> _PatchBlocks:
        cut = self._cuts.get(threads)
        if cut is None:
            s = self.shape
            oh, ow = s.rows.out, s.cols.out
            tiles = tiling(s.n * oh * ow, s.kh * s.kw * s.c + 1, s.o, threads)
            blocks = _blocks(s.n, oh * ow, oh, tiles.rows)
            rows = max((i1 - i0) * (r1 - r0) * ow for i0, i1, r0, r1 in blocks)
            cut = self._cuts[threads] = _PatchBlocks(
                blocks, rows, Key(("conv-patches-rows", s, rows)), tiles.columns)
        return cut

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation,
                 out: np.ndarray | None = None) -> np.ndarray:
        s = self.shape
        oh, ow = s.rows.out, s.cols.out
        if self.copy_in:
            padded = scratch(self.padded_key, self._padded).padded
            pt, pl = s.rows.pad_before, s.cols.pad_before
            padded[:, pt:pt + self.in_h, pl:pl + self.in_w] = x[:, :self.in_h, :self.in_w]
            src = padded
        else:
            src = np.ascontiguousarray(x)
        _, hh, ww, c = src.shape
        sh, sw = s.strides
        dh, dw = s.dilations
        if dw == 1:  # a window row's taps are one run of kw * c values
            windows = view(src, (s.n, oh, ow, s.kh, s.kw * c),
                           (hh * ww * c, sh * ww * c, sw * c, dh * ww * c, 1))
        else:
            windows = view(src, (s.n, oh, ow, s.kh, s.kw, c),
                           (hh * ww * c, sh * ww * c, sw * c, dh * ww * c, dw * c, 1))
        k = s.kh * s.kw * c
        out = self._output(out)
        flat = out.reshape(-1, s.o)
        cut = self._cut(threads())
        matrix = weights[0]

        def fill(index: int) -> tuple[np.ndarray, np.ndarray]:
            """Block ``index``'s patch matrix (this thread's) and its rows of the output."""
            i0, i1, r0, r1 = cut.blocks[index]
            rows = (i1 - i0) * (r1 - r0) * ow
            patches = scratch(cut.key, lambda: _PatchRows(s, cut.rows)).patches[:rows]
            np.copyto(patches[:, :k].reshape((i1 - i0, r1 - r0) + windows.shape[2:]),
                      windows[i0:i1, r0:r1])
            first = (i0 * oh + r0) * ow
            return patches, flat[first:first + rows]

        if len(cut.columns) == 1:
            def block(index: int) -> None:
                patches, rows = fill(index)
                np.matmul(patches, matrix, out=rows)
                if activation is not None:
                    activation(rows)

            spread(block, len(cut.blocks), self.macs)
            return out
        # One block, too few rows to share: the threads share its columns.
        patches, rows = fill(0)

        def columns(index: int) -> None:
            first, end = cut.columns[index]
            part = rows[:, first:end]
            np.matmul(patches, matrix[:, first:end], out=part)
            if activation is not None:
                activation(part)

        spread(columns, len(cut.columns), self.macs)
        return out


class GridScratch:
    """The grid buffer, patch matrices (one per block size: each has its own row of ones) and
    the product buffer, with the copies of every block prepared."""

    def __init__(self, grid: Grid, o: int, blocks: list[tuple[int, int]], dtype: np.dtype,
                 taps: int, channels_outer: bool) -> None:
        used = grid.used
        c = grid.channels
        self.buf = grid.buffer(dtype)
        self.fills = grid.fill_views(self.buf)
        patches: dict[int, np.ndarray] = {}
        for i0, i1 in blocks:
            m = (i1 - i0) * used
            if m not in patches:
                if channels_outer:
                    patches[m] = np.empty((c, taps + 1, m), dtype)
                    patches[m][:, taps] = 1
                else:
                    patches[m] = np.empty((taps * c + 1, m), dtype)
                    patches[m][taps * c] = 1
        width = max(patches) if patches else 0
        self.product = np.empty(o * width, dtype)
        self.blocks = [
            (i0, i1, grid.patch_views(self.buf, patches[(i1 - i0) * used], i0, i1 - i0,
                                      channels_outer), patches[(i1 - i0) * used])
            for i0, i1 in blocks
        ]
        self.nbytes = self.buf.nbytes + self.product.nbytes + sum(p.nbytes for p in
                                                                  patches.values())


def grid_blocks(n: int, used: int, rows: int) -> list[tuple[int, int]]:
    """Blocks of whole images, about ``rows`` grid cells each."""
    per = max(1, rows // max(used, 1))
    return [(i, min(n, i + per)) for i in range(0, n, per)]


def fill_grid(fills: list[tuple[np.ndarray, tuple[slice, slice]]], x: np.ndarray) -> None:
    for target, (rows, cols) in fills:
        np.copyto(target, x[:, rows, cols, :].transpose(3, 0, 1, 2))


class ChannelMajor(ConvAlgorithm):
    def __init__(self, shape: ConvShape) -> None:
        super().__init__(shape)
        s = shape
        self.grid = Grid(
            s.n, s.c,
            grid_axis(s.h, s.kh, s.strides[0], s.dilations[0], s.rows),
            grid_axis(s.w, s.kw, s.strides[1], s.dilations[1], s.cols),
            s.rows.out, s.cols.out,
        )
        self.order = self.grid.tap_order()
        self.filter_key = ("taps+bias", tuple(self.order))
        self.blocks = grid_blocks(s.n, self.grid.used, block_rows(s.kh * s.kw * s.c + 1, s.o))
        self.key = Key(("conv-channel-major", s, tuple(self.blocks)))

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        rows = np.stack([f[i, j] for i, j in self.order])  # [tap, c, o] in patch order
        return _with_bias_row(rows.reshape(-1, self.shape.o), bias), None

    def _scratch(self) -> GridScratch:
        s = self.shape
        return GridScratch(self.grid, s.o, self.blocks, s.dtype, s.kh * s.kw, False)

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation,
                 out: np.ndarray | None = None) -> np.ndarray:
        s = self.shape
        ws = scratch(self.key, self._scratch)
        fill_grid(ws.fills, x)
        oh, ow, o = s.rows.out, s.cols.out, s.o
        gw, used = self.grid.cols.cells, self.grid.used
        out = self._output(out)
        lines = out.reshape(s.n, oh, ow * o)
        matrix = weights[0]

        def part(index: int, i0: int, i1: int, pairs: list[tuple[np.ndarray, np.ndarray]],
                 patches: np.ndarray, product: np.ndarray,
                 parts: list[tuple[int, int]]) -> None:
            """Output rows [h0, h1) of every image in block [i0, i1): their patch columns,
            their product rows and their crop are this part's alone."""
            h0, h1 = parts[index]
            first, end = h0 * gw, h1 * gw
            for dst, src in pairs:
                np.copyto(dst[..., first:end], src[..., first:end])
            for image in range(i1 - i0):
                cells = slice(image * used + first, image * used + end)
                np.matmul(patches[:, cells].T, matrix, out=product[cells])
                crop_into(product[cells].reshape(h1 - h0, gw * o)[:, :ow * o],
                          lines[i0 + image, h0:h1], activation)

        for i0, i1, pairs, patches in ws.blocks:
            m = patches.shape[-1]
            product = ws.product[:m * o].reshape(m, o)
            parts = row_parts(oh, m * matrix.shape[0] * o)
            if len(parts) > 1:
                run_blocks(functools.partial(part, i0=i0, i1=i1, pairs=pairs, patches=patches,
                                             product=product, parts=parts), len(parts))
                continue
            for dst, src in pairs:
                np.copyto(dst, src)
            np.matmul(patches.T, matrix, out=product)
            crop_into(product.reshape(i1 - i0, oh, gw * o)[:, :, :ow * o], lines[i0:i1],
                      activation)
        return out


def row_parts(rows: int, macs: int) -> list[tuple[int, int]]:
    """Output rows of an image in ranges for the threads, or one range when the product is
    not worth sharing. Up to four ranges a thread, so that one that starts late takes fewer,
    but about ``PARALLEL_MIN_MACS`` each at least: smaller ones lost more than they balanced
    (measured on the 3x3x3->32 and 7x7x3->64 stems)."""
    if not worth_threads(macs):
        return [(0, rows)]
    count = min(rows, max(threads(), min(4 * threads(), macs // PARALLEL_MIN_MACS)))
    return [(rows * i // count, rows * (i + 1) // count) for i in range(count)]


def crop_into(valid: np.ndarray, target: np.ndarray, activation: Activation) -> None:
    """The valid cells of a channel-major product into the output, activated (a fused Relu
    in the same pass as the copy)."""
    if activation is relu_:
        relu_into(valid, target)
    elif activation is relu6_:
        relu6_into(valid, target)
    else:
        np.copyto(target, valid)
        if activation is not None:
            activation(target)


def choose(shape: ConvShape) -> ConvAlgorithm:
    s = shape
    if s.n == 0 or s.rows.out == 0 or s.cols.out == 0 or s.o == 0 or s.kh * s.kw == 0:
        return Empty(shape)
    if s.kh == 1 and s.kw == 1 and not s.padded:
        return Pointwise(shape)
    # Strides split the grid into phases, each filled by a gather of single pixels: worth it
    # only when the patch rows would be very short.
    if s.c < CHANNEL_MAJOR_BELOW and (s.strides == (1, 1) or s.c <= 3):
        return ChannelMajor(shape)
    return Patches(shape)
