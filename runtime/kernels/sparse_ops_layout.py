"""CPU kernels: sparse tensors rearranged without arithmetic on their values — SparseReshape,
SparseReorder, SparseSlice, SparseConcat and SparseFillEmptyRows (which feature columns run before
every embedding lookup so that a row with no ids still gets a default one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.sparse_ops_common import (
    create_sparse,
    int_list,
    lexsort_rows,
    num_elements,
    stride_list,
    validate_sparse,
)

Arrays = tuple[np.ndarray, ...]


def _trunc_divmod(a: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    # C++ integer division truncates toward zero; numpy's floors.
    q = np.sign(a) * (np.abs(a) // b)
    return q, a - q * b


def _reshaped_dims(in_dims: list[int], target: list[int]) -> list[int]:
    """The output shape of a sparse reshape (``reshape_util.cc``): one -1 is inferred."""
    dense_size = num_elements(in_dims)
    out_dims, product, unknown = [], 1, -1
    for d, size in enumerate(target):
        if size == -1:
            if unknown != -1:
                raise InvalidArgumentError(
                    f"only one output dimension may be -1, not both {unknown} and {d}"
                )
            unknown = d
            out_dims.append(1)
        else:
            if size < 0:
                raise InvalidArgumentError(f"size {d} must be non-negative, not {size}")
            product *= size
            out_dims.append(size)
    if unknown != -1:
        if product <= 0:
            raise InvalidArgumentError(
                "reshape cannot infer the missing input size for an empty tensor unless all "
                "specified input sizes are non-zero"
            )
        missing = dense_size // product
        if product * missing != dense_size:
            raise InvalidArgumentError(
                f"Input to reshape is a SparseTensor with {dense_size} dense values, but the "
                f"requested shape requires a multiple of {product}. input_shape="
                f"{shape_str(in_dims)} output_shape={shape_str(out_dims)}"
            )
        out_dims[unknown] = missing
    out_size = num_elements(out_dims)
    if out_size != dense_size:
        raise InvalidArgumentError(
            f"Input to reshape is a tensor with {dense_size} dense values, but the requested "
            f"shape has {out_size}. input_shape={shape_str(in_dims)} "
            f"output_shape={shape_str(out_dims)}"
        )
    return out_dims


def sparse_reshape(indices: np.ndarray, shape: np.ndarray, new_shape: np.ndarray) -> Arrays:
    if indices.ndim != 2:
        raise InvalidArgumentError("Input must be a matrix.")
    if shape.ndim != 1:
        raise InvalidArgumentError("Input shape must be a vector.")
    if indices.shape[1] != shape.shape[0]:
        raise InvalidArgumentError("Input tensor rank must match input shape length.")
    if new_shape.ndim != 1:
        raise InvalidArgumentError(
            f"Target shape should be a vector but received shape {shape_str(new_shape.shape)}"
        )
    in_dims, target = int_list(shape), int_list(new_shape)
    # Feature columns reshape to the shape a tensor already has: nothing to check or compute.
    if target == in_dims and (not target or min(target) >= 0):
        return indices, shape
    out_dims = _reshaped_dims(in_dims, target)
    if out_dims == in_dims:
        return indices, shape
    nnz = indices.shape[0]
    out = np.zeros((nnz, len(out_dims)), np.int64)
    if nnz:
        product = num_elements([d for d in target if d != -1])
        if num_elements(in_dims) <= 0 or product <= 0:
            raise InvalidArgumentError(
                f"Input tensor has {nnz} non zero elements but input shape "
                f"({shape_str(in_dims)}) or output shape ({shape_str(out_dims)}) is empty"
            )
        flat = indices.astype(np.int64, copy=False) @ np.array(stride_list(in_dims), np.int64)
        out_strides = stride_list(out_dims)
        # Valid indices give non-negative offsets, where floor division is C++'s truncation.
        divide = np.divmod if min(out_strides, default=1) > 0 and flat.min() >= 0 else _trunc_divmod
        for j, stride in enumerate(out_strides):
            out[:, j], flat = divide(flat, stride)
    return out, np.array(out_dims, np.int64)


@kernel("SparseReshape")
def sparse_reshape_kernel(node: NodeContext) -> Callable[..., Any]:
    return sparse_reshape


@kernel("SparseReorder")
def sparse_reorder(node: NodeContext) -> Callable[..., Any]:
    def reorder(indices: np.ndarray, values: np.ndarray, shape: np.ndarray) -> Arrays:
        validate_sparse(indices, values, shape)
        order = lexsort_rows(indices)
        return indices[order], values[order]

    return reorder


@kernel("SparseSlice")
def sparse_slice(node: NodeContext) -> Callable[..., Any]:
    def slice_(indices: np.ndarray, values: np.ndarray, shape: np.ndarray, start: np.ndarray,
               size: np.ndarray) -> Arrays:
        validate_sparse(indices, values, shape)
        for name, arg in (("start", start), ("size", size)):
            if arg.ndim != 1:
                raise InvalidArgumentError(
                    f"Input {name} should be a vector but received shape {shape_str(arg.shape)}"
                )
        rank = shape.size
        for name, arg in (("start", start), ("size", size)):
            if arg.size != rank:
                raise InvalidArgumentError(
                    f"Expected {name} to be a vector of length {rank} but got length {arg.size}"
                )
        if np.any(size < 0):
            raise InvalidArgumentError(
                f"Expected a non-negative size, got {int(size[np.argmax(size < 0)])}"
            )
        end = start + size
        # A dimension past the end of the input is clipped, to zero at worst.
        out_shape = np.maximum(np.where(end < shape, size, shape - start), 0).astype(np.int64)
        hit = np.all((indices >= start) & (indices < end), axis=1)
        return indices[hit] - start, values[hit], out_shape

    return slice_


@kernel("SparseConcat")
def sparse_concat(node: NodeContext) -> Callable[..., Any]:
    n = int(node.attr("N"))
    concat_dim_attr = int(node.attr("concat_dim"))

    def concat(*args: np.ndarray) -> Arrays:
        inds, vals, shapes = args[:n], args[n:2 * n], args[2 * n:]
        for kind, group, ndim in (("indices", inds, 2), ("values", vals, 1),
                                  ("shapes", shapes, 1)):
            for i, arg in enumerate(group):
                if arg.ndim != ndim:
                    what = "a matrix" if ndim == 2 else "a vector"
                    raise InvalidArgumentError(
                        f"Input {kind} should be {what} but received shape "
                        f"{shape_str(arg.shape)} at position {i}"
                    )
        first = shapes[0]
        rank = first.size
        dim = concat_dim_attr + rank if concat_dim_attr < 0 else concat_dim_attr
        if not 0 <= dim < rank:
            raise InvalidArgumentError(
                f"Concat dimension must be in range [{-rank}, {rank}), got {concat_dim_attr}"
            )
        for i in range(1, n):
            if shapes[i].size != rank:
                raise InvalidArgumentError(
                    f"Ranks of all input tensors must match: expected {rank} but got "
                    f"{shapes[i].size} at position {i}"
                )
            for j in range(rank):
                if j != dim and shapes[i][j] != first[j]:
                    raise InvalidArgumentError(
                        f"Input shapes must match: expected {int(first[j])} for dimension {j} "
                        f"but got {int(shapes[i][j])} at position {i}"
                    )
        for i in range(n):
            create_sparse(inds[i], vals[i], shapes[i])
        sizes = np.array([int(s[dim]) for s in shapes], np.int64)
        offsets = np.repeat(np.cumsum(sizes) - sizes, [len(v) for v in vals])
        out_indices = np.concatenate(inds, axis=0).astype(np.int64, copy=True)
        out_indices[:, dim] += offsets
        out_values = np.concatenate(vals)
        order = lexsort_rows(out_indices)
        out_shape = first.astype(np.int64, copy=True)
        out_shape[dim] = sizes.sum()
        return out_indices[order], out_values[order], out_shape

    return concat


def _check_fill_inputs(indices: np.ndarray, values: np.ndarray, dense_shape: np.ndarray,
                       default: np.ndarray) -> None:
    if dense_shape.ndim != 1:
        raise InvalidArgumentError(
            f"dense_shape must be a vector, saw: {shape_str(dense_shape.shape)}"
        )
    if indices.ndim != 2:
        raise InvalidArgumentError(f"indices must be a matrix, saw: {shape_str(indices.shape)}")
    if values.ndim != 1:
        raise InvalidArgumentError(f"values must be a vector, saw: {shape_str(values.shape)}")
    if indices.shape[0] != values.shape[0]:
        raise InvalidArgumentError(
            f"The length of `values` ({values.shape[0]}) must match the first dimension of "
            f"`indices` ({indices.shape[0]})."
        )
    if default.ndim != 0:
        raise InvalidArgumentError(
            f"default_value must be a scalar, saw: {shape_str(default.shape)}"
        )
    if dense_shape.size == 0:
        raise InvalidArgumentError("Dense shape cannot be empty.")


def _fill_sorted(indices: np.ndarray, values: np.ndarray, rows: np.ndarray, dense_rows: int,
                 default: np.ndarray) -> Arrays:
    """SparseFillEmptyRows of entries sorted by row, all in range: an entry moves down one slot
    for each empty row above its own, and a default entry goes after the entries of the rows
    above it, so two binary searches place everything without the general case's sort."""
    empty = np.bincount(rows, minlength=dense_rows) == 0
    missing = empty.nonzero()[0]  # np.flatnonzero costs several times more on small arrays
    n, k = rows.size, missing.size
    position = missing.searchsorted(rows)
    position += np.arange(n)
    filler_position = rows.searchsorted(missing)
    filler_position += np.arange(k)
    out_indices = np.zeros((n + k, indices.shape[1]), np.promote_types(indices.dtype, np.int64))
    out_indices[position] = indices
    out_indices[:, 0][filler_position] = missing
    out_values = np.full(n + k, default, dtype=values.dtype)
    out_values[position] = values
    return out_indices, out_values, empty, position


