"""A depthwise convolution and the 1x1 convolution that reads it, a chunk of rows at a time:
this runtime's ``_FusedSeparableConv2D`` (formed by ``runtime.optimize.separable``).

Keras' SeparableConv2D and the depthwise/pointwise pairs of MobileNet and Xception are two
kernels apart. Here each chunk of the depthwise output's rows (``DepthwiseTaps.sums_into``) is
multiplied by the pointwise filter while it is still in cache, on the thread that made it: the
depthwise output never goes to memory, and threads inside a run take one hand-off for the pair
instead of one each. The two steps keep their own BiasAdd and activation. A call that the chunked
way does not cover (another depthwise algorithm, another dtype, an empty output, or chunks that
cannot be shared evenly over the threads) runs the two convolutions one after the other, with
the kernels' own checks and messages.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.intra_op import PARALLEL_MIN_MACS, run_blocks, threads
from runtime.kernels.math_ops_common import FLOAT32, Kernel
from runtime.kernels.nn_ops_common import Derived, Key, scratch
from runtime.kernels.nn_ops_conv import ConvAttrs, block_activation, conv_core, depthwise_core
from runtime.kernels.nn_ops_conv_gemm import Activation, Weights, add_bias_, block_rows
from runtime.kernels.nn_ops_depthwise import (
    Chunks,
    DepthwiseShape,
    DepthwiseTaps,
    choose_depthwise,
)
from runtime.kernels.nn_ops_fused import bias_arg, fused_op_names
from runtime.kernels.registry import NodeContext, kernel


def epilogue_of(node: NodeContext, attr: str) -> tuple[bool, str]:
    """(whether it adds a bias, its activation or "") for a ``fused_ops``-style attr: nothing,
    BiasAdd, or BiasAdd and an activation."""
    fused = fused_op_names(node, attr)
    if not fused:
        return False, ""
    if fused[0] == "BiasAdd" and len(fused) <= 2:
        return True, fused[1] if len(fused) == 2 else ""
    raise UnimplementedError(f"{node.op}: unsupported {attr} {fused}", node=node.name,
                             op=node.op)


class _Rows:
    """A thread's buffer for one chunk of the depthwise output."""

    def __init__(self, rows: int, width: int) -> None:
        self.values = np.empty((rows, width), FLOAT32)
        self.nbytes = self.values.nbytes


@kernel("_FusedSeparableConv2D")
def fused_separable_conv2d(node: NodeContext) -> Kernel:
    attrs = ConvAttrs.of(node)
    alpha = float(node.attr("leakyrelu_alpha", 0.2))
    depthwise_bias, depthwise_act = epilogue_of(node, "depthwise_fused_ops")
    pointwise_bias, pointwise_act = epilogue_of(node, "fused_ops")
    if not attrs.nhwc:
        raise UnimplementedError(f"{node.op}: only NHWC", node=node.name, op=node.op)
    depthwise_activation = block_activation(depthwise_act, alpha)
    pointwise_activation = block_activation(pointwise_act, alpha)
    # The pair one after the other, for the calls the chunked way does not cover.
    depthwise = depthwise_core(node, attrs)
    pointwise = conv_core(node, dataclasses.replace(
        attrs, strides=(1, 1), dilations=(1, 1), padding="VALID", explicit=((0, 0), (0, 0))))
    prepared = Derived()
    matrices = Derived()

    @functools.lru_cache(maxsize=8)
    def chunked(x_shape: tuple[int, ...], fd_shape: tuple[int, ...],
                fp_shape: tuple[int, ...]) -> DepthwiseTaps | None:
        """The depthwise algorithm, when the chunked way covers these shapes."""
        if len(x_shape) != 4 or len(fd_shape) != 4 or len(fp_shape) != 4:
            return None
        n, h, w, c = x_shape
        kh, kw, fc, multiplier = fd_shape
        if fc != c or multiplier != 1 or fp_shape[:3] != (1, 1, c):
            return None
        rows, cols = attrs.geometry(h, w, kh, kw)
        shape = DepthwiseShape(n, h, w, c, kh, kw, 1, attrs.strides, attrs.dilations, rows,
                               cols, np.dtype(FLOAT32))
        algorithm = choose_depthwise(shape)
        return algorithm if isinstance(algorithm, DepthwiseTaps) else None

    expected = 1 + int(depthwise_bias) + int(pointwise_bias)

    def apart(x: np.ndarray, fd: np.ndarray, bd: np.ndarray | None, fp: np.ndarray,
              bp: np.ndarray | None) -> np.ndarray:
        middle = depthwise(x, fd, bd, depthwise_activation).astype(x.dtype, copy=False)
        return pointwise(middle, fp, bp, pointwise_activation).astype(x.dtype, copy=False)

    def run(x: np.ndarray, fd: np.ndarray, *rest: np.ndarray) -> np.ndarray:
        if len(rest) != expected:
            raise InvalidArgumentError(f"{node.op}: expected {expected + 2} inputs, got "
                                       f"{len(rest) + 2}")
        bd = rest[0] if depthwise_bias else None
        fp = rest[int(depthwise_bias)]
        bp = rest[int(depthwise_bias) + 1] if pointwise_bias else None
        arrays = (x, fd, fp, *(b for b in (bd, bp) if b is not None))
        algorithm = (chunked(x.shape, fd.shape, fp.shape)
                     if all(a.dtype == FLOAT32 for a in arrays) else None)
        if algorithm is None:
            return apart(x, fd, bd, fp, bp)
        s = algorithm.shape
        o = fp.shape[3]
        if bd is not None:
            bd = bias_arg((bd,), s.c)
        if bp is not None:
            bp = bias_arg((bp,), o)
        weights = prepared.get((fd,) if bd is None else (fd, bd), algorithm.filter_key,
                               lambda: algorithm.prepare(fd, bd))
        matrix = matrices.get((fp,), "matrix", lambda: np.ascontiguousarray(fp.reshape(s.c, o)))
        y = _separable(algorithm, np.ascontiguousarray(x), weights, depthwise_activation,
                       matrix, bp, pointwise_activation)
        return apart(x, fd, bd, fp, bp) if y is None else y

    return run


