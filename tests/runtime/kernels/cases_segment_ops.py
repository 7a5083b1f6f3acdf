"""Kernel cases for segment reductions, bincounts and tensor scatters, recorded via tf.raw_ops."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(21)
CASES: list[Case] = []


def floats(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return R.standard_normal(shape).astype(dtype)


def ints(*shape: int, high: int = 10, dtype: type = np.int32) -> np.ndarray:
    return R.integers(-high, high, size=shape).astype(dtype)


def ids(*values: int, dtype: type = np.int32) -> np.ndarray:
    return np.array(values, dtype)


def add(name: str, op: str, inputs: dict, attrs: dict | None = None, *, rtol: float = 1e-6,
        atol: float = 1e-6) -> None:
    CASES.append(Case(name, op, inputs, dict(attrs or {}), rtol=rtol, atol=atol))


# --- sorted segments ----------------------------------------------------------------------------

_SORTED = {
    "basic": ids(0, 0, 1, 3, 3, 3),  # segment 2 is empty: 0 for every reduction
    "single": ids(0, 0, 0, 0, 0, 0),
    "gaps_first": ids(2, 2, 4, 4, 4, 5),
    "long": ids(*([0] * 12 + [1] * 3 + [2] * 9 + [3] * 10)),
}
for _op in ("SegmentSum", "SegmentMean", "SegmentProd", "SegmentMin", "SegmentMax"):
    for _name, _ids in _SORTED.items():
        _rows = len(_ids)
        add(f"{_op}_{_name}_f32", _op, {"data": floats(_rows, 3), "segment_ids": _ids})
        add(f"{_op}_{_name}_i32", _op, {"data": ints(_rows, 2), "segment_ids": _ids})
    add(f"{_op}_1d_f64", _op, {"data": floats(6, dtype=np.float64), "segment_ids": _SORTED["basic"]})
    add(f"{_op}_3d_i64ids", _op,
        {"data": floats(6, 2, 2), "segment_ids": _SORTED["basic"].astype(np.int64)})
    add(f"{_op}_empty", _op, {"data": floats(0, 3), "segment_ids": ids()})
    add(f"{_op}_error_unsorted", _op, {"data": floats(4, 2), "segment_ids": ids(0, 2, 1, 3)})
    add(f"{_op}_error_negative", _op, {"data": floats(3, 2), "segment_ids": ids(-1, -1, -1)})
    add(f"{_op}_error_size", _op, {"data": floats(4, 2), "segment_ids": ids(0, 1, 1)})
add("SegmentMean_i32_truncates", "SegmentMean",
    {"data": np.array([[-7], [2], [5], [2]], np.int32), "segment_ids": ids(0, 0, 1, 1)})

# --- unsorted segments --------------------------------------------------------------------------

for _op in ("UnsortedSegmentSum", "UnsortedSegmentProd", "UnsortedSegmentMin",
            "UnsortedSegmentMax"):
    add(f"{_op}_basic", _op, {"data": floats(6, 3), "segment_ids": ids(3, 0, 3, -1, 1, 0),
                              "num_segments": np.array(5, np.int32)})
    add(f"{_op}_ints", _op, {"data": ints(5, 2), "segment_ids": ids(1, 1, 0, 1, 0),
                             "num_segments": np.array(3, np.int64)})
    add(f"{_op}_2d_ids", _op, {"data": floats(2, 3, 4), "segment_ids": ids(0, 2, 2, 1, 0, 2)
                               .reshape(2, 3), "num_segments": np.array(4, np.int32)})
    add(f"{_op}_i64_ids", _op, {"data": floats(4, dtype=np.float64),
                                "segment_ids": ids(1, 0, 1, 1, dtype=np.int64),
                                "num_segments": np.array(2, np.int32)})
    add(f"{_op}_no_segments", _op, {"data": floats(3, 2), "segment_ids": ids(-1, -1, -1),
                                    "num_segments": np.array(0, np.int32)})
    add(f"{_op}_empty_data", _op, {"data": floats(0, 2), "segment_ids": ids(),
                                   "num_segments": np.array(3, np.int32)})
    add(f"{_op}_error_range", _op, {"data": floats(3, 2), "segment_ids": ids(0, 3, 1),
                                    "num_segments": np.array(3, np.int32)})
    add(f"{_op}_error_shape", _op, {"data": floats(3, 2), "segment_ids": ids(0, 1),
                                    "num_segments": np.array(3, np.int32)})
    add(f"{_op}_error_negative_count", _op, {"data": floats(3, 2), "segment_ids": ids(0, 1, 1),
                                             "num_segments": np.array(-1, np.int32)})

# --- sparse segments (embedding bags) -----------------------------------------------------------

_TABLE = floats(20, 4)
_SPARSE = {
    "basic": (ids(3, 7, 7, 1, 0, 19), ids(0, 0, 0, 2, 2, 3)),
    "one_segment_9": (ids(*R.integers(0, 20, 9)), ids(*[0] * 9)),
    "one_segment_10": (ids(*R.integers(0, 20, 10)), ids(*[0] * 10)),
    "mixed_lengths": (ids(*R.integers(0, 20, 30)), ids(*([0] * 17 + [1] * 8 + [3] * 5))),
}
for _op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
    for _name, (_idx, _seg) in _SPARSE.items():
        add(f"{_op}_{_name}", _op, {"data": _TABLE, "indices": _idx, "segment_ids": _seg})
    _idx, _seg = _SPARSE["basic"]
    add(f"{_op}_WithNumSegments", f"{_op}WithNumSegments",
        {"data": _TABLE, "indices": _idx, "segment_ids": _seg,
         "num_segments": np.array(6, np.int32)})
    add(f"{_op}_i64", _op, {"data": _TABLE.astype(np.float64), "indices": _idx.astype(np.int64),
                            "segment_ids": _seg.astype(np.int64)})
    add(f"{_op}_1d", _op, {"data": floats(8), "indices": ids(1, 2, 3, 0, 5),
                           "segment_ids": ids(0, 0, 1, 1, 1)})
    add(f"{_op}_empty", _op, {"data": _TABLE, "indices": ids(), "segment_ids": ids()})
    add(f"{_op}_error_index", _op, {"data": _TABLE, "indices": ids(1, 20),
                                    "segment_ids": ids(0, 1)})
    add(f"{_op}_error_unsorted", _op, {"data": _TABLE, "indices": ids(1, 2, 3),
                                       "segment_ids": ids(1, 0, 1)})
    add(f"{_op}_error_too_many", f"{_op}WithNumSegments",
        {"data": _TABLE, "indices": ids(1, 2), "segment_ids": ids(0, 4),
         "num_segments": np.array(3, np.int32)})
add("SparseSegmentSum_ints", "SparseSegmentSum",
    {"data": ints(6, 3), "indices": ids(0, 5, 5, 2), "segment_ids": ids(0, 0, 1, 1)})

# Each path of the vectorized kernel, from its own generator (the cases after these keep their
# inputs): one row a segment, all segments present or not; short segments, all present; a long
# segment (TensorFlow's groups of 8) among single rows; a bfloat16 table (summed in float32).
_R2 = rng(22)
_TABLE2 = _R2.standard_normal((12, 3)).astype(np.float32)
_PATHS = {
    "one_row_dense": (ids(5, 0, 11, 3), ids(0, 1, 2, 3)),
    "one_row_gaps": (ids(5, 0, 11, 3), ids(0, 2, 3, 7)),
    "short_dense": (ids(*_R2.integers(0, 12, 12)), ids(0, 1, 1, 2, 2, 2, 3, 4, 4, 5, 5, 5)),
    "long_and_singles": (ids(*_R2.integers(0, 12, 70)), ids(*([0] * 40 + list(range(1, 31))))),
}
for _op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
    for _name, (_idx, _seg) in _PATHS.items():
        add(f"{_op}_{_name}", _op, {"data": _TABLE2, "indices": _idx, "segment_ids": _seg})
    _idx, _seg = _SPARSE["mixed_lengths"]
    add(
        f"{_op}_mixed_bfloat16",
        _op,
        {"data": _TABLE.astype(ml_dtypes.bfloat16), "indices": _idx, "segment_ids": _seg},
    )

# --- bincounts ----------------------------------------------------------------------------------

_VALUES = R.integers(0, 8, 30).astype(np.int32)
add("Bincount_counts", "Bincount", {"arr": _VALUES, "size": np.array(6, np.int32),
                                    "weights": np.array([], np.float32)})
add("Bincount_weights", "Bincount", {"arr": _VALUES.reshape(5, 6), "size": np.array(10, np.int32),
                                     "weights": floats(5, 6)})
add("Bincount_int_weights", "Bincount", {"arr": _VALUES, "size": np.array(8, np.int32),
                                         "weights": ints(30, dtype=np.int64)})
add("Bincount_size0", "Bincount", {"arr": _VALUES, "size": np.array(0, np.int32),
                                   "weights": np.array([], np.float64)})
add("Bincount_error_negative", "Bincount", {"arr": ids(1, -2), "size": np.array(3, np.int32),
                                            "weights": np.array([], np.float32)})
add("Bincount_error_size", "Bincount", {"arr": ids(1, 2), "size": np.array(-1, np.int32),
                                        "weights": np.array([], np.float32)})
for _binary in (False, True):
    _tag = "binary" if _binary else "counts"
    _attrs = {"binary_output": _binary}
    add(f"DenseBincount_1d_{_tag}", "DenseBincount",
        {"input": _VALUES, "size": np.array(6, np.int32), "weights": np.array([], np.float32)},
        _attrs)
    add(f"DenseBincount_1d_weights_{_tag}", "DenseBincount",
        {"input": _VALUES.astype(np.int64), "size": np.array(9, np.int64),
         "weights": floats(30, dtype=np.float64)}, _attrs)
    add(f"DenseBincount_2d_{_tag}", "DenseBincount",
        {"input": _VALUES.reshape(5, 6), "size": np.array(7, np.int32),
         "weights": np.array([], np.int32)}, _attrs)
    add(f"DenseBincount_2d_weights_{_tag}", "DenseBincount",
        {"input": _VALUES.reshape(3, 10), "size": np.array(5, np.int32),
         "weights": floats(3, 10)}, _attrs)
add("DenseBincount_error_rank3", "DenseBincount",
    {"input": _VALUES.reshape(2, 3, 5), "size": np.array(5, np.int32),
     "weights": np.array([], np.float32)})
add("DenseBincount_error_negative", "DenseBincount",
    {"input": ids(0, -1), "size": np.array(5, np.int32), "weights": np.array([], np.float32)})
add("DenseBincount_error_weights", "DenseBincount",
    {"input": ids(0, 1, 2), "size": np.array(5, np.int32), "weights": floats(2)})

# --- tensor scatters ----------------------------------------------------------------------------

for _op in ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
            "TensorScatterMin"):
    add(f"{_op}_elements", _op, {"tensor": floats(4, 3), "indices": ids(0, 1, 3, 2, 1, 0)
                                 .reshape(3, 2), "updates": floats(3)})
    add(f"{_op}_rows_repeated", _op, {"tensor": floats(5, 2), "indices": ids(4, 1, 4)
                                      .reshape(3, 1), "updates": floats(3, 2)})
    add(f"{_op}_ints_i64", _op, {"tensor": ints(3, 2, 2), "indices": ids(2, 0, dtype=np.int64)
                                 .reshape(2, 1), "updates": ints(2, 2, 2)})
    add(f"{_op}_batched_indices", _op, {"tensor": floats(3, 4), "indices": ids(0, 0, 2, 3, 1, 1,
                                        0, 0).reshape(2, 2, 2), "updates": floats(2, 2)})
    add(f"{_op}_flat_indices", _op, {"tensor": floats(5, 2), "indices": ids(3, 0, 3),
                                     "updates": floats(3, 2)})
    add(f"{_op}_no_updates", _op, {"tensor": floats(3), "indices": np.zeros((0, 1), np.int32),
                                   "updates": floats(0)})
    add(f"{_op}_error_range", _op, {"tensor": floats(3, 2), "indices": ids(3).reshape(1, 1),
                                    "updates": floats(1, 2)})
    add(f"{_op}_error_shape", _op, {"tensor": floats(3, 2), "indices": ids(1).reshape(1, 1),
                                    "updates": floats(1, 3)})
    add(f"{_op}_error_batch", _op, {"tensor": floats(3, 2), "indices": ids(1, 2).reshape(2, 1),
                                    "updates": floats(3, 2)})
