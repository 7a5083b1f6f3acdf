"""Kernel cases for tf.SequenceExample parsing: ParseSequenceExampleV2 (batch and scalar input),
ParseSequenceExample and ParseSingleSequenceExample.

SequenceExamples are written with ``cases_parsing_ops``' wire-format encoder (numpy only, so that
the recorder can import this module next to TensorFlow), which also writes what no Python API
would: steps whose Feature has no kind, typed empty lists, records that do not decode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case
from tests.runtime.kernels.cases_parsing_ops import (
    F32,
    I64,
    _field,
    example,
    feature,
    keys,
    no_default,
    records,
    scalar,
)

STR = np.bytes_
I32 = np.int32


class Encoded(bytes):
    """A Feature already serialized (for one with no kind or a typed empty list)."""


NO_KIND = Encoded(b"")


def typed(values: list[Any], kind: str) -> Encoded:
    return Encoded(feature(values, kind))


def _feature(values: list[Any] | Encoded) -> bytes:
    return values if isinstance(values, Encoded) else feature(values)


def seq(
    context: dict[str, list[Any] | Encoded] | None = None,
    lists: dict[str, list[list[Any] | Encoded]] | None = None,
) -> bytes:
    """A SequenceExample: context features, and feature lists as one Feature per step."""
    out = b""
    if context:
        out += example(*((k, _feature(v)) for k, v in context.items()))
    if lists:
        entries = b"".join(
            _field(
                1,
                _field(1, k.encode()) + _field(2, b"".join(_field(1, _feature(s)) for s in steps)),
            )
            for k, steps in lists.items()
        )
        out += _field(2, entries)
    return out


def flags(*values: bool) -> np.ndarray:
    return np.array(values, dtype=bool)


def v2(
    name: str,
    serialized: np.ndarray,
    *,
    context_dense: list[tuple[str, np.ndarray, list[int]]] = (),  # type: ignore[assignment]
    context_sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    context_ragged: list[tuple[str, type, type]] = (),  # type: ignore[assignment]
    list_dense: list[tuple[str, type, list[int]]] = (),  # type: ignore[assignment]
    list_sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    list_ragged: list[tuple[str, type, type]] = (),  # type: ignore[assignment]
    missing: np.ndarray | None = None,
    names: np.ndarray | None = None,
    sparse_keys: np.ndarray | None = None,
    **kw: Any,
) -> Case:
    defaults = [d for _, d, _ in context_dense]
    return Case(
        name,
        "ParseSequenceExampleV2",
        {
            "serialized": serialized,
            "debug_name": keys() if names is None else names,
            "context_sparse_keys": (
                keys(*(k for k, _ in context_sparse)) if sparse_keys is None else sparse_keys
            ),
            "context_dense_keys": keys(*(k for k, _, _ in context_dense)),
            "context_ragged_keys": keys(*(k for k, _, _ in context_ragged)),
            "feature_list_sparse_keys": keys(*(k for k, _ in list_sparse)),
            "feature_list_dense_keys": keys(*(k for k, _, _ in list_dense)),
            "feature_list_ragged_keys": keys(*(k for k, _, _ in list_ragged)),
            "feature_list_dense_missing_assumed_empty": (
                flags(*[False] * len(list_dense)) if missing is None else missing
            ),
            "context_dense_defaults": defaults,
        },
        attrs={
            "Ncontext_sparse": len(context_sparse),
            "context_sparse_types": [t for _, t in context_sparse],
            "context_ragged_value_types": [t for _, t, _ in context_ragged],
            "context_ragged_split_types": [s for _, _, s in context_ragged],
            "context_dense_shapes": [s for _, _, s in context_dense],
            "Nfeature_list_sparse": len(list_sparse),
            "Nfeature_list_dense": len(list_dense),
            "feature_list_dense_types": [t for _, t, _ in list_dense],
            "feature_list_sparse_types": [t for _, t in list_sparse],
            "feature_list_ragged_value_types": [t for _, t, _ in list_ragged],
            "feature_list_ragged_split_types": [s for _, _, s in list_ragged],
            "feature_list_dense_shapes": [s for _, _, s in list_dense],
        },
        node_attrs={"Tcontext_dense": [d.dtype.type for d in defaults]},
        **kw,
    )


def v1(
    name: str,
    serialized: np.ndarray,
    *,
    context_dense: list[tuple[str, np.ndarray, list[int]]] = (),  # type: ignore[assignment]
    context_sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    list_dense: list[tuple[str, type, list[int]]] = (),  # type: ignore[assignment]
    list_sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    missing: list[str] = (),  # type: ignore[assignment]
    names: np.ndarray | None = None,
    **kw: Any,
) -> Case:
    defaults = [d for _, d, _ in context_dense]
    return Case(
        name,
        "ParseSequenceExample",
        {
            "serialized": serialized,
            "debug_name": keys() if names is None else names,
            "context_dense_defaults": defaults,
        },
        attrs={
            "feature_list_dense_missing_assumed_empty": list(missing),
            "context_sparse_keys": [k for k, _ in context_sparse],
            "context_dense_keys": [k for k, _, _ in context_dense],
            "feature_list_sparse_keys": [k for k, _ in list_sparse],
            "feature_list_dense_keys": [k for k, _, _ in list_dense],
            "Ncontext_sparse": len(context_sparse),
            "Ncontext_dense": len(context_dense),
            "Nfeature_list_sparse": len(list_sparse),
            "Nfeature_list_dense": len(list_dense),
            "context_sparse_types": [t for _, t in context_sparse],
            "feature_list_dense_types": [t for _, t, _ in list_dense],
            "context_dense_shapes": [s for _, _, s in context_dense],
            "feature_list_sparse_types": [t for _, t in list_sparse],
            "feature_list_dense_shapes": [s for _, _, s in list_dense],
        },
        node_attrs={"Tcontext_dense": [d.dtype.type for d in defaults]},
        **kw,
    )


def _key(name: str) -> np.ndarray:
    return np.array(name.encode(), dtype=object)


def single(
    name: str,
    serialized: np.ndarray,
    *,
    context_dense: list[tuple[str, np.ndarray, list[int]]] = (),  # type: ignore[assignment]
    context_sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    list_dense: list[tuple[str, type, list[int]]] = (),  # type: ignore[assignment]
    list_sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    missing: np.ndarray | None = None,
    debug_name: np.ndarray | None = None,
    dense_keys: list[np.ndarray] | None = None,
    **kw: Any,
) -> Case:
    defaults = [d for _, d, _ in context_dense]
    return Case(
        name,
        "ParseSingleSequenceExample",
        {
            "serialized": serialized,
            "feature_list_dense_missing_assumed_empty": keys() if missing is None else missing,
            "context_sparse_keys": [_key(k) for k, _ in context_sparse],
            "context_dense_keys": (
                [_key(k) for k, _, _ in context_dense] if dense_keys is None else dense_keys
            ),
            "feature_list_sparse_keys": [_key(k) for k, _ in list_sparse],
            "feature_list_dense_keys": [_key(k) for k, _, _ in list_dense],
            "context_dense_defaults": defaults,
            "debug_name": scalar(b"seq") if debug_name is None else debug_name,
        },
        attrs={
            "context_sparse_types": [t for _, t in context_sparse],
            "feature_list_dense_types": [t for _, t, _ in list_dense],
            "context_dense_shapes": [s for _, _, s in context_dense],
            "feature_list_sparse_types": [t for _, t in list_sparse],
            "feature_list_dense_shapes": [s for _, _, s in list_dense],
        },
        node_attrs={
            "Ncontext_sparse": len(context_sparse),
            "Ncontext_dense": len(context_dense),
            "Nfeature_list_sparse": len(list_sparse),
            "Nfeature_list_dense": len(list_dense),
            "Tcontext_dense": [d.dtype.type for d in defaults],
        },
        **kw,
    )


# A batch with sequences of different lengths, context present in some examples only.
BATCH = records(
    seq(
        {"age": [31], "tags": [b"a", b"b"], "pos": [1.0, 2.0], "w": [0.5]},
        {
            "tok": [[1], [2], [3]],
            "emb": [[0.5, 1.5], [2.5, 3.5]],
            "word": [[b"x"], [b"y", b"z"]],
            "s": [[b"one"]],
        },
    ),
    seq({"pos": [3.0, 4.0]}, {"tok": [[4]], "emb": [], "word": [NO_KIND], "s": [[b"two"], [b"3"]]}),
    seq(
        {"age": [7], "tags": [b"c"], "pos": [5.0, 6.0], "w": NO_KIND},
        {"tok": [[5], [6]], "word": [[b"q", b"r", b"s"], typed([], "bytes"), [b"t"]]},
    ),
    seq({"pos": [7.0, 8.0]}),
)
NAMES = keys("first", "second", "third", "fourth")
ONE = seq(
    {"age": [31], "tags": [b"a", b"b"], "pos": [1.0, 2.0]},
    {
        "tok": [[1], [2], [3]],
        "emb": [[0.5, 1.5], [2.5, 3.5]],
        "word": [[b"x"], [b"y", b"z"]],
        "s": [[b"one"], NO_KIND, [b"two", b"three"]],
    },
)
EMPTY = np.zeros(0, dtype=object)
STEPS_CHECK = seq(None, {"f": [[1.0, 2.0], [3.0]]})

CASES = [
    # ParseSequenceExampleV2, a batch.
    v2(
        "context_only",
        BATCH,
        context_dense=[("pos", no_default(F32), [2]), ("kind", np.array([b"none"], object), [1])],
        context_sparse=[("tags", STR), ("w", F32)],
        context_ragged=[("age", I64, I32)],
    ),
    v2(
        "context_defaults",
        BATCH,
        context_dense=[
            ("age", np.array(-1, I64), []),
            ("kind", np.array([b"a", b"b"], object), [2]),
            ("pos", np.array([[0.0], [0.0]], F32), [2, 1]),
        ],
    ),
    v2("context_ragged_int64_splits", BATCH, context_ragged=[("pos", F32, I64), ("age", I64, I32)]),
    v2(
        "lists_only",
        BATCH,
        list_dense=[("tok", I64, [1]), ("emb", F32, [2])],
        list_sparse=[("word", STR)],
        list_ragged=[("s", STR, I64)],
        missing=flags(True, True),
    ),
    v2(
        "mixed_named",
        BATCH,
        names=NAMES,
        context_dense=[("pos", no_default(F32), [2])],
        context_sparse=[("age", I64)],
        context_ragged=[("tags", STR, I64)],
        list_dense=[("tok", I64, [])],
        missing=flags(True),
        list_sparse=[("s", STR)],
        list_ragged=[("word", STR, I32), ("emb", F32, I64)],
    ),
    v2("dense_strings_padded", BATCH, list_dense=[("s", STR, [1])], missing=flags(True)),
    v2(
        "dense_matrix_steps",
        records(
            seq(None, {"m": [[1.0, 2.0, 3.0, 4.0]]}),
            seq(None, {"m": [[5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]}),
        ),
        list_dense=[("m", F32, [2, 2])],
    ),
    v2(
        "empty_feature_lists",
        records(seq(None, {"d": [], "s": [], "r": []}), seq(None, {"d": []})),
        list_dense=[("d", F32, [3])],
        list_sparse=[("s", I64)],
        list_ragged=[("r", STR, I32)],
    ),
    v2(
        "missing_assumed_empty",
        records(seq({"c": [1.0]}), seq(None, {"a": [[1.0], [2.0]]})),
        list_dense=[("a", F32, [1]), ("b", I64, [2])],
        missing=flags(True, True),
    ),
    v2(
        "sparse_lists_unset_steps",
        records(
            seq(None, {"s": [NO_KIND, [1.5], typed([], "float"), [2.5, 3.5], NO_KIND]}),
            seq(None, {"s": [NO_KIND]}),
            seq(None, {"t": [[1.0]]}),
        ),
        list_sparse=[("s", F32)],
    ),
    v2(
        "ragged_lists_unset_steps",
        records(
            seq(None, {"r": [NO_KIND, [7, 8], typed([], "int64")]}), seq(), seq(None, {"r": [[9]]})
        ),
        list_ragged=[("r", I64, I64)],
    ),
    v2(
        "empty_batch",
        EMPTY,
        context_dense=[("c", np.array([1.0, 2.0], F32), [2])],
        context_sparse=[("s", I64)],
        context_ragged=[("r", F32, I32)],
        list_dense=[("d", F32, [2])],
        list_sparse=[("t", STR)],
        list_ragged=[("u", I64, I64)],
    ),
    v2(
        "unset_context_sparse",
        records(seq({"s": NO_KIND}), seq({"s": [4, 5]})),
        context_sparse=[("s", I64)],
    ),
    v2(
        "last_key_wins",
        records(seq({"c": [1.0]}, {"f": [[1.0]]}) + seq({"c": [2.0]}, {"f": [[3.0], [4.0]]})),
        context_dense=[("c", no_default(F32), [1])],
        list_dense=[("f", F32, [1])],
    ),
    v2(
        "unpacked_floats",
        records(seq(None, {"f": [Encoded(feature([1.5, 2.5], packed=False))]})),
        list_dense=[("f", F32, [2])],
    ),
    v2(
        "duplicate_dense_keys",
        BATCH,
        list_dense=[("tok", I64, [1]), ("tok", I64, [])],
        missing=flags(True, True),
    ),
    # ParseSequenceExampleV2, one record (no batch dimension).
    v2(
        "scalar_input",
        scalar(ONE),
        names=scalar(b"only"),
        context_dense=[("pos", no_default(F32), [2]), ("gone", np.array([9], I64), [1])],
        context_sparse=[("tags", STR)],
        list_dense=[("tok", I64, [1]), ("emb", F32, [2]), ("nope", F32, [])],
        list_sparse=[("s", STR), ("word", STR)],
        missing=flags(False, False, True),
    ),
    v2(
        "scalar_ragged",
        scalar(ONE),
        context_ragged=[("tags", STR, I32)],
        list_ragged=[("s", STR, I64)],
    ),
    # Errors, in TensorFlow's words.
    v2(
        "error_context_required",
        BATCH,
        context_dense=[("age", no_default(I64), [])],
        expect_error=True,
    ),
    v2(
        "error_context_all_missing",
        BATCH,
        context_dense=[("zip", no_default(I64), [])],
        expect_error=True,
    ),
    v2(
        "error_context_too_many",
        BATCH,
        context_dense=[("pos", np.array([0.0], F32), [1])],
        expect_error=True,
    ),
    v2(
        "error_context_too_few",
        records(ONE, seq({"pos": [1.0]})),
        names=keys("a", "b"),
        context_dense=[("pos", np.zeros(2, F32), [2])],
        expect_error=True,
    ),
    v2(
        "error_context_no_kind",
        BATCH,
        context_dense=[("w", np.array([0.0], F32), [1])],
        expect_error=True,
    ),
    v2(
        "error_context_dense_type",
        BATCH,
        names=NAMES,
        context_dense=[("age", no_default(F32), [])],
        expect_error=True,
    ),
    v2("error_context_sparse_type", BATCH, context_sparse=[("tags", I64)], expect_error=True),
    v2(
        "error_context_ragged_type",
        BATCH,
        names=NAMES,
        context_ragged=[("pos", STR, I32)],
        expect_error=True,
    ),
    v2(
        "error_list_dense_type",
        BATCH,
        names=NAMES,
        list_dense=[("emb", I64, [2])],
        missing=flags(True),
        expect_error=True,
    ),
    v2("error_list_sparse_type", BATCH, list_sparse=[("word", F32)], expect_error=True),
    v2("error_list_ragged_type", BATCH, list_ragged=[("tok", F32, I32)], expect_error=True),
    v2(
        "error_list_step_count",
        records(seq(None, {"f": [[1.0, 2.0], [3.0, 4.0]]}), STEPS_CHECK),
        names=keys("a", "b"),
        list_dense=[("f", F32, [2])],
        expect_error=True,
    ),
    v2(
        "error_list_step_no_kind",
        records(seq(None, {"f": [[1.0], NO_KIND]})),
        list_dense=[("f", F32, [1])],
        expect_error=True,
    ),
    v2(
        "error_list_step_empty",
        records(seq(None, {"f": [[1.0], typed([], "float")]})),
        list_dense=[("f", F32, [1])],
        expect_error=True,
    ),
    v2("error_list_total", records(STEPS_CHECK), list_dense=[("f", F32, [2])], expect_error=True),
    v2(
        "error_list_required", BATCH, names=NAMES, list_dense=[("emb", F32, [2])], expect_error=True
    ),
    v2(
        "error_list_required_unnamed",
        BATCH,
        list_dense=[("tok", I64, [1]), ("s", STR, [1])],
        missing=flags(False, False),
        expect_error=True,
    ),
    v2(
        "error_not_a_proto",
        records(ONE, b"\x0a\x05ab"),
        names=keys("good", "bad"),
        list_dense=[("tok", I64, [1])],
        expect_error=True,
    ),
    v2(
        "error_names_count",
        BATCH,
        names=keys("x"),
        list_dense=[("tok", I64, [])],
        missing=flags(True),
        expect_error=True,
    ),
    v2(
        "error_default_shape",
        BATCH,
        context_dense=[("pos", np.zeros(3, F32), [2])],
        expect_error=True,
    ),
    v2(
        "error_default_rank",
        BATCH,
        context_dense=[("pos", np.zeros((1, 2), F32), [2])],
        expect_error=True,
    ),
    v2(
        "error_key_count",
        BATCH,
        context_dense=[("pos", no_default(F32), [2])],
        sparse_keys=keys("tags"),
        expect_error=True,
    ),
    v2(
        "error_flag_count",
        BATCH,
        list_dense=[("tok", I64, [1])],
        missing=flags(True, False),
        expect_error=True,
    ),
    v2(
        "error_matrix_input",
        np.array([[ONE]], dtype=object),
        list_dense=[("tok", I64, [1])],
        expect_error=True,
    ),
    v2(
        "error_dense_and_sparse",
        BATCH,
        context_dense=[("pos", no_default(F32), [2])],
        context_sparse=[("pos", F32)],
        expect_error=True,
    ),
    v2(
        "error_ragged_and_sparse",
        BATCH,
        list_sparse=[("tok", I64)],
        list_ragged=[("tok", I64, I32)],
        expect_error=True,
    ),
    v2("error_unknown_dim", BATCH, list_dense=[("tok", I64, [-1])], expect_error=True),
    # ParseSequenceExample (V1): keys and the missing lists as attrs.
    v1(
        "v1_batch",
        BATCH,
        names=NAMES,
        context_dense=[("pos", no_default(F32), [2]), ("age", np.array([0], I64), [1])],
        context_sparse=[("tags", STR)],
        list_dense=[("tok", I64, [1]), ("emb", F32, [2])],
        list_sparse=[("word", STR)],
        missing=["emb", "tok"],
    ),
    v1("v1_scalar_input", scalar(ONE), list_dense=[("tok", I64, [1])], list_sparse=[("s", STR)]),
    v1(
        "v1_error_required",
        BATCH,
        names=NAMES,
        list_dense=[("emb", F32, [2])],
        missing=["tok"],
        expect_error=True,
    ),
    # ParseSingleSequenceExample: keys as scalar inputs; TensorFlow's full-proto walk.
    single(
        "single",
        scalar(ONE),
        context_dense=[("pos", no_default(F32), [2]), ("gone", np.array([4, 5], I64), [2])],
        context_sparse=[("tags", STR), ("nope", F32)],
        list_dense=[("emb", F32, [2]), ("tok", I64, []), ("absent", STR, [1])],
        list_sparse=[("s", STR), ("word", STR), ("none", I64)],
        missing=keys("absent"),
    ),
    single(
        "single_empty_lists",
        scalar(seq(None, {"d": [], "s": []})),
        list_dense=[("d", I64, [2])],
        list_sparse=[("s", F32)],
    ),
    single(
        "single_error_required",
        scalar(ONE),
        context_dense=[("zz", no_default(F32), [1])],
        expect_error=True,
    ),
    single(
        "single_error_required_empty_name",
        scalar(ONE),
        debug_name=scalar(b""),
        context_dense=[("zz", no_default(F32), [1])],
        expect_error=True,
    ),
    single(
        "single_error_context_type",
        scalar(ONE),
        context_dense=[("pos", no_default(I64), [2])],
        expect_error=True,
    ),
    single(
        "single_error_context_no_kind",
        scalar(seq({"c": NO_KIND})),
        context_dense=[("c", np.array([1.0], F32), [1])],
        expect_error=True,
    ),
    single(
        "single_error_context_sparse_type",
        scalar(seq({"c": [1, -2, 2**40]})),
        context_sparse=[("c", STR)],
        expect_error=True,
    ),
    single(
        "single_error_context_count",
        scalar(ONE),
        context_dense=[("pos", no_default(F32), [3])],
        expect_error=True,
    ),
    single(
        "single_error_context_count_int64",
        scalar(ONE),
        context_dense=[("age", no_default(I64), [2])],
        expect_error=True,
    ),
    # Floats as C++'s text format writes them (the recorder keeps 500 bytes of a message).
    *(
        single(
            f"single_error_list_type_floats_{i}",
            scalar(seq(None, {"f": [values]})),
            list_dense=[("f", I64, [1])],
            expect_error=True,
        )
        for i, values in enumerate(
            [
                [1.5, 1e10, 0.1, 1e-7],
                [float("inf"), -0.0, 1.2345678, float("-inf")],
                [16777217.0, 3e38, float("nan"), -2.5e-5],
            ]
        )
    ),
    single(
        "single_error_list_type_bytes",
        scalar(seq(None, {"b": [[b"a\"\n\x01\xff'\\\t\r ~"]]})),
        list_dense=[("b", F32, [1])],
        expect_error=True,
    ),
    single(
        "single_error_list_no_kind",
        scalar(seq(None, {"f": [[1.0], NO_KIND]})),
        list_dense=[("f", F32, [1])],
        expect_error=True,
    ),
    single(
        "single_error_list_sparse_type",
        scalar(seq(None, {"i": [NO_KIND, [1, 2]]})),
        list_sparse=[("i", F32)],
        expect_error=True,
    ),
    single(
        "single_error_list_count", scalar(ONE), list_dense=[("emb", F32, [1])], expect_error=True
    ),
    single(
        "single_error_list_count_bytes",
        scalar(ONE),
        list_dense=[("word", STR, [1])],
        expect_error=True,
    ),
    single(
        "single_error_list_required",
        scalar(ONE),
        list_dense=[("zz", F32, [1])],
        missing=keys("tok"),
        expect_error=True,
    ),
    single(
        "single_error_not_a_proto",
        scalar(b"\x0a\x05ab"),
        list_dense=[("f", F32, [1])],
        expect_error=True,
    ),
    single(
        "single_error_vector_input", records(ONE), list_dense=[("tok", I64, [1])], expect_error=True
    ),
    single(
        "single_error_debug_name_vector",
        scalar(ONE),
        list_dense=[("tok", I64, [1])],
        debug_name=keys("a", "b"),
        expect_error=True,
    ),
    single(
        "single_error_missing_not_vector",
        scalar(ONE),
        list_dense=[("tok", I64, [1])],
        missing=scalar(b"tok"),
        expect_error=True,
    ),
    single(
        "single_error_key_not_scalar",
        scalar(ONE),
        context_dense=[("pos", no_default(F32), [2])],
        dense_keys=[keys("pos")],
        expect_error=True,
    ),
    single(
        "single_error_default_shape",
        scalar(ONE),
        context_dense=[("pos", np.zeros((2, 1), F32), [2])],
        expect_error=True,
    ),
]
