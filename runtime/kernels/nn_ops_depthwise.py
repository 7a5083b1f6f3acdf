"""Depthwise convolution as one batched matrix product per block of images.

The input is laid out as a phase grid (``nn_ops_grid``), channels outermost, so that the patch
matrix of each channel, ``[taps, cells]``, is a few large copies. numpy's batched ``matmul`` then
multiplies each channel's ``[multiplier, taps]`` filter with its patches, giving the output
channels first; the valid cells are copied into the NHWC output with the bias added on the way.
This touches each value a few times, where a per-tap multiply-add over NHWC slices would run
numpy's inner loops over only the handful of channels. Every step works on each channel alone,
so with threads inside a run (``runtime.intra_op``) the channels are split between them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from runtime.intra_op import run_blocks, threads, worth_threads
from runtime.kernels.nn_ops_common import Key, Window, scratch
from runtime.kernels.nn_ops_conv_gemm import (
    GridScratch,
    Weights,
    add_bias_,
    grid_blocks,
    relu_,
)
from runtime.kernels.nn_ops_grid import Grid, grid_axis

# Grid cells per block: each channel's product is [multiplier, taps] x [taps, cells], far from
# the sizes that BLAS would thread.
_BLOCK_CELLS = 2048
# Channels per thread, at least: fewer make copies too short to be worth a thread.
_MIN_THREAD_CHANNELS = 8


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
    """``prepare(f, bias)`` -> weights; ``depthwise(x, weights, relu)`` -> NHWC output, for one
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

    def __call__(self, x: np.ndarray, weights: Weights, relu: bool) -> np.ndarray:
        s = self.shape
        if self.empty:
            y = add_bias_(np.zeros(s.out_shape, s.dtype), weights[1])
            return relu_(y) if relu else y
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
                if relu:
                    np.fmax(valid, 0, out=out[i0:i1, ..., c0 * mult:c1 * mult])
                else:
                    np.copyto(out[i0:i1, ..., c0 * mult:c1 * mult], valid)

        # Threads split the channels (one image has work enough): each writes its own
        # channels of the caller's buffers.
        parts = min(threads(), s.c // _MIN_THREAD_CHANNELS)
        if parts > 1 and worth_threads(self.macs):
            bounds = [s.c * i // parts for i in range(parts + 1)]
            run_blocks(lambda i: channels(bounds[i], bounds[i + 1]), parts)
        else:
            channels(0, s.c)
        return out
