"""3x3 convolution at stride 1 by Winograd's minimal filtering, F(2x2, 3x3).

Each 2x2 block of outputs (a tile) is computed from the 4x4 block of input under it: the
input's 16 values and the filter's are each taken to a transformed space (``B^T d B``,
``G g G^T``) where the convolution is 16 elementwise products, and back (``A^T m A``). Over the
channels those products are 16 matrix products, ``[tiles, C] x [C, O]``, with 16 multiply-adds
per tile and channel pair where the patch matrix's product has 36 (9 per output): 2.25x fewer.
The transforms are additions and subtractions of whole strided views (one numpy call each),
which cost much less than the multiplications they save once both C and O are 64 or more.

On ResNet50's 3x3 layers (56x56x64 to 7x7x512) it takes 0.63-0.78x the time of the patch
matrix and its product, with the same size of error against float64 (a few 1e-7 relative):
the transforms' coefficients are 0, 1, -1 and 1/2. It is chosen for float32 only, where
both channel counts are at least ``MIN_CHANNELS`` and the layer has ``MIN_MACS`` of work.

Work is done in blocks of tile rows of one image, each in its thread's own scratch: the input
transform of the block's tiles, the 16 products, the output transform written into the
output, then the bias and the fused activation on those output rows while they are in cache.
With threads inside a run, the blocks are shared out; a map with too few tiles to share
(ResNet50's 7x7 maps have 16) is shared by the filter's columns instead, each thread
transforming the block's input itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.intra_op import threads, worth_threads
from runtime.kernels.nn_ops_common import Key, scratch
from runtime.kernels.nn_ops_conv_gemm import (
    Activation,
    ConvAlgorithm,
    ConvShape,
    PaddedInput,
    Weights,
    column_ranges,
    spread,
)

# Both the input and output channels at least this many, and at least this many multiply-adds
# of the direct product per call: below either, the transforms (and their numpy calls' fixed
# costs) take more than the products save (measured: 14x14x64 -> 64, 7.2M, 5-10% slower than
# the patch matrix; 28x28x64 -> 64, 29M, 20% faster; 56x56x32 -> 32 even).
MIN_CHANNELS = 64
MIN_MACS = 16_000_000
# Tiles per block, about: a block's transformed input, [16, tiles, C] floats, and its products
# stay within the last-level cache.
_BLOCK_TILES = 512
# Threads share a block's tiles while each gets at least this many; with fewer they share the
# filter's columns.
_SPLIT_MIN_TILES = 64

# G, for the filter transform G g G^T.
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def applies(shape: ConvShape) -> bool:
    s = shape
    return ((s.kh, s.kw) == (3, 3) and s.strides == (1, 1) and s.dilations == (1, 1)
            and s.dtype == np.float32 and min(s.c, s.o) >= MIN_CHANNELS
            and s.n * s.rows.out * s.cols.out * 9 * s.c * s.o >= MIN_MACS)


class _Work:
    """One thread's scratch for a block of ``tiles`` tiles (``rows`` tile rows of ``tw``):
    the input after its row transform, the transformed input, the products and the output
    transform's row sums."""

    def __init__(self, rows: int, tw: int, width: int, c: int, o: int, dtype: np.dtype) -> None:
        tiles = rows * tw
        self.rows = np.empty((4, rows, width, c), dtype)
        self.v = np.empty((16, tiles, c), dtype)
        self.m = np.empty((16, tiles, o), dtype)
        self.s = np.empty((2, 4, rows, tw, o), dtype)
        self.nbytes = self.rows.nbytes + self.v.nbytes + self.m.nbytes + self.s.nbytes


@dataclass(frozen=True)
class _Cut:
    """Blocks (image, first tile row, end tile row), the filter's column ranges, the tile rows
    of the largest block and the widest range, and the scratch key for those."""

    blocks: list[tuple[int, int, int]]
    columns: tuple[tuple[int, int], ...]
    rows: int
    widest: int
    key: Key


