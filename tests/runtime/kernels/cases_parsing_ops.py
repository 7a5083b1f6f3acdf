"""Kernel cases for tf.Example parsing: ParseExampleV2 (batch and scalar input), ParseExample and
ParseSingleExample, plus SparseToDense.

Examples are written here with a small protobuf wire-format encoder (numpy only, so that the
recorder can import this module next to TensorFlow), which also makes protos no Python API would:
features whose ``kind`` is unset, keys repeated in one example, unpacked lists, truncated bytes.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case

# -- a minimal tf.Example writer ---------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def feature(values: list[Any] | None, kind: str | None = None, packed: bool = True) -> bytes:
    """A serialized Feature; ``kind`` picks the list when ``values`` is empty; None: no kind."""
    if values is None:
        return b""
    if kind is None:
        first = values[0]
        kind = (
            "bytes" if isinstance(first, bytes) else "int64" if isinstance(first, int) else "float"
        )
    if kind == "bytes":
        return _field(1, b"".join(_field(1, v) for v in values))
    if kind == "float":
        if packed:
            inner = _field(1, b"".join(struct.pack("<f", v) for v in values)) if values else b""
        else:
            inner = b"".join(_varint(1 << 3 | 5) + struct.pack("<f", v) for v in values)
        return _field(2, inner)
    inner = _field(1, b"".join(_varint(v) for v in values)) if values else b""
    return _field(3, inner)


def example(*entries: tuple[str, bytes]) -> bytes:
    """An Example from (key, serialized Feature) entries, in order (repeats allowed)."""
    features = b"".join(_field(1, _field(1, k.encode()) + _field(2, f)) for k, f in entries)
    return _field(1, features)


def ex(**features: list[Any] | Any) -> bytes:
    return example(
        *((k, feature(v if isinstance(v, list) else [v])) for k, v in features.items())
    )


def records(*items: bytes) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = list(items)
    return array


def scalar(item: bytes) -> np.ndarray:
    return np.array(item, dtype=object)


def keys(*names: str) -> np.ndarray:
    return np.array([n.encode() for n in names], dtype=object) if names else np.zeros(0, "S1")


NO_NAMES = np.zeros(0, "S1")
F32 = np.float32
I64 = np.int64


def no_default(dtype: type) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


def v2(
    name: str,
    serialized: np.ndarray,
    dense: list[tuple[str, np.ndarray, list[int]]] = (),  # type: ignore[assignment]
    sparse: list[tuple[str, type]] = (),  # type: ignore[assignment]
    ragged: list[tuple[str, type, type]] = (),  # type: ignore[assignment]
    names: np.ndarray = NO_NAMES,
    **kw: Any,
) -> Case:
    defaults = [d for _, d, _ in dense]
    return Case(
        name,
        "ParseExampleV2",
        {
            "serialized": serialized,
            "names": names,
            "sparse_keys": keys(*(k for k, _ in sparse)),
            "dense_keys": keys(*(k for k, _, _ in dense)),
            "ragged_keys": keys(*(k for k, _, _ in ragged)),
            "dense_defaults": defaults,
        },
        attrs={
            "num_sparse": len(sparse),
            "sparse_types": [t for _, t in sparse],
            "ragged_value_types": [t for _, t, _ in ragged],
            "ragged_split_types": [s for _, _, s in ragged],
            "dense_shapes": [s for _, _, s in dense],
        },
        node_attrs={"Tdense": [d.dtype.type for d in defaults]},
        **kw,
    )


NO_KIND = example(("a", feature(None)))
TWICE = ex(a=[1.0]) + ex(a=[2.0, 3.0])  # two Examples concatenated: the last "a" wins
MIXED = records(
    ex(a=[1.0, 2.0], s=[b"x", b"y"], r=[4, 5, 6], v=[1.0, 2.0, 3.0, 4.0]),
    ex(b=[7], s=[b"z"]),
    ex(a=[-1.5, 0.25], r=[9], v=[5.0, 6.0]),
    b"",
)



def _many(n: int) -> np.ndarray:
    """A batch in which each feature is absent, unset, empty or holds a few values, by pattern."""
    items = []
    for k in range(n):
        entries = []
        if k % 5:
            entries.append(("s", feature([b"v%d" % j for j in range(k % 4)], "bytes")))
        if k % 3 != 1:
            entries.append(("f", feature([k / 4, -k / 8][: k % 3], "float")))
        if k % 7 != 3:
            entries.append(("i", feature([k * 1000003 - 2**40, k][: (k + 1) % 3], "int64")))
        if k % 11 == 5:
            entries.append(("f", feature(None)))  # the last entry, with no kind, wins
        if k % 4 != 2:
            entries.append(("d", feature([k * 0.5])))
        entries.append(("r", feature(list(range(k % 3)), "int64")))
        items.append(example(*entries))
    return records(*items)


CASES = [
    # Dense fixed-length features: values, defaults, strings, scalars.
    v2("dense_float", records(ex(a=[1.0, 2.0]), ex(a=[3.0, 4.0])),
       dense=[("a", no_default(F32), [2])]),
    v2("dense_default", MIXED, dense=[("a", np.array([9.0, 8.0], F32), [2]),
                                      ("b", np.array([0], I64), [1])]),
    v2("dense_matrix", records(ex(m=[1, 2, 3, 4, 5, 6]), ex()),
       dense=[("m", np.arange(6, dtype=I64).reshape(3, 2), [3, 2])]),
    v2("dense_bytes", records(ex(w=[b"x"]), ex()), dense=[("w", np.array([b"d"], object), [1])]),
    v2("dense_scalar_shape", records(ex(n=[5]), ex()), dense=[("n", np.array(3, I64), [])]),
    v2("dense_no_kind_takes_default", records(NO_KIND),
       dense=[("a", np.array([7.0], F32), [1])]),
    v2("dense_last_key_wins", records(TWICE), dense=[("a", no_default(F32), [2])]),
    v2("dense_unpacked_floats", records(example(("a", feature([1.5, -2.0], packed=False)))),
       dense=[("a", no_default(F32), [2])]),
    v2("dense_empty_batch", np.zeros(0, dtype=object), dense=[("a", no_default(F32), [2])]),
    v2("empty_example", records(b""), dense=[("a", np.array([1.0], F32), [1])]),
    # Variable-length dense features: padded with the default to the longest example.
    v2("varlen", records(ex(a=[1.0, 2.0]), ex(a=[3.0]), ex(b=[1.0])),
       dense=[("a", np.array(-1.0, F32), [-1])]),
    v2("varlen_rows", records(ex(v=[1.0, 2.0, 3.0, 4.0]), ex(v=[3.0, 5.0])),
       dense=[("v", np.array(-1.0, F32), [-1, 2])]),
    v2("varlen_bytes", records(ex(s=[b"x", b"y"]), ex()),
       dense=[("s", np.array(b"pad", object), [-1])]),
    v2("varlen_no_kind", records(NO_KIND, ex(a=[1.0])), dense=[("a", np.array(0.0, F32), [-1])]),
    v2("varlen_empty_batch", np.zeros(0, dtype=object), dense=[("a", np.array(0.0, F32), [-1, 3])]),
    # Sparse and ragged features.
    v2("sparse", MIXED, sparse=[("s", np.bytes_), ("r", I64)]),
    v2("sparse_no_kind", records(NO_KIND, ex(a=[2.0])), sparse=[("a", F32)]),
    v2("sparse_last_key_wins", records(TWICE), sparse=[("a", F32)]),
    v2("sparse_empty_batch", np.zeros(0, dtype=object), sparse=[("a", F32)]),
    v2("ragged", MIXED, ragged=[("r", I64, np.int32), ("s", np.bytes_, np.int64)]),
    v2("ragged_empty_batch", np.zeros(0, dtype=object), ragged=[("a", F32, np.int32)]),
    v2("all_kinds", MIXED, dense=[("a", np.array([0.0, 0.0], F32), [2]),
                                  ("v", np.array(-1.0, F32), [-1, 2])],
       sparse=[("s", np.bytes_)], ragged=[("r", I64, np.int64)]),
    # Batches with every feature present, one example, and many examples.
    v2("dense_one_value_each",
       records(ex(f=1.5, i=7, s=b"a"), ex(f=-2.0, i=-1, s=b""), ex(f=0.0, i=2**40, s=b"xyz")),
       dense=[("f", no_default(F32), [1]), ("i", np.array(0, I64), []),
              ("s", np.array([b"d"], object), [1])]),
    v2("sparse_one_example", records(ex(s=[b"x", b"y", b"z"], f=[1.0], i=[3, 4])),
       sparse=[("s", np.bytes_), ("missing", F32), ("f", F32), ("i", I64)]),
    v2("many_examples", _many(40), dense=[("d", np.array([9.0], F32), [1])],
       sparse=[("s", np.bytes_), ("f", F32), ("i", I64)], ragged=[("r", I64, np.int32)]),
    # A scalar input: ParseSingleExample's layout.
    v2("scalar_input", scalar(MIXED[0]), dense=[("a", no_default(F32), [2]),
                                               ("v", np.array(0.0, F32), [-1, 2]),
                                               ("b", np.array(0.0, F32), [-1])],
       sparse=[("s", np.bytes_), ("q", I64)], ragged=[("r", I64, np.int32)]),
    # Errors.
    v2("error_required", records(ex(b=[1.0])), dense=[("a", no_default(F32), [1])],
       expect_error=True),
    v2("error_required_named", records(ex(a=[1.0]), ex(b=[1.0])),
       dense=[("a", no_default(F32), [1])], names=keys("first", "second"), expect_error=True),
    v2("error_type", records(ex(a=[1])), dense=[("a", no_default(F32), [1])], expect_error=True),
    v2("error_count", records(ex(a=[1.0]), ex(a=[1.0]), ex(a=[1.0, 2.0])),
       dense=[("a", no_default(F32), [1])], expect_error=True),
    v2("error_count_bytes", records(ex(a=[b"x", b"y"])),
       dense=[("a", np.array([b"q"], object), [1])], expect_error=True),
    v2("error_count_bytes_short", records(ex(a=[b"x"])),
       dense=[("a", np.array([b"q", b"r"], object), [2])], expect_error=True),
    v2("error_count_int64", records(ex(a=[1, 2, 3])), dense=[("a", no_default(I64), [2])],
       expect_error=True),
    v2("error_count_unpacked", records(example(("a", feature([1.5, -2.0], packed=False)))),
       dense=[("a", no_default(F32), [1])], expect_error=True),
    v2("error_empty_list", records(example(("a", feature([], "float")))),
       dense=[("a", np.array([7.0], F32), [1])], expect_error=True),
    v2("error_stride", records(ex(a=[1.0, 2.0, 3.0]), ex(a=[3.0, 5.0])),
       dense=[("a", np.array(-1.0, F32), [-1, 2])], expect_error=True),
    v2("error_sparse_type", records(ex(a=[1.0])), sparse=[("a", I64)], expect_error=True),
    v2("error_not_a_proto", records(b"abc"), dense=[("a", no_default(F32), [1])],
       expect_error=True),
    v2("error_matrix_input", np.array([[ex(a=1.0)]], dtype=object),
       dense=[("a", no_default(F32), [1])], expect_error=True),
    v2("error_default_shape", records(ex()), dense=[("a", np.array([3.0, 1.0, 2.0], F32), [2])],
       expect_error=True),
    v2("error_scalar_default_for_vector", records(ex()), dense=[("a", np.array(3.0, F32), [2])],
       expect_error=True),
    v2("error_varlen_default", records(ex()), dense=[("a", np.zeros(2, F32), [-1])],
       expect_error=True),
    v2("error_names_shape", records(ex(a=1.0), ex(a=2.0)), dense=[("a", no_default(F32), [1])],
       names=keys("only"), expect_error=True),
    v2("error_scalar_count", scalar(ex(a=[1.0])), dense=[("a", no_default(F32), [2])],
       expect_error=True),
    v2("error_scalar_count_bytes", scalar(ex(a=[b"x", b"y"])),
       dense=[("a", np.array([b"q"], object), [1])], expect_error=True),
    v2("error_scalar_count_bytes_short", scalar(ex(a=[b"x"])),
       dense=[("a", np.array([b"q", b"r"], object), [2])], expect_error=True),
    v2("error_scalar_type", scalar(ex(a=[1])), dense=[("a", no_default(F32), [1])],
       expect_error=True),
    v2("error_scalar_sparse_type", scalar(ex(a=[1])), sparse=[("a", F32)], expect_error=True),
    v2("error_scalar_stride", scalar(ex(a=[1.0, 2.0, 3.0])),
       dense=[("a", np.array(0.0, F32), [-1, 2])], expect_error=True),
    v2("error_scalar_required", scalar(ex()), dense=[("a", no_default(F32), [1])],
       expect_error=True),
    # ParseExample (v1): keys as lists of scalars.
    Case(
        "v1",
        "ParseExample",
        {
            "serialized": MIXED,
            "names": NO_NAMES,
            "sparse_keys": [np.array(b"s", object), np.array(b"r", object)],
            "dense_keys": [np.array(b"a", object), np.array(b"v", object)],
            "dense_defaults": [np.array([0.5, 0.5], F32), np.array(9.0, F32)],
        },
        attrs={"sparse_types": [np.bytes_, I64], "dense_shapes": [[2], [-1]]},
        node_attrs={"Nsparse": 2, "Ndense": 2, "Tdense": [F32, F32]},
    ),
    Case(
        "v1_error_scalar_input",
        "ParseExample",
        {
            "serialized": scalar(ex(a=1.0)),
            "names": NO_NAMES,
            "sparse_keys": [],
            "dense_keys": [np.array(b"a", object)],
            "dense_defaults": [no_default(F32)],
        },
        attrs={"sparse_types": [], "dense_shapes": [[1]]},
        node_attrs={"Nsparse": 0, "Ndense": 1, "Tdense": [F32]},
        expect_error=True,
    ),
    # ParseSingleExample: keys are attrs.
    Case(
        "single",
        "ParseSingleExample",
        {
            "serialized": scalar(ex(a=[1.0, 2.0], s=[b"x", b"w"], v=[3.0, 4.0, 5.0, 6.0])),
            "dense_defaults": [np.array([0.5, 0.5], F32), np.array(4, I64),
                               np.array(0.0, F32)],
        },
        attrs={
            "num_sparse": 2,
            "sparse_keys": ["s", "missing"],
            "dense_keys": ["a", "b", "v"],
            "sparse_types": [np.bytes_, F32],
            "dense_shapes": [[2], [], [-1, 2]],
        },
        node_attrs={"Tdense": [F32, I64, F32]},
    ),
    Case(
        "single_error_vector_input",
        "ParseSingleExample",
        {"serialized": records(ex(a=1.0)), "dense_defaults": [no_default(F32)]},
        attrs={"num_sparse": 0, "sparse_keys": [], "dense_keys": ["a"], "sparse_types": [],
               "dense_shapes": [[1]]},
        node_attrs={"Tdense": [F32]},
        expect_error=True,
    ),
    # SparseToDense: what tf.sparse.to_dense runs on a parsed sparse feature.
    Case(
        "sparse_to_dense",
        "SparseToDense",
        {
            "sparse_indices": np.array([[0, 0], [0, 2], [2, 1]], I64),
            "output_shape": np.array([3, 3], I64),
            "sparse_values": np.array([1.5, 2.5, 3.5], F32),
            "default_value": np.array(0.0, F32),
        },
    ),
    Case(
        "sparse_to_dense_strings_vector",
        "SparseToDense",
        {
            "sparse_indices": np.array([1, 3], np.int32),
            "output_shape": np.array([5], np.int32),
            "sparse_values": np.array([b"a", b"b"], object),
            "default_value": np.array(b"", object),
        },
    ),
    Case(
        "sparse_to_dense_scalar_value",
        "SparseToDense",
        {
            "sparse_indices": np.array([[0, 1], [1, 0]], I64),
            "output_shape": np.array([2, 2], I64),
            "sparse_values": np.array(7, np.int32),
            "default_value": np.array(-1, np.int32),
        },
    ),
    Case(
        "sparse_to_dense_error_order",
        "SparseToDense",
        {
            "sparse_indices": np.array([[0, 2], [0, 1]], I64),
            "output_shape": np.array([3, 4], I64),
            "sparse_values": np.array([1.0, 2.0], F32),
            "default_value": np.array(0.0, F32),
        },
        expect_error=True,
    ),
    Case(
        "sparse_to_dense_error_bounds",
        "SparseToDense",
        {
            "sparse_indices": np.array([[0, 1], [3, 0]], I64),
            "output_shape": np.array([3, 4], I64),
            "sparse_values": np.array([1.0, 2.0], F32),
            "default_value": np.array(0.0, F32),
        },
        expect_error=True,
    ),
    Case(
        "sparse_to_dense_error_repeated",
        "SparseToDense",
        {
            "sparse_indices": np.array([[0, 1], [0, 1]], I64),
            "output_shape": np.array([3, 4], I64),
            "sparse_values": np.array([1.0, 2.0], F32),
            "default_value": np.array(0.0, F32),
        },
        expect_error=True,
    ),
]
