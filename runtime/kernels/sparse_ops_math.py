"""CPU kernels: arithmetic on sparse tensors — SparseTensorDenseMatMul (a linear model's sparse
features times its weights), SparseAdd and SparseReduceSum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InternalError, InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.sparse_ops_common import (
    create_sparse,
    lexsort_rows,
    row_major_strides,
    values_text,
)

Arrays = tuple[np.ndarray, ...]


def _run_starts(keys: np.ndarray) -> np.ndarray:
    """Where each run of equal rows (or values) of sorted ``keys`` starts."""
    if keys.shape[0] == 0:
        return np.zeros(0, np.int64)
    change = keys[1:] != keys[:-1]
    if change.ndim > 1:
        change = change.any(axis=1)
    return np.flatnonzero(np.concatenate([[True], change]))


def _check_matmul_inputs(a_indices: np.ndarray, a_values: np.ndarray, a_shape: np.ndarray,
                         b: np.ndarray) -> None:
    if b.ndim != 2:
        raise InvalidArgumentError("Tensor 'b' is not a matrix")
    if a_shape.ndim != 1:
        raise InvalidArgumentError("Tensor 'a_shape' is not a vector")
    if a_shape.size != 2:
        raise InvalidArgumentError("Tensor 'a_shape' must have 2 elements")
    if a_values.ndim != 1:
        raise InvalidArgumentError("Tensor 'a_values' is not a vector")
    if a_indices.ndim != 2:
        raise InvalidArgumentError("Tensor 'a_indices' is not a matrix")
    if a_indices.shape[0] != a_values.size:
        raise InvalidArgumentError(
            "Number of rows of a_indices does not match number of entries in a_values"
        )
    if a_indices.shape[1] != a_shape.size:
        raise InvalidArgumentError(
            "Number of columns of a_indices does not match number of entries in a_shape"
        )


@kernel("SparseTensorDenseMatMul")
def sparse_tensor_dense_matmul(node: NodeContext) -> Callable[..., Any]:
    adjoint_a = bool(node.attr("adjoint_a", False))
    adjoint_b = bool(node.attr("adjoint_b", False))
    m_col, k_col = (1, 0) if adjoint_a else (0, 1)

    def matmul(a_indices: np.ndarray, a_values: np.ndarray, a_shape: np.ndarray,
               b: np.ndarray) -> np.ndarray:
        _check_matmul_inputs(a_indices, a_values, a_shape, b)
        rows, inner = int(a_shape[m_col]), int(a_shape[k_col])
        b_inner, cols = (b.shape[1], b.shape[0]) if adjoint_b else b.shape
        if inner != b_inner:
            raise InvalidArgumentError(
                "Cannot multiply A and B because inner dimension does not match: "
                f"{inner} vs. {b_inner}.  Did you forget a transpose?  Dimensions of A: "
                f"[{int(a_shape[0])}, {int(a_shape[1])}).  Dimensions of B: "
                f"{shape_str(b.shape)}"
            )
        out = np.zeros((rows, cols), b.dtype)
        if out.size == 0 or a_values.size == 0 or b.size == 0:
            return out
        m, k = a_indices[:, m_col], a_indices[:, k_col]
        bad_k, bad_m = (k < 0) | (k >= b_inner), (m < 0) | (m >= rows)
        if (bad_k | bad_m).any():
            i = int(np.argmax(bad_k | bad_m))
            if bad_k[i]:
                raise InvalidArgumentError(
                    f"k ({int(k[i])}) from index[{i},{k_col}] out of bounds (>={b_inner})"
                )
            raise InvalidArgumentError(
                f"m ({int(m[i])}) from index[{i},{m_col}] out of bounds (>={rows})"
            )
        rhs = b.conj().T if adjoint_b else b
        lhs = a_values.conj() if adjoint_a else a_values
        # Each entry adds value * rhs[k] to output row m: group the entries by row and sum.
        order = np.argsort(m, kind="stable")
        starts = _run_starts(m[order])
        contributions = lhs[order, None] * rhs[k[order]]
        out[m[order][starts]] = np.add.reduceat(contributions, starts, axis=0)
        return out

    return matmul


def _check_add_inputs(a_indices: np.ndarray, a_values: np.ndarray, a_shape: np.ndarray,
                      b_indices: np.ndarray, b_values: np.ndarray, b_shape: np.ndarray,
                      thresh: np.ndarray) -> None:
    if a_indices.ndim != 2 or b_indices.ndim != 2:
        raise InvalidArgumentError(
            "Input indices should be matrices but received shapes: "
            f"{shape_str(a_indices.shape)} and {shape_str(b_indices.shape)}"
        )
    rank = a_indices.shape[1]
    if b_indices.shape[1] != rank:
        raise InvalidArgumentError(
            f"Input indices must have the same dimension, got {rank} and {b_indices.shape[1]}"
        )
    if a_values.ndim != 1 or b_values.ndim != 1:
        raise InvalidArgumentError(
            "Input values should be vectors but received shapes: "
            f"{shape_str(a_values.shape)} and {shape_str(b_values.shape)}"
        )
    if a_values.size != a_indices.shape[0] or b_values.size != b_indices.shape[0]:
        raise InvalidArgumentError(
            f"Expected {a_indices.shape[0]} and {b_indices.shape[0]} non-empty input values, "
            f"got {a_values.size} and {b_values.size}"
        )
    if a_shape.ndim != 1 or b_shape.ndim != 1:
        raise InvalidArgumentError(
            "Input shapes should be a vector but received shapes "
            f"{shape_str(a_shape.shape)} and {shape_str(b_shape.shape)}"
        )
    if a_shape.size != rank:
        raise InvalidArgumentError(
            "Second dimension of a_indices and length of a_shape must match, got "
            f"{rank} and {a_shape.size}"
        )
    if rank == 0:
        raise InvalidArgumentError("Tesors must not be empty")  # sic, TensorFlow's text
    if a_shape.shape != b_shape.shape:
        raise InvalidArgumentError(
            "Operands do not have the same ranks; got shapes: "
            f"{values_text(a_shape)} and {values_text(b_shape)}"
        )
    for i, (x, y) in enumerate(zip(a_shape.tolist(), b_shape.tolist())):
        if x != y:
            raise InvalidArgumentError(
                f"Operands' shapes do not match: got {x} and {y} for dimension {i}"
            )
    if thresh.ndim != 0:
        raise InvalidArgumentError(
            f"The magnitude threshold must be a scalar: got shape {shape_str(thresh.shape)}"
        )


@kernel("SparseAdd")
def sparse_add(node: NodeContext) -> Callable[..., Any]:
    def add(a_indices: np.ndarray, a_values: np.ndarray, a_shape: np.ndarray,
            b_indices: np.ndarray, b_values: np.ndarray, b_shape: np.ndarray,
            thresh: np.ndarray) -> Arrays:
        _check_add_inputs(a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh)
        # TensorFlow merges the two (ordered) index lists; a stable sort of both, A's entries
        # first, puts an index present in both as an (A, B) pair of neighbours.
        indices = np.concatenate([a_indices, b_indices]).astype(np.int64, copy=False)
        values = np.concatenate([a_values, b_values])
        from_b = np.arange(indices.shape[0]) >= a_indices.shape[0]
        order = lexsort_rows(indices)
        indices, values, from_b = indices[order], values[order], from_b[order]
        same = np.zeros(indices.shape[0], bool)
        if indices.shape[0] > 1:
            same[:-1] = np.all(indices[1:] == indices[:-1], axis=1) & ~from_b[:-1] & from_b[1:]
        pair = np.flatnonzero(same)
        values = values.copy()
        values[pair] = values[pair] + values[pair + 1]
        keep = np.ones(indices.shape[0], bool)
        keep[pair + 1] = False
        # Only a sum is thresholded; an entry of A or B alone is kept whatever its magnitude.
        keep[pair] = np.abs(values[pair]) >= thresh
        return indices[keep], values[keep], a_shape

    return add


@kernel("SparseReduceSum")
def sparse_reduce_sum(node: NodeContext) -> Callable[..., Any]:
    keep_dims = bool(node.attr("keep_dims", False))

    def reduce_sum(indices: np.ndarray, values: np.ndarray, shape: np.ndarray,
                   axes: np.ndarray) -> np.ndarray:
        if shape.ndim != 1:
            raise InvalidArgumentError(
                f"Expected input_shape to be a vector; got shape: {shape_str(shape.shape)}"
            )
        if axes.ndim > 1:
            raise InvalidArgumentError(
                "Expected reduction_axes to be a scalar or a vector; got shape: "
                f"{shape_str(axes.shape)}"
            )
        rank = shape.size
        for axis in axes.reshape(-1).tolist():
            if not -rank <= axis < rank:
                raise InvalidArgumentError(
                    f"Invalid reduction dimension {axis}, for input with {rank} dimensions."
                )
        create_sparse(indices, values, shape)
        reduced = {(a + rank) % rank for a in axes.reshape(-1).tolist()}
        kept = [d for d in range(rank) if d not in reduced]
        dims = shape.tolist()
        out_shape = [1 if d in reduced else dims[d] for d in range(rank)] if keep_dims else [
            dims[d] for d in kept]
        out = np.zeros(int(np.prod([dims[d] for d in kept], dtype=np.int64)), values.dtype)
        if values.size:
            # One sum per distinct kept-coordinates group, written at the group's flat index.
            groups = indices[:, kept]
            order = lexsort_rows(groups)
            groups = groups[order]
            starts = _run_starts(groups)
            flat = groups[starts] @ row_major_strides([dims[d] for d in kept])
            bad = (flat < 0) | (flat >= out.size)
            if bad.any():
                raise InternalError(
                    f"Obtained a write index of {int(flat[np.argmax(bad)])} which is outside "
                    f"of bounds of [0, {out.size})"
                )
            out[flat] = np.add.reduceat(values[order], starts)
        return out.reshape(out_shape)

    return reduce_sum
