"""What the tf.SequenceExample kernels share: reading a node's attrs with TensorFlow's checks,
turning key and default tensors into feature specs, baking fixed features in, and laying the
parsed tensors out in the ops' output order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.example_parser import (
    DenseFeature,
    ListFeature,
    Parsed,
    check_types,
    shape_text,
    type_name,
)
from runtime.kernels.registry import KernelError, NodeContext
from runtime.kernels.sequence_lists import ParsedLists

Shapes = list[tuple[int, ...]]
_Config = TypeVar("_Config")


def text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def strings(values: Any) -> list[str]:
    """A string tensor's elements, flattened, as str (keys are compared with proto map keys)."""
    return [text(v) for v in np.asarray(values).reshape(-1).tolist()]


def names_of(debug_name: np.ndarray) -> list[str] | None:
    """Record names for messages; None when there are none."""
    values = np.asarray(debug_name).reshape(-1).tolist()
    raw = [v if isinstance(v, bytes) else str(v).encode() for v in values]
    return [v.decode("utf-8", "backslashreplace") for v in raw] or None


def types_attr(node: NodeContext, name: str) -> list[DataType]:
    try:
        return check_types(node.attr(name, []))
    except InvalidArgumentError as err:
        raise KernelError(node, err.message) from None


def split_types_attr(node: NodeContext, name: str) -> list[DataType]:
    types = [DataType.of(t) for t in node.attr(name, [])]
    for t in types:
        if t not in (DataType.DT_INT32, DataType.DT_INT64):
            # "Invalid context_ragged_split_type: int8", as TensorFlow words it.
            raise KernelError(node, f"Invalid {name[:-1]}: {type_name(t)}")
    return types


def shapes_attr(node: NodeContext, name: str) -> Shapes:
    """A shape-list attr, which TensorFlow reads as fully defined shapes."""
    shapes = []
    for shape in node.attr(name, []):
        if shape is None or any(d < 0 for d in shape):
            shown = "<unknown>" if shape is None else shape_text(shape)
            raise KernelError(node, f"Shape {shown} is not fully defined")
        shapes.append(tuple(int(d) for d in shape))
    return shapes


def check_count(node: NodeContext, what: str, count: int, *sizes: tuple[str, int]) -> None:
    """TensorFlow's check that a count attr matches the lists it describes."""
    if any(size != count for _, size in sizes):
        listed = " and ".join(f"{name} ({size})" for name, size in sizes)
        raise KernelError(node, f"{what} ({count}) must match the size of {listed}")


def context_dense(
    keys: Sequence[str],
    types: Sequence[DataType],
    shapes: Shapes,
    defaults: Sequence[Any],
    single: bool = False,
) -> tuple[DenseFeature, ...]:
    """Context dense features, after TensorFlow's checks of their defaults (which the
    single-example op words a little differently)."""
    value, suffix = ("def_value", "_") if single else ("default_value", "")
    features = []
    for d, (key, dtype, shape, default) in enumerate(zip(keys, types, shapes, defaults)):
        default = np.asarray(default)
        if default.size > 0:
            if default.shape != shape:
                raise InvalidArgumentError(
                    f"{value}[{d}].shape() == {shape_text(default.shape)} != "
                    f"context_dense_shapes{suffix}[{d}] == {shape_text(shape)}"
                )
            found = dtypes.from_numpy(default.dtype)
            if found != dtype:
                raise InvalidArgumentError(
                    f"context_dense_defaults[{d}].dtype() == {type_name(found)} != "
                    f"context_dense_types{suffix}[{d}] == {type_name(dtype)}"
                )
        features.append(DenseFeature(key, dtype, shape, default))
    return tuple(features)


def list_features(
    keys: Sequence[str], types: Sequence[DataType], splits: Sequence[DataType] = ()
) -> tuple[ListFeature, ...]:
    """Sparse features, or ragged ones with their split types."""
    if not splits:
        return tuple(ListFeature(k, t) for k, t in zip(keys, types))
    return tuple(ListFeature(k, t, s) for k, t, s in zip(keys, types, splits))


def fixed_features(
    node: NodeContext, indices: Sequence[int], features: Callable[..., _Config]
) -> _Config | None:
    """The features built once from inputs ``indices`` when the graph fixes them all, else None
    (also when they are wrong: that is reported on every run, as TensorFlow does)."""
    constants = [node.constant_input(i) for i in indices]
    if any(c is None for c in constants):
        return None
    try:
        return features(*constants)
    except InvalidArgumentError:
        return None


def outputs(context: Parsed, lists: ParsedLists, with_ragged: bool) -> Any:
    """The op's outputs in order: a list, or the array itself for a single-output node."""
    out = [
        *context.sparse_indices,
        *context.sparse_values,
        *context.sparse_shapes,
        *context.dense_values,
    ]
    if with_ragged:
        out += [*context.ragged_values, *context.ragged_splits]
    out += [
        *lists.sparse_indices,
        *lists.sparse_values,
        *lists.sparse_shapes,
        *lists.dense_values,
        *lists.dense_lengths,
    ]
    if with_ragged:
        out += [*lists.ragged_values, *lists.ragged_outer_splits, *lists.ragged_inner_splits]
    return out[0] if len(out) == 1 else out
