"""Kernel cases for feature crosses (SparseCross, SparseCrossV2, SparseCrossHashed), recorded via
tf.raw_ops (fixtures/record_kernel_cases.py).

A cross takes sparse inputs (``indices``, ``values``, ``shapes`` lists, one entry per input) and
dense ``[batch, width]`` inputs, and for each batch row emits every combination of the row's
features, sparse inputs first. ``crossed_column`` runs SparseCross with ``hashed_output`` and
``hash_key`` 0xDECAFCAFFE; the Keras ``HashedCrossing`` layer runs SparseCrossHashed. Inputs mix
int64 and string columns, rows with several features (the order of the product), rows empty in one
column (no crosses for that row), and the inputs TensorFlow rejects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case

CASES: list[Case] = []
FEATURE_COLUMN_HASH_KEY = 0xDECAFCAFFE


def S(*items: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = [s.encode() for s in items]
    return out if shape is None else out.reshape(shape)


def I64(*values: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.array(values, np.int64)
    return out if shape is None else out.reshape(shape)


def sparse(rows: list[int], values: np.ndarray, batch: int) -> tuple[np.ndarray, ...]:
    """A ``[batch, max features]`` sparse input whose i-th value sits in row ``rows[i]``."""
    rows_arr = np.array(rows, np.int64)
    cols = np.zeros(len(rows), np.int64)
    for i in range(1, len(rows)):
        cols[i] = cols[i - 1] + 1 if rows[i] == rows[i - 1] else 0
    width = int(cols.max()) + 1 if len(rows) else 0
    return np.stack([rows_arr, cols], axis=1).reshape(-1, 2), values, I64(batch, width)


def _np_type(array: np.ndarray) -> type:
    return np.bytes_ if array.dtype == object else array.dtype.type


def _inputs(sparse_inputs: list[tuple[np.ndarray, ...]], dense: list[np.ndarray]) -> tuple[
        dict[str, Any], dict[str, Any]]:
    inputs = {"indices": [s[0] for s in sparse_inputs], "values": [s[1] for s in sparse_inputs],
              "shapes": [s[2] for s in sparse_inputs], "dense_inputs": list(dense)}
    node_attrs = {"N": len(sparse_inputs),
                  "sparse_types": [_np_type(s[1]) for s in sparse_inputs],
                  "dense_types": [_np_type(d) for d in dense]}
    return inputs, node_attrs


def cross(name: str, sparse_inputs: list[tuple[np.ndarray, ...]], dense: list[np.ndarray], *,
          hashed: bool, num_buckets: int = 0, hash_key: int = FEATURE_COLUMN_HASH_KEY,
          internal: type | None = None) -> None:
    inputs, node_attrs = _inputs(sparse_inputs, dense)
    kinds = [s[1].dtype for s in sparse_inputs] + [d.dtype for d in dense]
    if internal is None:  # what tf.sparse.cross* pick: string only if every input is a string
        internal = np.bytes_ if all(k == object for k in kinds) else np.int64
    attrs = {"hashed_output": hashed, "num_buckets": num_buckets, "hash_key": hash_key,
             "out_type": np.int64 if hashed else np.bytes_, "internal_type": internal}
    CASES.append(Case(f"SparseCross_{name}", "SparseCross", inputs, attrs, node_attrs,
                      expect_error="error" in name))


def cross_v2(name: str, sparse_inputs: list[tuple[np.ndarray, ...]], dense: list[np.ndarray],
             sep: Any = b"_X_") -> None:
    inputs, node_attrs = _inputs(sparse_inputs, dense)
    inputs["sep"] = np.array(sep, dtype=object)
    CASES.append(Case(f"SparseCrossV2_{name}", "SparseCrossV2", inputs, {}, node_attrs,
                      expect_error="error" in name))


def cross_hashed(name: str, sparse_inputs: list[tuple[np.ndarray, ...]],
                 dense: list[np.ndarray], num_buckets: int, strong: bool = False,
                 salt: tuple[int, ...] = (137, 9001)) -> None:
    inputs, node_attrs = _inputs(sparse_inputs, dense)
    inputs.update(num_buckets=np.int64(num_buckets), strong_hash=np.bool_(strong),
                  salt=I64(*salt))
    CASES.append(Case(f"SparseCrossHashed_{name}", "SparseCrossHashed", inputs, {}, node_attrs,
                      expect_error="error" in name))


# Batch of 4: row 0 empty in COUNTRY, row 3 empty in LANG, rows with one to three features.
COUNTRY = sparse([1, 1, 2, 3], S("US", "CA", "FR", "DE"), 4)
LANG = sparse([0, 1, 2, 2, 2], S("en", "fr", "de", "en", "it"), 4)
AGE = sparse([0, 1, 1, 2, 3], I64(21, 35, -4, 7, 1 << 40), 4)
DENSE_S = S("a", "b", "c", "d", "e", "f", "g", "h", shape=(4, 2))
DENSE_I = I64(3, 1, 4, 1, shape=(4, 1))
# Every row has features in every column.
FULL_A = sparse([0, 1, 1, 2], S("x", "y", "z", "w"), 3)
FULL_B = sparse([0, 0, 1, 2], I64(5, 6, 7, 8), 3)
# Row 2 empty; values past 32 bits (SparseCrossHashed fingerprints only their low 4 bytes).
INTS4 = sparse([0, 0, 1, 3], I64(5, -6, (1 << 33) + 5, 1 << 35), 4)

cross("hashed_two_strings", [COUNTRY, LANG], [], hashed=True, num_buckets=100)
cross("hashed_two_strings_no_buckets", [COUNTRY, LANG], [], hashed=True)
cross("hashed_mixed_three", [COUNTRY, AGE, LANG], [], hashed=True, num_buckets=1000)
cross("hashed_sparse_dense", [AGE], [DENSE_S], hashed=True, num_buckets=7)
cross("hashed_dense_int", [COUNTRY], [DENSE_I, DENSE_S], hashed=True, num_buckets=50)
cross("hashed_dense_only", [], [DENSE_S, DENSE_I], hashed=True, num_buckets=0)
cross("hashed_full_rows", [FULL_A, FULL_B], [], hashed=True, num_buckets=10, hash_key=0)
cross("hashed_ints_only", [AGE, INTS4], [], hashed=True)
cross("hashed_single", [LANG], [], hashed=True, num_buckets=5)
cross("strings_two", [COUNTRY, LANG], [], hashed=False)
cross("strings_three_dense", [LANG, AGE], [DENSE_S], hashed=False)
cross("strings_dense_only", [], [DENSE_S, DENSE_I], hashed=False)
cross("strings_ints_internal_int", [AGE, INTS4], [], hashed=False)
# Rows out of order: TensorFlow reads a column's rows as consecutive runs in increasing order
# and stops at the first run out of order, so row 0's feature below is never read.
cross("unsorted_rows", [sparse([1, 0, 2, 2], S("a", "b", "c", "d"), 3),
                        sparse([0, 1, 2], S("x", "y", "z"), 3)], [], hashed=False)
cross("empty_batch", [sparse([], S(), 0), sparse([], S(), 0)], [], hashed=True, num_buckets=3)
cross("all_rows_empty", [sparse([], S(), 3), FULL_A], [], hashed=False)
cross("error_internal_string_int_values", [AGE, LANG], [], hashed=True,
      internal=np.bytes_)
cross("error_batch_size", [COUNTRY, FULL_A], [], hashed=True)
cross("error_dense_batch", [COUNTRY], [S("a", "b", shape=(2, 1))], hashed=True)
cross("error_shape_rank", [(COUNTRY[0], COUNTRY[1], I64(4, 2, 1)), LANG], [], hashed=True)
cross("error_indices_width", [(I64(0, 0, 0, shape=(1, 3)), S("a"), I64(4, 1)), LANG], [],
      hashed=True)
cross("error_values_length", [(COUNTRY[0], S("a"), COUNTRY[2]), LANG], [], hashed=True)
cross("error_dense_rank", [COUNTRY], [S("a", "b", "c", "d")], hashed=True)

# Batches big enough for the vectorised hash paths (many distinct, longer strings).
_BIG_ROWS = sorted(np.random.default_rng(5).integers(0, 60, 150).tolist())
BIG_WORDS = sparse(_BIG_ROWS, S(*[f"token-{i}-" + "x" * (i % 70) for i in range(150)]), 60)
BIG_IDS = sparse(list(range(60)), np.random.default_rng(6).integers(-1 << 40, 1 << 40, 60), 60)
cross("hashed_big", [BIG_WORDS, BIG_IDS], [], hashed=True, num_buckets=10_000)
cross("strings_big", [BIG_IDS, BIG_WORDS], [], hashed=False)

cross_v2("default_sep", [COUNTRY, LANG], [])
cross_v2("custom_sep_mixed", [COUNTRY, AGE], [DENSE_I], sep=b" & ")
cross_v2("empty_sep_dense", [FULL_A], [S("p", "q", "r", shape=(3, 1))], sep=b"")
cross_v2("error_sep_vector", [COUNTRY, LANG], [], sep=[b"a", b"b"])

cross_hashed("strings", [COUNTRY, LANG], [], 100)
cross_hashed("sparse_ints", [AGE, INTS4], [], 0)
cross_hashed("dense_ints", [COUNTRY], [DENSE_I], 1000)
cross_hashed("mixed_three", [LANG, AGE], [DENSE_S], 17)
cross_hashed("strong_strings", [COUNTRY, LANG], [], 100, strong=True)
# Strong hashing of dense int64 inputs crashes TensorFlow 2.21's kernel, so it is not recorded.
cross_hashed("strong_mixed", [AGE, INTS4], [DENSE_S], 64, strong=True, salt=(-5, 1 << 62))
cross_hashed("big", [BIG_WORDS, BIG_IDS], [], 1 << 20)
cross_hashed("strong_big", [BIG_WORDS, BIG_IDS], [], 0, strong=True)
cross_hashed("negative_buckets", [FULL_A, FULL_B], [], -3)
cross_hashed("error_salt_length", [COUNTRY, LANG], [], 10, salt=(1, 2, 3))

# --- The paths by size ----------------------------------------------------------------------------
# Columns with one feature per row, in row order (single-valued feature columns), skip the
# product; repeated combinations are folded once; larger crosses take the vectorised paths.
_ONE_A = sparse([0, 1, 2, 3], I64(3, 1, 3, 7), 4)
_ONE_B = sparse([0, 1, 2, 3], S("paris", "lima", "paris", "oslo"), 4)
_ONE_D = S("x", "y", "x", "x", shape=(4, 1))
cross("hashed_one_per_row", [_ONE_A, _ONE_B], [_ONE_D], hashed=True, num_buckets=32)
cross("hashed_one_per_row_no_buckets", [_ONE_B], [DENSE_I], hashed=True)
cross("strings_one_per_row", [_ONE_A, _ONE_B], [_ONE_D], hashed=False)
cross("hashed_one_row", [sparse([0], I64(4), 1), sparse([0], S("paris"), 1)], [],
      hashed=True, num_buckets=32)
_R7 = np.random.default_rng(7)
_CITIES = [f"city-{i}" for i in range(12)]
# 48 rows repeating a few combinations (the Python fold of distinct ones), then 70 rows of
# distinct ones (numpy's fold), each column one feature per row.
_REP_IDS = sparse(list(range(48)), I64(*(_R7.integers(0, 3, 48).tolist())), 48)
_REP_CITY = S(*(_CITIES[i] for i in _R7.integers(0, 4, 48)), shape=(48, 1))
cross("hashed_repeated_combinations", [_REP_IDS], [_REP_CITY], hashed=True, num_buckets=97)
_MANY_IDS = sparse(list(range(70)), I64(*(_R7.integers(-1 << 40, 1 << 40, 70).tolist())), 70)
_MANY_CITY = S(*(_CITIES[i] for i in _R7.integers(0, 12, 70)), shape=(70, 1))
cross("hashed_one_per_row_big", [_MANY_IDS], [_MANY_CITY], hashed=True, num_buckets=1000)
cross("strings_one_per_row_big", [_MANY_IDS], [_MANY_CITY], hashed=False)
# Few entries, many combinations: a Python layout with numpy's product.
_NINE = sparse([0] * 9 + [1], S(*(f"w{i}" for i in range(10))), 2)
_NINE_IDS = sparse([0] * 9 + [1, 1], I64(*range(11)), 2)
cross("hashed_many_combinations", [_NINE, _NINE_IDS], [], hashed=True, num_buckets=50)
cross("strings_many_combinations", [_NINE, _NINE_IDS], [], hashed=False)
# Over 80 distinct strings, repeated: hashed at once, each distinct one once.
_WORDS = S(*(f"word-{i % 90}" for i in range(200)))
cross("hashed_repeated_big_vocabulary", [sparse(sorted(_R7.integers(0, 50, 200).tolist()),
                                                _WORDS, 50)], [], hashed=True, num_buckets=0)
cross_v2("one_per_row", [_ONE_A], [_ONE_D], sep=b"|")
cross_hashed("one_per_row", [_ONE_A, _ONE_B], [_ONE_D], 32)
cross_hashed("strong_one_per_row", [_ONE_B], [_ONE_D], 32, strong=True)
cross_hashed("repeated_combinations", [_REP_IDS], [_REP_CITY], 97)
cross_hashed("strong_repeated_big_vocabulary", [sparse(list(range(200)), _WORDS, 200)], [], 0,
             strong=True)
# Past the small layout: a dense column, and a sparse column with no entries at all.
cross("hashed_big_dense", [BIG_WORDS], [S(*(f"d{i % 7}" for i in range(120)), shape=(60, 2))],
      hashed=True, num_buckets=64)
cross("strings_big_empty_column", [BIG_WORDS, sparse([], S(), 60)], [], hashed=False)
