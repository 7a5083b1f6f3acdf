"""CPU kernels: sparse_ops — ``SparseToDense``, the way parsed sparse features
(``tf.sparse.to_dense``) become dense tensors.

The rest of the family lives in sibling modules imported here (the family list in
``runtime.kernels`` names only this module): ``sparse_ops_layout`` (reshape, reorder, slice,
concat, fill empty rows), ``sparse_ops_math`` (sparse-dense matmul, add, reduce sum),
``sparse_ops_cross`` and ``sparse_ops_cross_hashed`` (feature crosses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import (  # noqa: F401  (imported for their registrations)
    sparse_ops_cross,
    sparse_ops_cross_hashed,
    sparse_ops_layout,
    sparse_ops_math,
)
from runtime.kernels.registry import NodeContext, kernel


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _check_order(indices: np.ndarray, shape: tuple[int, ...]) -> None:
    """TensorFlow's validation: in bounds, strictly increasing in row-major order."""
    n = indices.shape[0]
    if n == 0:
        return
    bad_bounds = np.any((indices < 0) | (indices >= np.array(shape, dtype=np.int64)), axis=1)
    if n > 1:
        diff = indices[1:] - indices[:-1]
        nonzero = diff != 0
        first = np.argmax(nonzero, axis=1)
        leading = diff[np.arange(n - 1), first]
        decreasing = np.concatenate([[False], nonzero.any(axis=1) & (leading < 0)])
        repeated = np.concatenate([[False], ~nonzero.any(axis=1)])
    else:
        decreasing = repeated = np.zeros(1, dtype=bool)
    problems = bad_bounds | decreasing | repeated
    if not problems.any():
        return
    i = int(np.argmax(problems))
    where = f"indices[{i}] = [{','.join(str(int(v)) for v in indices[i])}]"
    if bad_bounds[i]:
        raise InvalidArgumentError(
            f"{where} is out of bounds: need 0 <= index < [{','.join(str(d) for d in shape)}]"
        )
    if decreasing[i]:
        raise InvalidArgumentError(
            f"{where} is out of order. Many sparse ops require sorted indices.\n"
            "    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"
        )
    raise InvalidArgumentError(f"{where} is repeated")


def _flat_in_order(coords: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """The row-major positions of valid ``coords``, or None where ``_check_order`` must say
    what is wrong. In bounds, strictly increasing positions are strictly increasing indices."""
    if not coords.size:
        return None
    try:
        flat: np.ndarray = np.ravel_multi_index(tuple(coords.T), shape)
    except ValueError:  # out of bounds, or a shape no array can have
        return None
    # count_nonzero: a fraction of the cost of any() on short arrays.
    return None if np.count_nonzero(flat[1:] <= flat[:-1]) else flat


@kernel("SparseToDense")
def sparse_to_dense(node: NodeContext) -> Callable[..., Any]:
    validate = bool(node.attr("validate_indices", True))

    def to_dense(
        indices: np.ndarray, output_shape: np.ndarray, values: np.ndarray, default: np.ndarray
    ) -> np.ndarray:
        if indices.ndim > 2:
            raise InvalidArgumentError(
                "sparse_indices should be a scalar, vector, or matrix, got shape "
                f"{_shape_text(indices.shape)}"
            )
        if output_shape.ndim != 1:
            raise InvalidArgumentError(
                f"output_shape must be rank 1, got shape {_shape_text(output_shape.shape)}"
            )
        count = indices.shape[0] if indices.ndim > 0 else 1
        dims = indices.shape[1] if indices.ndim > 1 else 1
        if not (values.ndim == 0 or (values.ndim == 1 and values.shape[0] == count)):
            raise InvalidArgumentError(
                f"sparse_values has incorrect shape {_shape_text(values.shape)}, should be [] "
                f"or [{count}]"
            )
        if default.ndim != 0:
            raise InvalidArgumentError(
                f"default_value should be a scalar, got shape {_shape_text(default.shape)}"
            )
        if output_shape.size != dims:
            raise InvalidArgumentError(
                f"output_shape has incorrect number of elements: {output_shape.size} should "
                f"be: {dims}"
            )
        shape = tuple(int(d) for d in output_shape.tolist())
        coords = indices.reshape(count, dims).astype(np.int64, copy=False)
        if validate:
            flat = _flat_in_order(coords, shape)
            if flat is not None:
                out = np.full(shape, default, dtype=values.dtype)
                out.reshape(-1)[flat] = values
                return out
            _check_order(coords, shape)
        else:
            limits = np.array(shape, dtype=np.int64)
            if count and np.any((coords < 0) | (coords >= limits)):
                row = int(np.argmax(np.any((coords < 0) | (coords >= limits), axis=1)))
                raise InvalidArgumentError(
                    f"indices[{row}] = [{','.join(str(int(v)) for v in coords[row])}] is out of "
                    f"bounds: need 0 <= index < [{','.join(str(d) for d in shape)}]"
                )
        out = np.full(shape, default, dtype=values.dtype)
        if count:
            out[tuple(coords.T)] = values
        return out

    return to_dense
