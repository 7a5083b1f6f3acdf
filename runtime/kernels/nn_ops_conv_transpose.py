"""Conv2DBackpropInput (transposed convolution) as one forward convolution.

With stride s, padded input row ``Y * s + a`` (0 <= a < s) receives the output-gradient rows
``Y - u`` through exactly the filter taps ``i`` with ``i * dilation == u * s + a``. So every
phase ``a`` of the result is a stride-1 correlation of ``dy`` with a small sub-filter, and all
phases (rows and columns) together are one correlation whose output channels are
(row phase, column phase, channel). One forward convolution computes them; interleaving the
phases and cropping the padding gives the result. No scatter-add, and no multiplications by the
zeros that inserting stride gaps into ``dy`` would create.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from runtime.kernels.clamps import relu_
from runtime.kernels.nn_ops_common import Key, Window, scratch
from runtime.kernels.nn_ops_conv_gemm import ConvShape, Weights, choose


@dataclass(frozen=True)
class _Axis:
    taps: int  # rows of the sub-filter
    shift: tuple[int, ...]  # per filter tap: its row in the sub-filter
    phase: tuple[int, ...]  # per filter tap: its phase
    window: Window  # the forward correlation's geometry over dy
    crop: int  # leading dy rows that no result row reads
    offset: int  # first result row within the interleaved phases
    blocks: int  # result rows per phase


def _axis(size: int, dy_size: int, ksize: int, stride: int, dilation: int,
          pad_before: int) -> _Axis:
    u = [(k * dilation) // stride for k in range(ksize)]
    umax = max(u, default=0)
    first = pad_before // stride
    end = (pad_before + size - 1) // stride + 1 if size else first
    blocks = end - first
    top = umax - first
    crop = max(0, -top)
    top = max(0, top)
    available = max(0, dy_size - crop)
    bottom = max(0, blocks + umax - top - available)
    return _Axis(
        taps=umax + 1,
        shift=tuple(umax - v for v in u),
        phase=tuple((k * dilation) % stride for k in range(ksize)),
        window=Window(blocks, top, bottom),
        crop=crop,
        offset=pad_before - first * stride,
        blocks=blocks,
    )


class _Phases:
    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.z = np.empty(shape, dtype)
        self.nbytes = self.z.nbytes


@dataclass(frozen=True)
class TransposeWeights:
    forward: Weights  # for the phase correlation
    filter: np.ndarray  # HWIO, for the direct route
    bias: np.ndarray | None
    finite: bool  # the filter and bias are finite


class TransposeConv:
    """``prepare(f, bias)`` -> weights; ``run(dy, weights, relu) -> dx`` for one
    (input size, filter, dy) shape."""

    def __init__(self, sizes: tuple[int, int, int, int], kh: int, kw: int, o: int,
                 dy_hw: tuple[int, int], strides: tuple[int, int],
                 dilations: tuple[int, int], rows: Window, cols: Window,
                 dtype: np.dtype) -> None:
        n, h, w, c = sizes
        self.sizes = sizes
        self.strides = strides
        self.rows = _axis(h, dy_hw[0], kh, strides[0], dilations[0], rows.pad_before)
        self.cols = _axis(w, dy_hw[1], kw, strides[1], dilations[1], cols.pad_before)
        self.kh, self.kw, self.c, self.o = kh, kw, c, o
        self.dilations = dilations
        self.windows = (rows, cols)
        self.dtype = dtype
        # Whether the combined sub-filter has zero taps (a non-finite dy would meet them).
        self.gaps = self.rows.taps * self.cols.taps * strides[0] * strides[1] != kh * kw
        phases = strides[0] * strides[1]
        self.forward = choose(ConvShape(
            n, max(0, dy_hw[0] - self.rows.crop), max(0, dy_hw[1] - self.cols.crop), o,
            self.rows.taps, self.cols.taps, phases * c, (1, 1), (1, 1),
            self.rows.window, self.cols.window, dtype,
        ))
        self.key = Key(("transpose-phases", self.forward.shape))
        self.filter_key = ("transpose", strides, self.rows.shift, self.rows.phase,
                           self.cols.shift, self.cols.phase, self.forward.filter_key)

    def _phases(self) -> _Phases:
        return _Phases(self.forward.shape.out_shape, self.dtype)

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> TransposeWeights:
        """The forward correlation's filter, [taps_h, taps_w, O, (row phase, col phase, C)],
        and bias (repeated per phase), in the layout its algorithm multiplies with."""
        finite = bool(np.isfinite(f).all()) and (bias is None or bool(np.isfinite(bias).all()))
        sh, sw = self.strides
        sub = np.zeros((self.rows.taps, self.cols.taps, self.o, sh, sw, self.c), self.dtype)
        r, q = self.rows, self.cols
        i = np.arange(self.kh)[:, None]
        j = np.arange(self.kw)[None, :]
        shift_i, shift_j = np.array(r.shift, np.intp)[i], np.array(q.shift, np.intp)[j]
        phase_i, phase_j = np.array(r.phase, np.intp)[i], np.array(q.phase, np.intp)[j]
        sub[shift_i, shift_j, :, phase_i, phase_j, :] = f.transpose(0, 1, 3, 2)
        tiled = None if bias is None else np.tile(bias, sh * sw)
        forward = self.forward.prepare(sub.reshape(r.taps, q.taps, self.o, -1), tiled)
        return TransposeWeights(forward, f, bias, finite)

    def __call__(self, dy: np.ndarray, weights: TransposeWeights, relu: bool) -> np.ndarray:
        n, h, w, c = self.sizes
        if n == 0 or h == 0 or w == 0 or c == 0:
            return np.zeros(self.sizes, self.dtype)
        if not weights.finite or (self.gaps and not math.isfinite(np.sum(dy))):
            return self._scatter(dy, weights, relu)
        r, q = self.rows, self.cols
        sh, sw = self.strides
        if sh == 1 and sw == 1:
            activation = relu_ if relu else None
            full = self.forward(dy[:, r.crop:, q.crop:], weights.forward, activation)
        else:
            z = scratch(self.key, self._phases).z
            self.forward(dy[:, r.crop:, q.crop:], weights.forward, relu_ if relu else None,
                         out=z)
            full = np.empty((n, r.blocks * sh, q.blocks * sw, c), self.dtype)
            np.copyto(full.reshape(n, r.blocks, sh, q.blocks, sw * c),
                      z.reshape(n, r.blocks, q.blocks, sh, sw * c).transpose(0, 1, 3, 2, 4))
        return np.ascontiguousarray(full[:, r.offset:r.offset + h, q.offset:q.offset + w])

    def _scatter(self, dy: np.ndarray, weights: TransposeWeights, relu: bool) -> np.ndarray:
        """The direct route: every tap's product with ``dy`` added onto the padded result."""
        n, h, w, c = self.sizes
        kh, kw, o = self.kh, self.kw, self.o
        rows, cols = self.windows
        (sh, sw), (dh, dw) = self.strides, self.dilations
        oh, ow = dy.shape[1], dy.shape[2]
        taps = (dy.reshape(-1, o) @ weights.filter.reshape(kh * kw * c, o).T).reshape(
            n, oh, ow, kh, kw, c)
        padded = np.zeros((n, h + rows.pad_before + rows.pad_after + kh * dh,
                           w + cols.pad_before + cols.pad_after + kw * dw, c), self.dtype)
        for i in range(kh):
            for j in range(kw):
                padded[:, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                       j * dw:j * dw + (ow - 1) * sw + 1:sw] += taps[:, :, :, i, j]
        dx = padded[:, rows.pad_before:rows.pad_before + h, cols.pad_before:cols.pad_before + w]
        dx = np.ascontiguousarray(dx)
        if weights.bias is not None:
            dx += weights.bias
        return relu_(dx) if relu else dx
