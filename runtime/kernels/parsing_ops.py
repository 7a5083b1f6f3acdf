"""CPU kernels: tf.Example parsing (``ParseExample``, ``ParseExampleV2``, ``ParseSingleExample``).

The parsing itself is ``example_batch``'s (a vector of examples) and ``example_parser``'s (a
scalar); these kernels check the inputs the way TensorFlow's ``ParseExampleOp`` does and lay the
results out in the op's output order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels import sparse_ops as _sparse_ops  # noqa: F401 - registers its kernels
from runtime.kernels.example_batch import BatchPlan, parse_batch
from runtime.kernels.example_parser import (
    ListFeature,
    Parsed,
    check_dense_shapes,
    check_types,
    dense_features,
    parse_single,
)
from runtime.kernels.registry import KernelError, NodeContext, kernel


def _keys(values: np.ndarray) -> list[str]:
    return [_text(k) for k in np.asarray(values).reshape(-1).tolist()]


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _config(node: NodeContext, *, sparse_attr: str) -> tuple[Any, ...]:
    """The node's feature types and shapes, checked as TensorFlow checks them at construction."""
    try:
        dense_types = check_types(node.attr("Tdense", []))
        dense_shapes = check_dense_shapes(node.attr("dense_shapes", []))
        sparse_types = check_types(node.attr("sparse_types", []))
        ragged_types = check_types(node.attr("ragged_value_types", []))
    except InvalidArgumentError as err:
        raise KernelError(node, err.message) from None
    split_types = [DataType.of(t) for t in node.attr("ragged_split_types", [])]
    if any(t not in (DataType.DT_INT32, DataType.DT_INT64) for t in split_types):
        raise KernelError(node, "ragged_split_types must be int32 or int64")
    if len(dense_shapes) != len(dense_types):
        raise KernelError(
            node, f"len(dense_shapes) != len(dense_types): {len(dense_shapes)} vs. "
            f"{len(dense_types)}"
        )
    if int(node.attr(sparse_attr, len(sparse_types))) != len(sparse_types):
        raise KernelError(node, f"len(sparse_types) != {sparse_attr}")
    return dense_types, dense_shapes, sparse_types, ragged_types, split_types


def _outputs(parsed: Parsed, with_ragged: bool) -> Any:
    """The op's outputs in order: a list, or the array itself for a single-output node."""
    outputs = [
        *parsed.sparse_indices,
        *parsed.sparse_values,
        *parsed.sparse_shapes,
        *parsed.dense_values,
    ]
    if with_ragged:
        outputs += [*parsed.ragged_values, *parsed.ragged_splits]
    return outputs[0] if len(outputs) == 1 else outputs


def _names(names: np.ndarray, serialized: np.ndarray) -> list[str] | None:
    if names.size == 0:
        return None
    if names.shape != serialized.shape:
        raise InvalidArgumentError(
            "Expected names have the same shape as serialized: name.shape="
            f"{_shape_text(names.shape)}, serialized.shape={_shape_text(serialized.shape)}"
        )
    return _keys(names)


def _check_count(keys: Sequence[str], expected: int, what: str, attr: str) -> None:
    if len(keys) != expected:
        raise InvalidArgumentError(
            f"Expected len({what}) == {attr} but got: {len(keys)} vs. {expected}"
        )


def _bake_features(
    node: NodeContext,
    first: int,
    count: int,
    features: Callable[..., BatchPlan],
    parse: Callable[[np.ndarray, np.ndarray | None, BatchPlan], Any],
    with_names: bool,
) -> Callable[..., Any]:
    """The kernel: inputs [first, first + count) describe the features (keys, defaults). When the
    graph fixes them all (the usual case), the features are built once and baked in."""
    indices = range(first, first + count)
    constants = [node.constant_input(i) for i in indices]
    if all(c is not None for c in constants):
        try:
            fixed = features(*constants)
        except InvalidArgumentError:
            fixed = None  # reported on every run, as TensorFlow does
        if fixed is not None:
            if with_names:
                return node.bake(lambda data, names: parse(data, names, fixed), *indices)
            return node.bake(lambda data: parse(data, None, fixed), *indices)
    if with_names:
        return lambda serialized, names, *rest: parse(serialized, names, features(*rest))
    return lambda serialized, *rest: parse(serialized, None, features(*rest))


def _check_batch(serialized: np.ndarray, names: np.ndarray | None) -> list[str] | None:
    return None if names is None else _names(names, serialized)


