"""Helpers shared by the nn_ops kernels: data formats, window geometry, per-thread scratch
buffers and values derived from constant weights (dtype helpers are in ``math_ops_common``)."""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.math_ops_common import BFLOAT16, FLOAT16
from runtime.kernels.registry import NodeContext

# numpy has no BLAS path (bfloat16: no matmul at all) for these; TF accumulates them in float32.
LOW_FLOATS = frozenset({FLOAT16, BFLOAT16})


def channels_last(node: NodeContext, spatial_dims: int = 2) -> bool:
    """True for NHWC-style formats, False for NCHW-style; rejects anything else."""
    fmt = node.attr("data_format", "NHWC")
    last = {2: "NHWC", 3: "NDHWC"}[spatial_dims]
    first = {2: "NCHW", 3: "NCDHW"}[spatial_dims]
    if fmt == last:
        return True
    if fmt == first:
        return False
    raise InvalidArgumentError(f"{node.op}: invalid data_format {fmt!r}", node=node.name,
                               op=node.op)


def to_nhwc(x: np.ndarray) -> np.ndarray:
    return x.transpose(0, 2, 3, 1)


def to_nchw(x: np.ndarray) -> np.ndarray:
    return x.transpose(0, 3, 1, 2)


def spatial_pair(values: Sequence[int], nhwc: bool, what: str, op: str) -> tuple[int, int]:
    """(H, W) entries of a 4-element NHWC/NCHW attr, requiring 1 on the batch and depth dims."""
    values = [int(v) for v in values]
    if len(values) != 4:
        raise InvalidArgumentError(f"{op}: {what} must have 4 elements, got {values}")
    n, h, w, c = values if nhwc else (values[0], values[2], values[3], values[1])
    if n != 1 or c != 1:
        raise UnimplementedError(
            f"{op}: {what} in the batch and depth dimensions are not supported, got {values}"
        )
    return h, w


