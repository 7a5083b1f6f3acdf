"""CPU kernels: array_ops reshaping — Reshape, Squeeze, ExpandDims, Transpose, BroadcastTo, Tile,
Pad, PadV2, MirrorPad, ReverseV2, and the optimizer's ``_RepeatAxes``.

The fast path of each kernel hands the arguments to numpy directly; when numpy refuses them the
slow path re-checks in TensorFlow's order and raises TensorFlow's message. Results may be views of
the input (reshape, transpose, reverse, broadcast): tensors are never modified in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import axis_key, int_vector, shape_str
from runtime.kernels.registry import NodeContext, kernel


def _reshape_dims(x: np.ndarray, sizes: list[int]) -> list[int]:
    """TensorFlow's Reshape rules, including its inference of -1 next to zero-sized dims."""
    unknown, product, sizes_have_zero = -1, 1, False
    dims = list(sizes)
    for d, size in enumerate(sizes):
        if size == -1:
            if unknown != -1:
                raise InvalidArgumentError(
                    f"Only one input size may be -1, not both {unknown} and {d}"
                )
            unknown = d
        elif size < 0:
            raise InvalidArgumentError(f"Size {d} must be non-negative, not {size}")
        elif size == 0:
            sizes_have_zero = True
        else:
            product *= size
    if unknown != -1:
        # Zero-sized input dims are left out (when the request has a zero too) so that the
        # other dims can still be inferred, as TensorFlow does.
        known, input_has_zero = 1, False
        for d in x.shape:
            if d > 0 or not sizes_have_zero:
                known *= d
            else:
                input_has_zero = True
        missing = known // product
        if not input_has_zero and product * missing != known:
            raise InvalidArgumentError(
                f"Input to reshape is a tensor with {known} values, but the requested shape "
                f"requires a multiple of {product}"
            )
        dims[unknown] = missing
    total = int(np.prod(dims, dtype=np.int64))
    if total != x.size:
        raise InvalidArgumentError(
            f"Input to reshape is a tensor with {x.size} values, but the requested shape has "
            f"{total}"
        )
    return dims