@kernel("ParseExampleV2")
def parse_example_v2(node: NodeContext) -> Callable[..., Any]:
    dense_types, dense_shapes, sparse_types, ragged_types, split_types = _config(
        node, sparse_attr="num_sparse"
    )

    def features(
        sparse_keys: np.ndarray, dense_keys: np.ndarray, ragged_keys: np.ndarray, *defaults: Any
    ) -> BatchPlan:
        dense_key_list = _keys(dense_keys)
        sparse_key_list = _keys(sparse_keys)
        ragged_key_list = _keys(ragged_keys)
        _check_count(dense_key_list, len(dense_types), "dense_keys", "len(dense_types)")
        _check_count(sparse_key_list, len(sparse_types), "sparse_keys", "num_sparse")
        _check_count(ragged_key_list, len(ragged_types), "ragged_keys", "len(ragged_value_types)")
        dense = dense_features(dense_key_list, dense_types, dense_shapes, defaults)
        sparse = [ListFeature(k, t) for k, t in zip(sparse_key_list, sparse_types)]
        ragged = [
            ListFeature(k, t, s) for k, t, s in zip(ragged_key_list, ragged_types, split_types)
        ]
        return BatchPlan(dense, sparse, ragged)

    def parse(serialized: np.ndarray, names: np.ndarray | None, config: BatchPlan) -> Any:
        if serialized.ndim > 1:
            raise InvalidArgumentError(
                "Expected serialized to be a scalar or vector, got shape: "
                f"{_shape_text(serialized.shape)}"
            )
        name_list = _check_batch(serialized, names)
        if serialized.ndim == 0:
            parsed = parse_single(serialized.item(), config.dense, config.sparse, config.ragged)
        else:
            parsed = parse_batch(serialized.tolist(), name_list, config)
        return _outputs(parsed, with_ragged=True)

    return _bake_features(node, 2, 3 + len(dense_types), features, parse, with_names=True)


@kernel("ParseExample")
def parse_example(node: NodeContext) -> Callable[..., Any]:
    dense_types, dense_shapes, sparse_types, _, _ = _config(node, sparse_attr="Nsparse")
    num_sparse = len(sparse_types)
    num_dense = len(dense_types)

    def features(*rest: Any) -> BatchPlan:
        sparse_keys = [_text(np.asarray(k).item()) for k in rest[:num_sparse]]
        dense_keys = [
            _text(np.asarray(k).item()) for k in rest[num_sparse : num_sparse + num_dense]
        ]
        defaults = rest[num_sparse + num_dense :]
        dense = dense_features(dense_keys, dense_types, dense_shapes, defaults)
        sparse = [ListFeature(k, t) for k, t in zip(sparse_keys, sparse_types)]
        return BatchPlan(dense, sparse, [])

    def parse(serialized: np.ndarray, names: np.ndarray | None, config: BatchPlan) -> Any:
        if serialized.ndim != 1:
            raise InvalidArgumentError(
                f"Expected serialized to be a vector, got shape: {_shape_text(serialized.shape)}"
            )
        parsed = parse_batch(serialized.tolist(), _check_batch(serialized, names), config)
        return _outputs(parsed, with_ragged=False)

    count = num_sparse + 2 * num_dense
    return _bake_features(node, 2, count, features, parse, with_names=True)


@kernel("ParseSingleExample")
def parse_single_example(node: NodeContext) -> Callable[..., Any]:
    dense_types, dense_shapes, sparse_types, _, _ = _config(node, sparse_attr="num_sparse")
    dense_keys = [str(k) for k in node.attr("dense_keys", [])]
    sparse_keys = [str(k) for k in node.attr("sparse_keys", [])]
    if len(dense_keys) != len(dense_types) or len(sparse_keys) != len(sparse_types):
        raise KernelError(node, "the numbers of keys and types differ")
    sparse = [ListFeature(k, t) for k, t in zip(sparse_keys, sparse_types)]

    def features(*defaults: Any) -> BatchPlan:
        return BatchPlan(dense_features(dense_keys, dense_types, dense_shapes, defaults), sparse, [])

    def parse(serialized: np.ndarray, names: np.ndarray | None, config: BatchPlan) -> Any:
        if serialized.ndim != 0:
            raise InvalidArgumentError(
                f"Expected serialized to be a scalar, got shape: {_shape_text(serialized.shape)}"
            )
        parsed = parse_single(serialized.item(), config.dense, config.sparse, config.ragged)
        return _outputs(parsed, with_ragged=False)

    return _bake_features(node, 1, len(dense_types), features, parse, with_names=False)
