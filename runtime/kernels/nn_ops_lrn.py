"""CPU kernel: LRN (local response normalization over the channels of an NHWC tensor).

``out = x / (bias + alpha * sum(x[c - r .. c + r] ** 2)) ** beta``, computed as TensorFlow's CPU
kernel (``lrn_op.cc``) computes it, in the input's type (float32 or half):

* Usually as a product of the squares with a band matrix of ones. Every channel of a pixel
  enters every sum, so a square that is inf or NaN *outside* a channel's window still makes that
  channel NaN (``inf * 0``); the window sums here add the window's squares in channel order and
  then mark those channels.
* For more than 384 channels with ``beta`` 0.5 or 1, as a running sum of ``alpha * x ** 2`` that
  adds the square entering the window and subtracts the one leaving it.

The last step is ``x * (1 / s)`` for ``beta`` 1, ``x * rsqrt(s)`` for 0.5, and
``x * exp(log(s) * -beta)`` otherwise. TensorFlow computes those with Eigen's vectorized
approximations (a hardware reciprocal or rsqrt estimate refined by a Newton step, polynomial
exp/log), whose last bits depend on the CPU; here they are IEEE division and sqrt and numpy's
exp/log, so float32 results differ from TensorFlow's in the last few bits (at most 3 ulp in the
recorded cases) and half results agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.registry import KernelError, NodeContext, kernel

_INT_MAX = 2**31 - 1
# lrn_op.cc: past this depth a running sum beats the band matrix (for beta 0.5 or 1).
_SINGLE_THREADED_DEPTH = 384


def _window_sums(values: np.ndarray, radius: int) -> np.ndarray:
    """For each channel, the sum of ``values`` over the channels within ``radius``, added in
    channel order (the order a row-by-band-matrix product adds them)."""
    depth = values.shape[-1]
    total = np.zeros_like(values)
    for offset in range(-min(radius, depth - 1), min(radius, depth - 1) + 1):
        if offset < 0:
            total[..., -offset:] += values[..., : depth + offset]
        else:
            total[..., : depth - offset] += values[..., offset:]
    return total


def _band_scale(x: np.ndarray, radius: int, bias: np.generic, alpha: np.generic) -> np.ndarray:
    squares = x * x
    scale: np.ndarray = _window_sums(squares, radius) * alpha + bias
    bad = ~np.isfinite(squares)
    if bad.any():
        # A non-finite square outside a channel's window meets a zero of the band matrix.
        counts = bad.astype(np.int64)
        outside = counts.sum(axis=-1, keepdims=True) - _window_sums(counts, radius)
        scale[outside > 0] = np.nan
    return scale


def _running_scale(x: np.ndarray, radius: int, bias: np.generic, alpha: np.generic) -> np.ndarray:
    depth = x.shape[-1]
    # Channels first, so that each step of the running sum works on whole contiguous planes.
    scaled = np.moveaxis(x * x * alpha, -1, 0).copy()
    scale = np.empty_like(scaled)
    acc = np.zeros_like(scaled[0])
    for c in range(min(radius, depth)):
        acc += scaled[c]
    for c in range(depth):
        if c + radius < depth:
            acc += scaled[c + radius]
        scale[c] = bias + acc
        if c >= radius:
            acc -= scaled[c - radius]
    return np.moveaxis(scale, 0, -1)


@kernel("LRN")
def lrn(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    dtype = node.np_dtype("T", np.dtype(np.float32))
    if dtype not in (np.float32, np.float16):
        raise KernelError(node, f"no CPU kernel for T={dtype} (float and half only)")
    radius = int(node.attr("depth_radius"))
    # FastBoundsCheck compares as unsigned: a negative radius is "too large" as well.
    if not 0 <= radius < _INT_MAX:
        raise InvalidArgumentError(f"depth_radius = {radius} larger than int max")
    kind = dtype.type
    bias, alpha, beta = (kind(node.attr(name)) for name in ("bias", "alpha", "beta"))

    def run(x: np.ndarray) -> np.ndarray:
        if x.ndim != 4:
            raise InvalidArgumentError("in must be 4-dimensional")
        if x.size >= _INT_MAX:
            raise InvalidArgumentError("argument to LRN too large")
        depth = x.shape[3]
        if depth + radius > _INT_MAX:
            raise InvalidArgumentError(
                f"depth {depth} + depth_radius {radius} exceeds int max."
            )
        if x.size == 0:
            return np.empty(x.shape, dtype)
        x = x.astype(dtype, copy=False)
        # Overflow, 0 * inf and the like are values here, as in TensorFlow.
        with np.errstate(all="ignore"):
            if depth > _SINGLE_THREADED_DEPTH and beta in (0.5, 1):
                scale = _running_scale(x, radius, bias, alpha)
            else:
                scale = _band_scale(x, radius, bias, alpha)
            if beta == 1:
                factor = kind(1) / scale
            elif beta == 0.5:
                factor = kind(1) / np.sqrt(scale)
            else:
                factor = np.exp(np.log(scale) * -beta)
            out: np.ndarray = x * factor
            return out

    return run