@kernel("Reshape")
def reshape(node: NodeContext) -> Callable[..., np.ndarray]:
    def reshape_(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
        if shape.ndim > 1:
            raise InvalidArgumentError(f"sizes input must be 1-D, not {shape_str(shape.shape)}")
        sizes = shape.tolist() if shape.ndim else [int(shape)]
        if min(sizes, default=0) >= -1:  # numpy would take any negative size as "infer"
            try:
                return x.reshape(sizes)
            except ValueError:
                pass
        return x.reshape(_reshape_dims(x, sizes))

    shape = node.constant_input(1)
    if isinstance(shape, np.ndarray) and shape.ndim <= 1 and shape.dtype.kind in "iu":
        fixed = tuple(shape.reshape(-1).tolist())
        if min(fixed, default=0) >= -1:

            def constant_reshape(x: np.ndarray) -> np.ndarray:
                try:
                    return x.reshape(fixed)
                except ValueError:
                    return x.reshape(_reshape_dims(x, list(fixed)))

            return node.bake(constant_reshape, 1)
    return reshape_


@kernel("_ReshapeByTemplate")
def reshape_by_template(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    """Reshape to ``[coeff * prod(x.shape[axes]) for coeff, axes in template]`` (see
    ``runtime.optimize.reshape``), with Reshape's rules for -1 and its errors."""
    template = tuple((int(c), tuple(int(a) for a in axes)) for c, axes in node.attr("template"))
    simple = all(len(axes) <= 1 and (c == 1 or not axes) for c, axes in template)
    # (True, axis) takes a dim of x; (False, size) is a constant.
    picks = tuple((True, axes[0]) if axes else (False, c) for c, axes in template)

    def sizes_of(x: np.ndarray) -> list[int]:
        shape = x.shape
        try:
            if simple:
                return [shape[v] if is_dim else v for is_dim, v in picks]
            return [
                c * int(np.prod([shape[a] for a in axes], dtype=np.int64)) for c, axes in template
            ]
        except IndexError:
            raise InvalidArgumentError(
                f"the target shape uses dims {[axes for _, axes in template]} of the input, "
                f"which has shape {shape_str(shape)}"
            ) from None

    def reshape_(x: np.ndarray) -> np.ndarray:
        sizes = sizes_of(x)
        if min(sizes, default=0) >= -1:
            try:
                return x.reshape(sizes)
            except ValueError:
                pass
        return x.reshape(_reshape_dims(x, sizes))

    return reshape_


@kernel("Squeeze")
def squeeze(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    axes = tuple(int(a) for a in node.attr("squeeze_dims"))
    if not axes:
        return np.squeeze

    def squeeze_(x: np.ndarray) -> np.ndarray:
        try:
            return np.squeeze(x, axes)
        except ValueError:  # out of range, not of size 1, or named twice (which TF allows)
            pass
        keep = set()
        for a in axes:
            if not -x.ndim <= a < x.ndim:
                raise InvalidArgumentError(
                    f"Tried to squeeze dim index {a} for tensor with {x.ndim} dimensions."
                )
            a = a + x.ndim if a < 0 else a
            if x.shape[a] != 1:
                raise InvalidArgumentError(
                    f"Can not squeeze dim[{a}], expected a dimension of 1, got {x.shape[a]}"
                )
            keep.add(a)
        return x.reshape([d for i, d in enumerate(x.shape) if i not in keep])

    return squeeze_


@kernel("ExpandDims")
def expand_dims(node: NodeContext) -> Callable[..., np.ndarray]:
    def expand(x: np.ndarray, dim: np.ndarray) -> np.ndarray:
        if dim.size != 1:
            raise InvalidArgumentError("'dim' must be a tensor with a single value")
        return _expand(x, int(dim.reshape(-1)[0]))

    dim = node.constant_input(1)
    if isinstance(dim, np.ndarray) and dim.size == 1:
        d = int(dim.reshape(-1)[0])
        return node.bake(lambda x: _expand(x, d), 1)
    return expand


def _expand(x: np.ndarray, d: int) -> np.ndarray:
    rank = x.ndim
    if not -rank - 1 <= d <= rank:
        raise InvalidArgumentError(
            f"Tried to expand dim index {d} for tensor with {rank} dimensions."
        )
    if d < 0:
        d += rank + 1
    return x.reshape(x.shape[:d] + (1,) + x.shape[d:])


def _check_perm(x: np.ndarray, perm: list[int]) -> None:
    rank = x.ndim
    if len(perm) != rank:
        raise InvalidArgumentError(
            f"transpose expects a vector of size {rank}. But input(1) is a vector of size "
            f"{len(perm)}"
        )
    seen = [False] * rank
    for d in perm:
        if not -rank <= d < rank:
            raise InvalidArgumentError(f"{d} is out of range [0 .. {rank})")
        seen[d] = True
    for i, present in enumerate(seen):
        if not present:
            raise InvalidArgumentError(f"{i} is missing from {{{','.join(str(d) for d in perm)}}}.")


@kernel("Transpose")
def transpose(node: NodeContext) -> Callable[..., np.ndarray]:
    def transpose_(x: np.ndarray, perm: np.ndarray) -> np.ndarray:
        axes = perm.tolist()
        try:
            return np.transpose(x, axes)
        except ValueError as err:
            _check_perm(x, int_vector(perm, "perm"))
            raise InvalidArgumentError(f"invalid permutation {axes}: {err}") from None

    perm = node.constant_input(1)
    if isinstance(perm, np.ndarray) and perm.ndim == 1 and perm.dtype.kind in "iu":
        fixed = perm
        axes = tuple(perm.tolist())

        def constant_transpose(x: np.ndarray) -> np.ndarray:
            if x.ndim != len(axes):
                return transpose_(x, fixed)
            try:
                return x.transpose(axes)
            except ValueError:
                return transpose_(x, fixed)

        return node.bake(constant_transpose, 1)
    return transpose_


@kernel("BroadcastTo")
def broadcast_to(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def broadcast(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
        dims = int_vector(shape, "shape")
        try:
            return np.broadcast_to(x, dims)
        except ValueError:
            raise InvalidArgumentError(
                f"Incompatible shapes: {shape_str(x.shape)} vs. {shape_str(dims)}"
            ) from None

    return broadcast


@kernel("Tile")
def tile(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def tile_(x: np.ndarray, multiples: np.ndarray) -> np.ndarray:
        reps = int_vector(multiples, "multiples")
        if len(reps) != x.ndim:
            raise InvalidArgumentError(
                f"Expected multiples argument to be a vector of length {x.ndim} but got length "
                f"{len(reps)}"
            )
        if reps.count(1) == len(reps):
            # Nothing to repeat: TensorFlow's kernel forwards its input then, and so do we.
            return x
        for i, r in enumerate(reps):
            if r < 0:
                raise InvalidArgumentError(f"Expected multiples[{i}] >= 0, but got {r}")
        return np.tile(x, reps)

    return tile_


# Below this many elements np.repeat's single call wins over several wide copies.
_REPEAT_MIN_SIZE = 4096
# An inner block of at most this many elements is copied column by column (one long strided copy
# per column and repeat), at most this many copies in all; wider blocks by one broadcast copy.
_NARROW_BLOCK = 8
_MAX_COLUMN_COPIES = 32
# A large result is built a slice of the first axis at a time, so that what one step writes is
# still in cache when the next step copies it.
_REPEAT_CHUNK_BYTES = 384 << 10


def _repeat_axis(x: np.ndarray, k: int, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """``np.repeat(x, k, axis)`` for contiguous ``x``, with wide inner loops where numpy's own
    would copy a few elements at a time (a repeat of the W axis of a map with 3 channels)."""
    shape = x.shape
    result_shape = shape[:axis] + (shape[axis] * k,) + shape[axis + 1:]
    if out is None:
        if x.size < _REPEAT_MIN_SIZE or x.dtype == object:
            return np.repeat(x, k, axis=axis)
        out = np.empty(result_shape, x.dtype)
    outer, inner = math.prod(shape[:axis + 1]), math.prod(shape[axis + 1:])
    blocks, source = out.reshape(outer, k, inner), x.reshape(outer, inner)
    if inner <= _NARROW_BLOCK and inner * k <= _MAX_COLUMN_COPIES and x.dtype != object:
        for j in range(inner):
            column = source[:, j]
            for r in range(k):
                blocks[:, r, j] = column
    else:
        blocks[...] = source[:, None, :]
    return out


@kernel("_RepeatAxes")
def repeat_axes(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    """``np.repeat`` along every axis with a count above one, last axis first: the later copies
    then move whole rows of what the earlier ones wrote."""
    repeats = tuple(int(r) for r in node.attr("repeats"))
    if any(r < 0 for r in repeats):
        raise InvalidArgumentError(f"_RepeatAxes: repeats must be >= 0, got {list(repeats)}",
                                   node=node.name, op=node.op)
    steps = [(axis, r) for axis, r in enumerate(repeats) if r != 1][::-1]
    growth = math.prod(repeats)

    def repeat_all(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        for i, (axis, r) in enumerate(steps):
            x = _repeat_axis(x, r, axis, out if i == len(steps) - 1 else None)
        return x

    def run(x: np.ndarray) -> np.ndarray:
        if x.ndim != len(repeats):
            raise InvalidArgumentError(
                f"_RepeatAxes: input has rank {x.ndim}, repeats are given for {len(repeats)} "
                "axes"
            )
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        n = x.shape[0] if x.ndim else 0
        row_bytes = x.nbytes // n * growth if n else 0
        if (len(steps) < 2 or repeats[0] != 1 or x.dtype == object or x.size < _REPEAT_MIN_SIZE
                or row_bytes * n <= _REPEAT_CHUNK_BYTES):
            return repeat_all(x)
        out = np.empty(tuple(d * r for d, r in zip(x.shape, repeats)), x.dtype)
        rows = max(1, _REPEAT_CHUNK_BYTES // max(1, row_bytes))
        for start in range(0, n, rows):
            repeat_all(x[start:start + rows], out[start:start + rows])
        return out

    return run


def _paddings(x: np.ndarray, paddings: np.ndarray) -> list[tuple[int, int]]:
    if paddings.ndim != 2 or paddings.shape[1] != 2:
        raise InvalidArgumentError(
            f"paddings must be a matrix with 2 columns: {shape_str(paddings.shape)}"
        )
    if paddings.shape[0] != x.ndim:
        raise InvalidArgumentError(
            "The first dimension of paddings must be the rank of inputs"
            f"{shape_str(paddings.shape)} {shape_str(x.shape)}"
        )
    pads = [(int(a), int(b)) for a, b in paddings.tolist()]
    for a, b in pads:
        if a < 0 or b < 0:
            raise InvalidArgumentError(f"Paddings must be non-negative: {a} {b}")
    return pads


def _pad_constant(x: np.ndarray, paddings: np.ndarray, value: object) -> np.ndarray:
    pads = _paddings(x, paddings)
    shape = [d + a + b for d, (a, b) in zip(x.shape, pads)]
    out = np.full(shape, value, dtype=x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))] = x
    return out


@kernel("Pad")
def pad(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def pad_(x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        return _pad_constant(x, paddings, b"" if x.dtype == object else 0)

    return pad_


@kernel("PadV2")
def pad_v2(node: NodeContext) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    def pad_(x: np.ndarray, paddings: np.ndarray, constant_values: np.ndarray) -> np.ndarray:
        if constant_values.size != 1:
            raise InvalidArgumentError(
                f"constant_values must be a scalar. Found: {shape_str(constant_values.shape)}"
            )
        return _pad_constant(x, paddings, constant_values.reshape(()))

    return pad_


def _down(start: int, stop: int) -> slice:
    """Indices from ``start`` down to ``stop`` (exclusive); a stop of -1 means through index 0."""
    return slice(start, stop if stop >= 0 else None, -1)


@kernel("MirrorPad")
def mirror_pad(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    mode = node.attr("mode")
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise InvalidArgumentError(f"mode must be either REFLECT or SYMMETRIC, got {mode!r}")
    # REFLECT mirrors around the edge element, SYMMETRIC includes it.
    offset = 1 if mode == "REFLECT" else 0

    def pad_(x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        pads = _paddings(x, paddings)
        for d, (a, b) in zip(x.shape, pads):
            if offset and (a >= d or b >= d):
                raise InvalidArgumentError(
                    f"paddings must be less than the dimension size: {a}, {b} not less than {d}"
                )
            if a > d or b > d:
                raise InvalidArgumentError(
                    "paddings must be no greater than the dimension size: "
                    f"{a}, {b} greater than {d}"
                )
        out = x
        for axis, (a, b) in enumerate(pads):
            if a == 0 and b == 0:
                continue
            n = out.shape[axis]
            parts = [out]
            if a:  # indices a-1+offset down to offset
                parts.insert(0, out[axis_key(axis, _down(a - 1 + offset, offset - 1))])
            if b:  # indices n-1-offset down to n-offset-b
                parts.append(out[axis_key(axis, _down(n - 1 - offset, n - 1 - offset - b))])
            out = np.concatenate(parts, axis=axis)
        return out

    return pad_


@kernel("ReverseV2")
def reverse_v2(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def reverse(x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        axes = axis.tolist()
        if axis.ndim != 1:
            raise InvalidArgumentError(f"'dims' must be 1-dimension, not {axis.ndim}")
        if not axes:
            return x
        try:
            return np.flip(x, axes)
        except ValueError:
            pass
        seen = set()
        for i, a in enumerate(axes):
            if not -x.ndim <= a < x.ndim:
                raise InvalidArgumentError(
                    f"'axis'[{i}] = {a} is out of valid range [0, {x.ndim - 1}"
                )
            a = a + x.ndim if a < 0 else a
            if a in seen:
                raise InvalidArgumentError(f"axis {a} specified more than once.")
            seen.add(a)
        raise AssertionError("unreachable: numpy rejected axes that TensorFlow accepts")

    return reverse