# Rows of a product, at least, where the chunks allow: OpenBLAS packs the whole 1x1 filter again
# for every product (as ``nn_ops_conv_gemm._BLOCK_ROWS`` says), and Xception's 19x19 maps cut in
# two chunks made its pairs 2% slower than the two kernels apart.
_PRODUCT_ROWS = 512
# Spread groups may differ this much from the mean when there are fewer than two a thread (odd
# row counts cannot be halved): Xception's 19 rows in 10 + 9 made its pairs 2.4% slower on two
# threads than the two kernels apart. With more groups, handing them out one at a time evens
# the threads' shares out.
_MOST_UNEVEN = 1.02


def product_runs(chunks: list[tuple[int, int, int]], ow: int, threads: int,
                 spread: bool) -> list[tuple[int, int]]:
    """Runs [first, end) of consecutive chunks, one product each: enough chunks for
    ``_PRODUCT_ROWS`` rows where there are chunks enough, and when spread a multiple of the
    threads (as even as the chunks allow), so that the threads finish together."""
    rows = max(r1 - r0 for _, r0, r1 in chunks) * ow
    count = -(-len(chunks) // max(1, -(-_PRODUCT_ROWS // max(rows, 1))))
    if spread:
        count = min(len(chunks), -(-count // threads) * threads)
    bounds = [len(chunks) * i // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(count)]


@dataclass(frozen=True)
class _Layout:
    """How a call at one thread count is cut: the depthwise chunks, their runs (one product
    each) and the rows of the largest run; whether the runs go to the threads."""

    spread: bool
    cut: Chunks
    groups: list[tuple[int, int]]
    most: int


@functools.lru_cache(maxsize=64)
def _layout(algorithm: DepthwiseTaps, threads: int, o: int) -> _Layout | None:
    """The layout, or None when too few runs would leave the threads unevenly loaded (the 1x1
    convolution alone shares its rows evenly)."""
    s = algorithm.shape
    oh, ow = s.rows.out, s.cols.out
    # Spread when either convolution alone would have been.
    spread = threads > 1 and max(algorithm.macs, s.n * oh * ow * s.c * o) >= PARALLEL_MIN_MACS
    cut = algorithm.chunking(threads, spread)
    groups = product_runs(cut.chunks, ow, threads, spread)
    sizes = [sum(cut.chunks[i][2] - cut.chunks[i][1] for i in range(a, b)) for a, b in groups]
    most = max(sizes)
    if spread and len(sizes) < 2 * threads and most * len(sizes) > _MOST_UNEVEN * sum(sizes):
        return None
    return _Layout(spread, cut, groups, most)


def _separable(algorithm: DepthwiseTaps, x: np.ndarray, weights: Weights,
               depthwise_activation: Activation, matrix: np.ndarray, bias: np.ndarray | None,
               activation: Activation) -> np.ndarray | None:
    """The pair a run of chunks at a time, or None when ``_layout`` says to run it apart."""
    s = algorithm.shape
    oh, ow = s.rows.out, s.cols.out
    c, o = matrix.shape
    layout = _layout(algorithm, threads(), o)
    if layout is None:
        return None
    spread, cut, groups, most = layout.spread, layout.cut, layout.groups, layout.most
    out = np.empty((s.n, oh, ow, o), FLOAT32)
    flat = out.reshape(-1, o)
    key = Key(("separable-rows", s, most))
    width = ow * c
    step = block_rows(c, o)

    def group(index: int) -> None:
        """The chunks of run ``index``: their depthwise rows one under the other, then the 1x1
        product of all of them (consecutive chunks are consecutive output rows)."""
        start, end = groups[index]
        middle = scratch(key, lambda: _Rows(most, width)).values
        rows = 0
        for number in range(start, end):
            _, r0, r1 = cut.chunks[number]
            part = middle[rows:rows + r1 - r0]
            algorithm.sums_into(x, weights, cut, number, part)
            rows += r1 - r0
        part = middle[:rows]
        if depthwise_activation is not None:
            depthwise_activation(part)
        b, r0, _ = cut.chunks[start]
        first = (b * oh + r0) * ow
        pixels = part.reshape(rows * ow, c)
        # In blocks, as the 1x1 convolution alone takes them: each block's bias and activation
        # while it is in cache.
        for row in range(0, rows * ow, step):
            target = flat[first + row:first + min(row + step, rows * ow)]
            np.matmul(pixels[row:row + step], matrix, out=target)
            add_bias_(target, bias)
            if activation is not None:
                activation(target)

    if spread and len(groups) > 1:
        run_blocks(group, len(groups))
    else:
        for index in range(len(groups)):
            group(index)
    return out