class Winograd(ConvAlgorithm):
    filter_key = "winograd-2x2-3x3"

    def __init__(self, shape: ConvShape) -> None:
        super().__init__(shape)
        s = shape
        self.th, self.tw = -(-s.rows.out // 2), -(-s.cols.out // 2)
        # The padded input covers every tile's 4x4 input: 2 more than the tiles' outputs.
        self.height, self.width = 2 * self.th + 2, 2 * self.tw + 2
        pt, pl = s.rows.pad_before, s.cols.pad_before
        self.in_h = max(0, min(s.h, self.height - pt))
        self.in_w = max(0, min(s.w, self.width - pl))
        self.padded_key = Key(("conv-winograd-padded", s))
        self.macs = s.n * self.th * self.tw * 16 * s.c * s.o
        self._cuts: dict[int, _Cut] = {}

    def prepare(self, f: np.ndarray, bias: np.ndarray | None) -> Weights:
        """[3, 3, C, O] -> G f G^T, [16, C, O], computed in float64."""
        u = np.einsum("ai,ijco,bj->abco", _G, f.astype(np.float64), _G)
        return np.ascontiguousarray(u.reshape(16, *f.shape[2:]).astype(self.shape.dtype)), bias

    def _cut(self, count: int) -> _Cut:
        cut = self._cuts.get(count)
        if cut is None:
            s = self.shape
            rows = max(1, min(self.th, _BLOCK_TILES // self.tw))
            per_image = -(-self.th // rows)
            columns: tuple[tuple[int, int], ...] = ((0, s.o),)
            if count > 1 and worth_threads(self.macs):
                if s.n * self.th * self.tw < _SPLIT_MIN_TILES * count:
                    columns = column_ranges(s.o, count)
                elif s.n * per_image < count:
                    per_image = min(self.th, -(-count // s.n))
            rows = -(-self.th // per_image)
            blocks = [(i, r, min(self.th, r + rows)) for i in range(s.n)
                      for r in range(0, self.th, rows)]
            widest = max(b - a for a, b in columns)
            cut = self._cuts[count] = _Cut(blocks, columns, rows, widest,
                                           Key(("conv-winograd-work", s, rows, widest)))
        return cut

    def __call__(self, x: np.ndarray, weights: Weights, activation: Activation,
                 out: np.ndarray | None = None) -> np.ndarray:
        s = self.shape
        oh, ow, tw = s.rows.out, s.cols.out, self.tw
        padded = scratch(self.padded_key,
                         lambda: PaddedInput(s, (self.height, self.width))).padded
        pt, pl = s.rows.pad_before, s.cols.pad_before
        padded[:, pt:pt + self.in_h, pl:pl + self.in_w] = x[:, :self.in_h, :self.in_w]
        u, bias = weights
        y = self._output(out)
        flat = y.reshape(-1, s.o)
        cut = self._cut(threads())

        def part(index: int) -> None:
            number, column = divmod(index, len(cut.columns))
            image, r0, r1 = cut.blocks[number]
            first, end = cut.columns[column]
            rows, tiles = r1 - r0, (r1 - r0) * tw
            work = scratch(cut.key, lambda: _Work(cut.rows, tw, self.width, s.c, cut.widest,
                                                  s.dtype))
            # B^T d B, rows then columns: d0 - d2, d1 + d2, d2 - d1, d1 - d3.
            src = padded[image, 2 * r0:2 * r1 + 2]
            d = [src[k:k + 2 * rows:2] for k in range(4)]
            r = work.rows[:, :rows]
            _transform(d, r)
            v = work.v[:, :tiles].reshape(4, 4, rows, tw, s.c)
            for a in range(4):
                _transform([r[a][:, k:k + 2 * tw:2] for k in range(4)], v[a])
            m = work.m[:, :tiles, :end - first]
            np.matmul(work.v[:, :tiles], u[:, :, first:end], out=m)
            # A^T m A, rows then columns: m0 + m1 + m2, m1 - m2 - m3.
            mm = m.reshape(4, 4, rows, tw, end - first)
            sums = work.s[:, :, :rows, :, :end - first]
            _back(mm, sums)
            top, bottom = 2 * r0, min(2 * r1, oh)
            region = y[image, top:bottom, :, first:end]
            for a in range(2):
                for b in range(2):
                    target = region[a::2, b::2]
                    h, w = target.shape[:2]
                    sa = sums[a]
                    if b == 0:
                        np.add(sa[0, :h, :w], sa[1, :h, :w], out=target)
                        target += sa[2, :h, :w]
                    else:
                        np.subtract(sa[1, :h, :w], sa[2, :h, :w], out=target)
                        target -= sa[3, :h, :w]
            rows_out = flat[(image * oh + top) * ow:(image * oh + bottom) * ow, first:end]
            if bias is not None:
                np.add(rows_out, bias[first:end], out=rows_out)
            if activation is not None:
                activation(rows_out)

        spread(part, len(cut.blocks) * len(cut.columns), self.macs)
        return y


def _transform(d: list[np.ndarray], out: np.ndarray) -> None:
    """B^T along the first axis of the four views ``d``, into ``out[0..3]``."""
    np.subtract(d[0], d[2], out=out[0])
    np.add(d[1], d[2], out=out[1])
    np.subtract(d[2], d[1], out=out[2])
    np.subtract(d[1], d[3], out=out[3])


def _back(m: np.ndarray, sums: np.ndarray) -> None:
    """A^T along the first axis of ``m`` ([4, 4, ...]), into ``sums`` ([2, 4, ...])."""
    np.add(m[0], m[1], out=sums[0])
    sums[0] += m[2]
    np.subtract(m[1], m[2], out=sums[1])
    sums[1] -= m[3]