def explicit_pads(
    values: Sequence[int], nhwc: bool, op: str
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from the 8-element ``explicit_paddings`` attr."""
    values = [int(v) for v in values]
    if len(values) != 8:
        raise InvalidArgumentError(
            f"{op}: explicit_paddings must have 8 elements for EXPLICIT padding, got {values}"
        )
    pairs = [(values[i], values[i + 1]) for i in range(0, 8, 2)]
    n, h, w, c = pairs if nhwc else (pairs[0], pairs[2], pairs[3], pairs[1])
    if n != (0, 0) or c != (0, 0):
        raise UnimplementedError(f"{op}: padding in the batch and depth dimensions: {values}")
    if min(values) < 0:
        raise InvalidArgumentError(f"{op}: explicit paddings must be nonnegative: {values}")
    return h, w


@dataclass(frozen=True)
class Window:
    """Geometry of one spatial dimension of a windowed op."""

    out: int
    pad_before: int
    pad_after: int


def window(size: int, ksize: int, stride: int, dilation: int, padding: str,
           explicit: tuple[int, int] = (0, 0)) -> Window:
    """Output size and padding of one spatial dimension, as TensorFlow computes them."""
    if stride <= 0:
        raise InvalidArgumentError(f"Stride must be > 0, but got {stride}")
    if dilation <= 0:
        raise InvalidArgumentError(f"Dilation rate must be >= 1, but got {dilation}")
    effective = (ksize - 1) * dilation + 1
    if padding == "SAME":
        out = (size + stride - 1) // stride
        needed = max(0, (out - 1) * stride + effective - size)
        before, after = needed // 2, needed - needed // 2
    else:
        before, after = explicit if padding == "EXPLICIT" else (0, 0)
        # C++ integer division truncates toward zero, so a slightly negative numerator gives 0.
        numerator = size + before + after - effective + stride
        out = int(numerator / stride) if numerator < 0 else numerator // stride
    if out < 0:
        raise InvalidArgumentError(
            f"Computed output size would be negative: {out} [input_size: {size}, "
            f"effective_filter_size: {effective}, stride: {stride}]"
        )
    return Window(out, before, after)


def check_padding(node: NodeContext, allow_explicit: bool = True) -> str:
    padding = str(node.attr("padding"))
    allowed = ("SAME", "VALID", "EXPLICIT") if allow_explicit else ("SAME", "VALID")
    if padding not in allowed:
        raise InvalidArgumentError(f"{node.op}: padding must be one of {allowed}, got {padding!r}",
                                   node=node.name, op=node.op)
    return padding


def pad_hw(x: np.ndarray, rows: Window, cols: Window, value: Any = 0) -> np.ndarray:
    """``x`` (NHWC) with its H and W dims padded by ``value``; ``x`` itself when no padding."""
    if not (rows.pad_before or rows.pad_after or cols.pad_before or cols.pad_after):
        return x
    n, h, w, c = x.shape
    out = np.full((n, h + rows.pad_before + rows.pad_after, w + cols.pad_before + cols.pad_after,
                   c), value, dtype=x.dtype)
    out[:, rows.pad_before:rows.pad_before + h, cols.pad_before:cols.pad_before + w] = x
    return out


def taps(rows: Window, cols: Window, kh: int, kw: int, strides: tuple[int, int],
         dilations: tuple[int, int]) -> list[tuple[int, int, tuple[slice, slice]]]:
    """For each filter tap (i, j), the slices of the padded input that the tap reads."""
    sh, sw = strides
    dh, dw = dilations
    result = []
    for i in range(kh):
        r0 = i * dh
        row = slice(r0, r0 + (rows.out - 1) * sh + 1, sh) if rows.out else slice(0, 0)
        for j in range(kw):
            c0 = j * dw
            col = slice(c0, c0 + (cols.out - 1) * sw + 1, sw) if cols.out else slice(0, 0)
            result.append((i, j, (row, col)))
    return result


def scalar_int(value: Any, what: str, op: str) -> int:
    array = np.asarray(value)
    if array.ndim != 0:
        raise InvalidArgumentError(f"{op}: {what} must be a scalar, got shape {list(array.shape)}")
    return int(array)


# --- per-thread scratch ------------------------------------------------------------------------


class Sized(Protocol):
    nbytes: int


S = TypeVar("S", bound=Sized)

# Scratch kept per thread, least recently used dropped first beyond this many bytes.
_SCRATCH_LIMIT = 32 << 20
_local = threading.local()


class Key:
    """A hashable value whose hash is computed once: scratch is looked up on every call."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: Hashable) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Key) and self.value == other.value)


def scratch(key: Hashable, build: Callable[[], S]) -> S:
    """This thread's scratch object for ``key``, built on first use and reused afterwards.

    Kernels run concurrently on several request threads, so scratch is never shared between
    threads; within a thread a plan runs one kernel at a time. The key must pin down everything
    that the object's contents depend on (e.g. which cells of a padded buffer stay zero).
    Objects larger than the whole allowance are built afresh on every call.
    """
    # Values of any type: the key pins down which one each is.
    cache: OrderedDict[Hashable, Any] | None = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = OrderedDict()
        _local.nbytes = 0
    found: S | None = cache.get(key)
    if found is not None:
        cache.move_to_end(key)
        return found
    built = build()
    if built.nbytes > _SCRATCH_LIMIT:
        return built  # too big to keep: used once and freed
    cache[key] = built
    _local.nbytes += built.nbytes
    while _local.nbytes > _SCRATCH_LIMIT and len(cache) > 1:
        _, dropped = cache.popitem(last=False)
        _local.nbytes -= dropped.nbytes
    return built


def view(base: np.ndarray, shape: Sequence[int], strides: Sequence[int],
         offset: int = 0) -> np.ndarray:
    """A strided view into contiguous ``base`` (``offset`` and ``strides`` in elements)."""
    item = base.itemsize
    return np.ndarray(tuple(shape), base.dtype, base, offset * item,
                      tuple(s * item for s in strides))


# --- values derived from constant weights ------------------------------------------------------


def is_constant(array: np.ndarray) -> bool:
    """True when nothing can change ``array``'s contents: it and every array it views are
    read-only, down to immutable memory (constants and frozen variables are made this way)."""
    while True:
        if array.flags.writeable:
            return False
        base = array.base
        if not isinstance(base, np.ndarray):
            return base is None or isinstance(base, bytes)
        array = base


T = TypeVar("T")


class Derived:
    """Values computed from a kernel's weight arrays, remembered while the arrays are constant.

    Keyed by the arrays' identities plus an extra key; the entry holds the arrays, so an identity
    is never reused while cached. Arrays that may change are derived afresh on every call.
    """

    def __init__(self, limit: int = 8) -> None:
        self._limit = limit
        self._entries: dict[Hashable, tuple[tuple[np.ndarray, ...], Any]] = {}

    def get(self, arrays: tuple[np.ndarray, ...], extra: Hashable,
            build: Callable[[], T]) -> T:
        key = (*map(id, arrays), extra)
        hit = self._entries.get(key)
        if hit is not None:
            cached = hit[0]
            if all(map(operator.is_, cached, arrays)):
                value: T = hit[1]
                return value
        value = build()
        if all(is_constant(a) for a in arrays):
            if len(self._entries) >= self._limit:
                self._entries.clear()
            self._entries[key] = (arrays, value)
        return value


_TILES = Derived(limit=256)
# Below this many elements the plain broadcast's lower call overhead wins.
WIDE_MIN_SIZE = 8192


def tiled(vector: np.ndarray, reps: int) -> np.ndarray:
    """``np.tile(vector, reps)``, remembered for constant vectors (biases, scales)."""
    return _TILES.get((vector,), reps, lambda: np.tile(vector, reps))


def channel_op(ufunc: np.ufunc, value: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``ufunc(value, vector)`` for a [C] vector along the last axis of a feature map, as a fresh
    array. numpy runs such a broadcast as an inner loop of C elements per pixel, which is slow for
    the few channels of small convolutional layers; tiling the vector along an image row gives
    inner loops of W * C. Small maps and other shapes take the plain broadcast."""
    if (value.size < WIDE_MIN_SIZE or value.ndim < 3 or vector.ndim != 1 or vector.shape[0] != value.shape[-1]
            or not value.flags.c_contiguous or value.dtype != vector.dtype):
        result: np.ndarray = ufunc(value, vector)
        return result
    width = value.shape[-2] * value.shape[-1]
    out = np.empty_like(value)
    ufunc(value.reshape(-1, width), tiled(vector, value.shape[-2]), out=out.reshape(-1, width))
    return out
