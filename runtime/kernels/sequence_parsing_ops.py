"""CPU kernels: tf.SequenceExample parsing (``ParseSequenceExampleV2``, ``ParseSequenceExample``,
``ParseSingleSequenceExample``).

The parsing is ``sequence_example_parser``'s (TensorFlow's fast parser, behind the first two) and
``sequence_example_single``'s (the proto walk behind the third); these kernels check attrs and
inputs as TensorFlow's ``ParseSequenceExampleOp`` and ``ParseSingleSequenceExampleOp`` do and lay
the results out in the op's output order. Keys, defaults and the missing-list flags are nearly
always constants of the graph: then the features are built once and baked in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.example_parser import shape_text
from runtime.kernels.registry import KernelError, NodeContext, kernel
from runtime.kernels.sequence_example_parser import SequenceConfig, parse_sequences
from runtime.kernels.sequence_example_single import SingleConfig, parse_single_sequence
from runtime.kernels.sequence_example_specs import (
    check_count,
    context_dense,
    fixed_features,
    list_features,
    names_of,
    outputs,
    shapes_attr,
    split_types_attr,
    strings,
    text,
    types_attr,
)
from runtime.kernels.sequence_lists import ListDense

# ParseSequenceExampleV2's key inputs (2 to 8), in order, with the attr each count must match.
_V2_KEYS = (
    ("context_sparse_keys", "Ncontext_sparse"),
    ("context_dense_keys", "len(Tcontext_dense)"),
    ("context_ragged_keys", "len(context_ragged_value_types)"),
    ("feature_list_sparse_keys", "Nfeature_list_sparse"),
    ("feature_list_dense_keys", "Nfeature_list_dense"),
    ("feature_list_ragged_keys", "len(feature_list_ragged_value_types)"),
    # TensorFlow's message for the flags lacks its closing parenthesis.
    ("feature_list_dense_missing_assumed_empty", "Nfeature_list_dense"),
)
# The order in which TensorFlow checks those counts.
_V2_CHECK_ORDER = (1, 0, 2, 4, 6, 3, 5)


def _batch_kernel(
    node: NodeContext, count: int, features: Callable[..., SequenceConfig], with_ragged: bool
) -> Callable[..., Any]:
    """Inputs: serialized, debug_name, then ``count`` that make the features."""

    def parse(serialized: np.ndarray, debug_name: np.ndarray, config: SequenceConfig) -> Any:
        _check_serialized(serialized)
        records = serialized.reshape(-1).tolist()
        context, lists = parse_sequences(
            records, names_of(debug_name), config, batch=serialized.ndim == 1
        )
        return outputs(context, lists, with_ragged)

    indices = range(2, 2 + count)
    fixed = fixed_features(node, indices, features)
    if fixed is not None:
        return node.bake(lambda serialized, names: parse(serialized, names, fixed), *indices)

    def generic(serialized: np.ndarray, debug_name: np.ndarray, *rest: Any) -> Any:
        _check_serialized(serialized)  # before the features, as TensorFlow checks it
        return parse(serialized, debug_name, features(*rest))

    return generic


def _check_serialized(serialized: np.ndarray) -> None:
    if serialized.ndim > 1:
        raise InvalidArgumentError(
            "Expected serialized to be a scalar or vector, got shape: "
            f"{shape_text(serialized.shape)}"
        )


@kernel("ParseSequenceExampleV2")
def parse_sequence_example_v2(node: NodeContext) -> Callable[..., Any]:
    context_types = types_attr(node, "Tcontext_dense")
    context_shapes = shapes_attr(node, "context_dense_shapes")
    context_sparse_types = types_attr(node, "context_sparse_types")
    context_ragged_types = types_attr(node, "context_ragged_value_types")
    context_splits = split_types_attr(node, "context_ragged_split_types")
    list_types = types_attr(node, "feature_list_dense_types")
    list_shapes = shapes_attr(node, "feature_list_dense_shapes")
    list_sparse_types = types_attr(node, "feature_list_sparse_types")
    list_ragged_types = types_attr(node, "feature_list_ragged_value_types")
    list_splits = split_types_attr(node, "feature_list_ragged_split_types")
    num_context_sparse = int(node.attr("Ncontext_sparse", 0))
    num_list_sparse = int(node.attr("Nfeature_list_sparse", 0))
    num_list_dense = int(node.attr("Nfeature_list_dense", 0))
    check_count(
        node,
        "num_context_sparse",
        num_context_sparse,
        ("context_sparse_types", len(context_sparse_types)),
    )
    check_count(
        node,
        "num_context_dense",
        len(context_types),
        ("context_dense_types", len(context_types)),
        ("context_dense_shapes", len(context_shapes)),
    )
    check_count(
        node,
        "num_context_ragged",
        len(context_ragged_types),
        ("context_ragged_value_types", len(context_ragged_types)),
        ("context_ragged_split_types", len(context_splits)),
    )
    check_count(
        node,
        "num_feature_list_sparse",
        num_list_sparse,
        ("feature_list_sparse_types", len(list_sparse_types)),
    )
    check_count(
        node,
        "num_feature_list_dense",
        num_list_dense,
        ("feature_list_dense_types", len(list_types)),
        ("feature_list_dense_shapes", len(list_shapes)),
    )
    check_count(
        node,
        "num_feature_list_ragged",
        len(list_ragged_types),
        ("feature_list_ragged_value_types", len(list_ragged_types)),
        ("feature_list_ragged_split_types", len(list_splits)),
    )
    counts = (
        num_context_sparse,
        len(context_types),
        len(context_ragged_types),
        num_list_sparse,
        num_list_dense,
        len(list_ragged_types),
        num_list_dense,
    )

    def features(*inputs: Any) -> SequenceConfig:
        for i in _V2_CHECK_ORDER:
            if np.asarray(inputs[i]).size != counts[i]:
                name, attr = _V2_KEYS[i]
                closing = "" if i == 6 else ")"
                raise InvalidArgumentError(f"Expected len({name}{closing} to match {attr}")
        keys = [strings(k) for k in inputs[:6]]
        flags = np.asarray(inputs[6]).reshape(-1).tolist()
        return SequenceConfig(
            context_dense(keys[1], context_types, context_shapes, inputs[7:]),
            list_features(keys[0], context_sparse_types),
            list_features(keys[2], context_ragged_types, context_splits),
            tuple(
                ListDense(k, t, s, bool(f))
                for k, t, s, f in zip(keys[4], list_types, list_shapes, flags)
            ),
            list_features(keys[3], list_sparse_types),
            list_features(keys[5], list_ragged_types, list_splits),
        )

    return _batch_kernel(node, 7 + len(context_types), features, with_ragged=True)


@kernel("ParseSequenceExample")
def parse_sequence_example(node: NodeContext) -> Callable[..., Any]:
    keys = {
        name: [text(k) for k in node.attr(name, [])]
        for name in (
            "context_sparse_keys",
            "context_dense_keys",
            "feature_list_sparse_keys",
            "feature_list_dense_keys",
        )
    }
    missing = {text(k) for k in node.attr("feature_list_dense_missing_assumed_empty", [])}
    types = {
        name: types_attr(node, name)
        for name in (
            "context_sparse_types",
            "Tcontext_dense",
            "feature_list_sparse_types",
            "feature_list_dense_types",
        )
    }
    context_shapes = shapes_attr(node, "context_dense_shapes")
    list_shapes = shapes_attr(node, "feature_list_dense_shapes")
    for prefix, type_attr, shapes in (
        ("context_sparse", "context_sparse_types", None),
        ("context_dense", "Tcontext_dense", context_shapes),
        ("feature_list_sparse", "feature_list_sparse_types", None),
        ("feature_list_dense", "feature_list_dense_types", list_shapes),
    ):
        count = int(node.attr("N" + prefix, 0))
        check_count(node, f"num_{prefix}", count, (f"{prefix}_keys", len(keys[f"{prefix}_keys"])))
        sizes = [(f"{prefix}_types", len(types[type_attr]))]
        if shapes is not None:
            sizes.append((f"{prefix}_shapes", len(shapes)))
        check_count(node, f"num_{prefix}", count, *sizes)
    list_dense = tuple(
        ListDense(k, t, s, k in missing)
        for k, t, s in zip(
            keys["feature_list_dense_keys"], types["feature_list_dense_types"], list_shapes
        )
    )
    context_sparse = list_features(keys["context_sparse_keys"], types["context_sparse_types"])
    list_sparse = list_features(
        keys["feature_list_sparse_keys"], types["feature_list_sparse_types"]
    )

    def features(*defaults: Any) -> SequenceConfig:
        dense = context_dense(
            keys["context_dense_keys"], types["Tcontext_dense"], context_shapes, defaults
        )
        return SequenceConfig(dense, context_sparse, (), list_dense, list_sparse, ())

    return _batch_kernel(node, len(types["Tcontext_dense"]), features, with_ragged=False)


@kernel("ParseSingleSequenceExample")
def parse_single_sequence_example(node: NodeContext) -> Callable[..., Any]:
    groups = ("context_sparse", "context_dense", "feature_list_sparse", "feature_list_dense")
    type_attrs = (
        "context_sparse_types",
        "Tcontext_dense",
        "feature_list_sparse_types",
        "feature_list_dense_types",
    )
    types = [types_attr(node, name) for name in type_attrs]
    counts = [int(node.attr("N" + group, 0)) for group in groups]
    context_shapes = shapes_attr(node, "context_dense_shapes")
    list_shapes = shapes_attr(node, "feature_list_dense_shapes")
    for group, count, group_types in zip(groups, counts, types):
        if count != len(group_types):
            raise KernelError(node, f"len({group}_keys) != len({group}_types)")
    if counts[1] != len(context_shapes):
        raise KernelError(node, "len(context_dense_keys) != len(context_dense_shapes)")
    # Inputs: serialized, the missing-list names, the four key lists, the defaults, debug_name.
    starts = np.cumsum([0, *counts]).tolist()

    def features(missing: Any, *rest: Any) -> tuple[SingleConfig, str | None]:
        """The features, and the message for bad defaults (which TensorFlow checks later)."""
        keys: list[list[str]] = [[] for _ in groups]
        for g in (1, 0, 3, 2):  # dense before sparse, as TensorFlow checks them
            for i, key in enumerate(map(np.asarray, rest[starts[g] : starts[g + 1]])):
                if key.ndim:
                    raise InvalidArgumentError(
                        f"Expected {groups[g]}_keys[{i}] to be a scalar, got shape: "
                        f"{shape_text(key.shape)}"
                    )
                keys[g].append(text(key.item()))
        missing = np.asarray(missing)
        if missing.ndim != 1:
            raise InvalidArgumentError(
                "Expected feature_list_dense_missing_assumed_empty to be a vector, got shape: "
                f"{shape_text(missing.shape)}"
            )
        allowed = set(strings(missing))
        error = None
        try:
            dense = context_dense(keys[1], types[1], context_shapes, rest[starts[4] :], True)
        except InvalidArgumentError as err:
            dense, error = (), err.message
        list_dense = tuple(
            ListDense(k, t, s, k in allowed) for k, t, s in zip(keys[3], types[3], list_shapes)
        )
        config = SingleConfig(
            dense, list_features(keys[0], types[0]), list_dense, list_features(keys[2], types[2])
        )
        return config, error

    def parse(
        serialized: np.ndarray, debug_name: np.ndarray, fixed: tuple[SingleConfig, str | None]
    ) -> Any:
        if debug_name.size and debug_name.ndim:
            raise InvalidArgumentError(
                f"Expected debug_name to be a scalar, got shape: {shape_text(debug_name.shape)}"
            )
        if serialized.ndim:
            raise InvalidArgumentError(
                f"Expected serialized to be a scalar, got shape: {shape_text(serialized.shape)}"
            )
        config, error = fixed
        if error is not None:
            raise InvalidArgumentError(error)
        names = names_of(debug_name)
        context, lists = parse_single_sequence(
            serialized.item(), names[0] if names else "<unknown>", config
        )
        return outputs(context, lists, with_ragged=False)

    indices = range(1, 2 + starts[4] + counts[1])
    baked = fixed_features(node, indices, features)
    if baked is not None:
        return node.bake(lambda serialized, name: parse(serialized, name, baked), *indices)
    return lambda serialized, *rest: parse(serialized, rest[-1], features(*rest[:-1]))