@kernel("SparseFillEmptyRows")
def sparse_fill_empty_rows(node: NodeContext) -> Callable[..., Any]:
    def fill(indices: np.ndarray, values: np.ndarray, dense_shape: np.ndarray,
             default: np.ndarray) -> Arrays:
        _check_fill_inputs(indices, values, dense_shape, default)
        n, rank = indices.shape
        dense_rows = int(dense_shape[0])
        if dense_rows == 0:
            if n:
                raise InvalidArgumentError(
                    "Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] = "
                    f"{n}"
                )
            return (np.zeros((0, rank), np.int64), values[:0], np.zeros(0, bool),
                    np.zeros(0, np.int64))
        rows = indices[:, 0]
        # Rows that start at 0, end at the last row and step by 0 or 1 are sorted, in range and
        # leave no row empty: the input is the output. (A step wrapped by overflow is not 0 or
        # 1, and from 0 no sum of such steps can overflow.)
        if (n and rows[0] == 0 and rows[n - 1] == dense_rows - 1
                and (n == 1 or not np.count_nonzero((rows[1:] - rows[:-1]) >> 1))):
            return indices, values, np.zeros(dense_rows, bool), np.arange(n, dtype=np.int64)
        # Other sorted rows are all in range when the first and the last are.
        if (n < 2 or not np.count_nonzero(rows[1:] < rows[:-1])) and (
                not n or (rows[0] >= 0 and rows[n - 1] < dense_rows)):
            return _fill_sorted(indices, values, rows, dense_rows, default)
        bad = (rows < 0) | (rows >= dense_rows)
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidArgumentError(
                f"indices({i}, 0) is invalid: {int(rows[i])} >= {dense_rows}"
            )
        empty = np.bincount(rows, minlength=dense_rows) == 0
        # Each empty row gets one default entry at [row, 0, ...]; every row keeps its entries
        # in input order, so a stable sort by row places the lot.
        missing = np.flatnonzero(empty)
        fillers = np.zeros((missing.size, rank), np.int64)
        fillers[:, 0] = missing
        order = np.argsort(np.concatenate([rows, missing]), kind="stable")
        out_indices = np.concatenate([indices, fillers])[order]
        filler_values = np.full(missing.size, default, dtype=values.dtype)
        out_values = np.concatenate([values, filler_values])[order]
        position = np.empty(order.size, np.int64)
        position[order] = np.arange(order.size)
        return out_indices, out_values, empty, position[:n]

    return fill
