"""Helpers shared by the sparse-tensor kernels: TensorFlow's input validation (with its messages),
lexicographic ordering of index rows, and shape text.

A sparse tensor is ``indices`` (int64 ``[nnz, rank]``), ``values`` (``[nnz]``) and ``dense_shape``
(int64 ``[rank]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str


def values_text(values: np.ndarray) -> str:
    """A small int tensor as ``Tensor::SummarizeValue`` prints it: ``4 4``."""
    return " ".join(str(int(v)) for v in values.reshape(-1)[:10])


def validate_sparse(indices: np.ndarray, values: np.ndarray, shape: np.ndarray) -> None:
    """``sparse_utils::ValidateSparseTensor`` without index checks: ranks and sizes agree."""
    if indices.ndim != 2:
        raise InvalidArgumentError(f"Sparse indices must be rank 2 but is rank {indices.ndim}")
    if values.ndim != 1:
        raise InvalidArgumentError(f"Sparse values must be rank 1 but is rank {values.ndim}")
    if shape.ndim != 1:
        raise InvalidArgumentError(f"Sparse shape must be rank 1 but is rank {shape.ndim}")
    if values.shape[0] != indices.shape[0]:
        raise InvalidArgumentError(
            f"Number of elements in indices ({indices.shape[0]}) and values ({values.shape[0]}) "
            "do not match"
        )
    if shape.size != indices.shape[1]:
        raise InvalidArgumentError(
            f"Index rank ({indices.shape[1]}) and shape rank ({shape.size}) do not match"
        )


def create_sparse(indices: np.ndarray, values: np.ndarray, shape: np.ndarray) -> None:
    """The checks of ``SparseTensor::Create``, which kernels building one run on their inputs."""
    if values.ndim != 1:
        raise InvalidArgumentError(f"vals must be a vec, but got: {shape_str(values.shape)}")
    if indices.ndim == 0:
        raise InvalidArgumentError("indices must be a matrix, but got: []")
    if indices.shape[0] != values.shape[0]:
        raise InvalidArgumentError(
            "indices and values rows (indexing dimension) must match. "
            f"(indices = {indices.shape[0]}, values = {values.shape[0]})"
        )
    if indices.ndim != 2:
        raise InvalidArgumentError(
            f"indices must be a matrix, but got: {shape_str(indices.shape)}"
        )
    if shape.size != indices.shape[1]:
        raise InvalidArgumentError("Shape rank must be SparseTensor rank.")


def lexsort_rows(indices: np.ndarray, columns: Iterable[int] | None = None) -> np.ndarray:
    """The stable permutation that sorts ``indices`` rows lexicographically (over ``columns``,
    in that order of significance; all columns by default)."""
    cols = list(range(indices.shape[1])) if columns is None else list(columns)
    if not cols or indices.shape[0] < 2:
        return np.arange(indices.shape[0])
    # np.lexsort takes its most significant key last.
    order: np.ndarray = np.lexsort([indices[:, c] for c in reversed(cols)])
    return order


def int_list(x: np.ndarray) -> list[int]:
    """A small integer vector as Python ints."""
    values: list[int] = x.tolist()
    return values if x.dtype.kind == "i" else [int(v) for v in values]


def wrap_int64(x: int) -> int:
    """``x`` wrapped to int64, as numpy's int64 arithmetic leaves it."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def num_elements(dims: Sequence[int]) -> int:
    """``np.prod(dims, dtype=np.int64)`` in Python ints: on a handful of dims a numpy call costs
    more than a whole small kernel should."""
    n = 1
    for d in dims:
        n *= d
    return wrap_int64(n)


def stride_list(dims: Sequence[int]) -> list[int]:
    """``row_major_strides(dims)`` in Python ints (wrapped to int64 alike)."""
    strides, acc = [1] * len(dims), 1
    for j in range(len(dims) - 1, 0, -1):
        acc *= dims[j]
        strides[j - 1] = wrap_int64(acc)
    return strides


def row_major_strides(shape: Iterable[int]) -> np.ndarray:
    """Element strides of a dense row-major tensor of ``shape`` (int64, one per dimension)."""
    dims = np.array(list(shape), np.int64)
    strides = np.ones(dims.size, np.int64)
    if dims.size > 1:
        strides[:-1] = np.cumprod(dims[:0:-1])[::-1]
    return strides
