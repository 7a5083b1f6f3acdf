"""Kernel cases for sparse-tensor ops, recorded via tf.raw_ops (fixtures/record_kernel_cases.py).

A sparse tensor is three arrays: ``indices`` (int64 ``[nnz, rank]``), ``values`` (``[nnz]``) and
``dense_shape`` (int64 ``[rank]``). The cases cover what feature columns feed these ops (batches
with empty rows at the start, the middle and the end, string and numeric values), empty tensors
and the inputs TensorFlow rejects. Crosses live in ``cases_sparse_cross``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(31)
CASES: list[Case] = []


def idx(*rows: Any, rank: int = 2) -> np.ndarray:
    """An int64 ``[nnz, rank]`` index matrix (``rank`` fixes the width when there are no rows)."""
    return np.array(rows, np.int64).reshape(len(rows), rank)


def vec(*values: int, dtype: type = np.int64) -> np.ndarray:
    return np.array(values, dtype)


def S(*items: str) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = [s.encode() for s in items]
    return out


def floats(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return R.standard_normal(shape).astype(dtype)


def add(name: str, op: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
        node_attrs: dict[str, Any] | None = None, **kw: Any) -> None:
    CASES.append(Case(name, op, inputs, dict(attrs or {}), dict(node_attrs or {}),
                      expect_error="error" in name, **kw))


# --- SparseReshape ------------------------------------------------------------------------------

_IDX3 = idx([0, 0, 1], [0, 2, 3], [1, 1, 0], [1, 2, 2], rank=3)


def reshape(name: str, indices: np.ndarray, shape: list[int], new_shape: list[int]) -> None:
    add(f"SparseReshape_{name}", "SparseReshape",
        {"input_indices": indices, "input_shape": vec(*shape), "new_shape": vec(*new_shape)})


reshape("flatten_inner", _IDX3, [2, 3, 4], [2, 12])
reshape("infer_first", _IDX3, [2, 3, 4], [-1, 4])
reshape("infer_middle", _IDX3, [2, 3, 4], [4, -1, 2])
reshape("same_shape", _IDX3, [2, 3, 4], [2, 3, 4])
reshape("same_shape_inferred", _IDX3, [2, 3, 4], [2, -1, 4])
reshape("to_rank1", _IDX3, [2, 3, 4], [24])
reshape("from_rank1", idx([3], [7], [23], rank=1), [24], [2, 3, 4])
reshape("empty", idx(rank=2), [5, 6], [3, -1])
reshape("empty_zero_dims", idx(rank=2), [0, 6], [3, 0, 2])
reshape("to_scalar", idx([0, 0]), [1, 1], [])
reshape("error_two_unknown", _IDX3, [2, 3, 4], [-1, -1])
reshape("error_negative", _IDX3, [2, 3, 4], [-2, 12])
reshape("error_size", _IDX3, [2, 3, 4], [5, 5])
reshape("error_not_multiple", _IDX3, [2, 3, 4], [-1, 5])
reshape("error_infer_empty", idx(rank=2), [0, 4], [0, -1])
reshape("error_nnz_empty_shape", idx([0, 0]), [0, 4], [4, 0])
add("SparseReshape_error_indices_vector", "SparseReshape",
    {"input_indices": vec(0, 1), "input_shape": vec(2, 3), "new_shape": vec(6)})
add("SparseReshape_error_shape_matrix", "SparseReshape",
    {"input_indices": idx([0, 1]), "input_shape": vec(2, 3).reshape(1, 2), "new_shape": vec(6)})
add("SparseReshape_error_rank_mismatch", "SparseReshape",
    {"input_indices": idx([0, 1, 0], rank=3), "input_shape": vec(2, 3), "new_shape": vec(6)})

# --- SparseFillEmptyRows ------------------------------------------------------------------------


def fill(name: str, indices: np.ndarray, values: np.ndarray, shape: list[int],
         default: Any) -> None:
    add(f"SparseFillEmptyRows_{name}", "SparseFillEmptyRows",
        {"indices": indices, "values": values, "dense_shape": vec(*shape),
         "default_value": np.array(default, values.dtype)})


# Rows 0, 2 and 5 are empty: at the start, in the middle and at the end.
_FILL_IDX = idx([1, 0], [1, 3], [3, 1], [4, 0], [4, 2])
fill("gaps", _FILL_IDX, floats(5), [6, 4], -1.5)
fill("gaps_strings", _FILL_IDX, S("a", "b", "c", "d", "e"), [6, 4], b"missing")
fill("gaps_int64", _FILL_IDX, vec(7, 8, 9, 10, 11), [6, 9], 0)
fill("full_ordered", idx([0, 1], [1, 0], [1, 1], [2, 5]), floats(4), [3, 6], 0.0)
fill("full_unordered", idx([1, 0], [0, 1], [2, 5], [1, 1]), floats(4, dtype=np.float64), [3, 6],
     9.0)
fill("gaps_unordered", idx([3, 0], [1, 2], [3, 1], [1, 0]), vec(1, 2, 3, 4, dtype=np.int32),
     [5, 3], -7)
fill("unsorted_within_rows", idx([2, 3], [0, 1], [2, 0]), floats(3), [4, 4], 0.0)
fill("no_entries", idx(rank=2), floats(0), [3, 2], 4.0)
fill("no_rows", idx(rank=2), floats(0), [0, 5], 4.0)
fill("rank1", idx([2], [4], rank=1), vec(5, 6), [6], 1)
fill("rank3", idx([0, 1, 2], [2, 0, 1], rank=3), S("x", "y"), [4, 3, 3], b"")
fill("bool", idx([1, 0]), np.array([True]), [3, 1], False)
fill("error_row_too_big", idx([0, 0], [5, 1]), floats(2), [5, 2], 0.0)
fill("error_row_negative", idx([0, 0], [-1, 1]), floats(2), [5, 2], 0.0)
fill("error_zero_rows", idx([0, 0]), floats(1), [0, 2], 0.0)
add("SparseFillEmptyRows_error_values_length", "SparseFillEmptyRows",
    {"indices": idx([0, 0], [1, 1]), "values": floats(3), "dense_shape": vec(2, 2),
     "default_value": np.float32(0)})
add("SparseFillEmptyRows_error_default_shape", "SparseFillEmptyRows",
    {"indices": idx([0, 0]), "values": floats(1), "dense_shape": vec(2, 2),
     "default_value": floats(1)})
add("SparseFillEmptyRows_error_indices_vector", "SparseFillEmptyRows",
    {"indices": vec(0, 1), "values": floats(2), "dense_shape": vec(2),
     "default_value": np.float32(0)})
add("SparseFillEmptyRows_error_empty_shape", "SparseFillEmptyRows",
    {"indices": idx(rank=0), "values": floats(0), "dense_shape": vec(),
     "default_value": np.float32(0)})

# --- SparseTensorDenseMatMul --------------------------------------------------------------------

_A_IDX = idx([0, 1], [0, 4], [2, 0], [2, 2], [3, 3], [3, 4])


def matmul(name: str, indices: np.ndarray, values: np.ndarray, shape: list[int], b: np.ndarray,
           adjoint_a: bool = False, adjoint_b: bool = False) -> None:
    add(f"SparseTensorDenseMatMul_{name}", "SparseTensorDenseMatMul",
        {"a_indices": indices, "a_values": values, "a_shape": vec(*shape), "b": b},
        {"adjoint_a": adjoint_a, "adjoint_b": adjoint_b}, rtol=1e-5, atol=1e-5)


matmul("basic", _A_IDX, floats(6), [4, 5], floats(5, 3))
matmul("adjoint_a", _A_IDX, floats(6), [4, 5], floats(4, 3), adjoint_a=True)
matmul("adjoint_b", _A_IDX, floats(6), [4, 5], floats(3, 5), adjoint_b=True)
matmul("adjoint_both", _A_IDX, floats(6), [4, 5], floats(3, 4), True, True)
matmul("wide_b", _A_IDX, floats(6, dtype=np.float64), [4, 5], floats(5, 40, dtype=np.float64))
matmul("int32_indices", _A_IDX.astype(np.int32), floats(6), [4, 5], floats(5, 2))
matmul("int32_values", _A_IDX, vec(1, -2, 3, 4, 5, -6, dtype=np.int32), [4, 5],
       R.integers(-5, 5, (5, 3)).astype(np.int32))
matmul("repeated_index", idx([1, 1], [1, 1], [0, 0]), floats(3), [2, 2], floats(2, 3))
_C = (floats(6) + 1j * floats(6)).astype(np.complex64)
_CB = (floats(3, 5) + 1j * floats(3, 5)).astype(np.complex64)
matmul("complex_adjoint", _A_IDX, _C, [4, 5], _CB, adjoint_a=False, adjoint_b=True)
matmul("complex_adjoint_a", _A_IDX, _C, [4, 5], _CB[:, :4].T.copy(), adjoint_a=True)
matmul("no_entries", idx(rank=2), floats(0), [3, 4], floats(4, 2))
matmul("empty_output", idx(rank=2), floats(0), [0, 4], floats(4, 2))
matmul("empty_inner", idx(rank=2), floats(0), [3, 0], floats(0, 2))
matmul("error_k_bounds", idx([0, 0], [1, 5]), floats(2), [2, 5], floats(5, 3))
matmul("error_m_bounds", idx([0, 0], [2, 1]), floats(2), [2, 5], floats(5, 3))
matmul("error_inner", _A_IDX, floats(6), [4, 5], floats(4, 3))
matmul("error_b_vector", _A_IDX, floats(6), [4, 5], floats(5))
matmul("error_shape_rank", idx([0, 0, 0], rank=3), floats(1), [4, 5, 6], floats(6, 2))
matmul("error_values_length", _A_IDX, floats(5), [4, 5], floats(5, 3))
matmul("error_index_width", idx([0, 0, 0], rank=3), floats(1), [4, 5], floats(5, 2))

# --- SparseSlice --------------------------------------------------------------------------------

_SL_IDX = idx([0, 0], [0, 3], [1, 1], [2, 2], [2, 5], [4, 0], [4, 5])
_SL_VALS = floats(7)


def slice_(name: str, start: list[int], size: list[int], indices: np.ndarray = _SL_IDX,
           values: np.ndarray = _SL_VALS, shape: tuple[int, ...] = (5, 6)) -> None:
    add(f"SparseSlice_{name}", "SparseSlice",
        {"indices": indices, "values": values, "shape": vec(*shape), "start": vec(*start),
         "size": vec(*size)})


slice_("inner", [1, 1], [3, 3])
slice_("whole", [0, 0], [5, 6])
slice_("clipped", [2, 3], [10, 10])
slice_("start_past_end", [6, 0], [2, 6])
slice_("nothing_hit", [3, 3], [1, 2])
slice_("negative_start", [-1, 0], [3, 9])
slice_("strings", [0, 2], [3, 4], values=S("a", "b", "c", "d", "e", "f", "g"))
slice_("rank3", [1, 0, 1], [2, 2, 2], idx([0, 0, 0], [1, 1, 1], [1, 1, 2], [2, 0, 1], rank=3),
       vec(1, 2, 3, 4, dtype=np.int32), (3, 2, 3))
slice_("empty", [0, 0], [2, 2], idx(rank=2), floats(0))
slice_("error_start_length", [0], [2, 2])
slice_("error_size_length", [0, 0], [2])
slice_("error_negative_size", [0, 0], [-1, 9])
slice_("error_values_length", [0, 0], [2, 2], values=floats(3))

# --- SparseConcat -------------------------------------------------------------------------------


def concat(name: str, parts: list[tuple[np.ndarray, np.ndarray, list[int]]], dim: int) -> None:
    add(f"SparseConcat_{name}", "SparseConcat",
        {"indices": [p[0] for p in parts], "values": [p[1] for p in parts],
         "shapes": [vec(*p[2]) for p in parts]},
        {"concat_dim": dim}, {"N": len(parts)})


_P1 = (idx([0, 1], [2, 0]), floats(2), [3, 4])
_P2 = (idx([0, 0], [1, 2], [2, 1]), floats(3), [3, 3])
_P3 = (idx([1, 0]), floats(1), [3, 1])
concat("dim1", [_P1, _P2, _P3], 1)
concat("dim_negative", [_P1, _P2], -1)
concat("dim0", [(idx([0, 1], [1, 3]), S("a", "b"), [2, 4]), (idx([0, 0]), S("c"), [1, 4])], 0)
concat("with_empty", [_P1, (idx(rank=2), floats(0), [3, 2]), _P3], 1)
concat("rank3_dim1", [(idx([0, 0, 1], [1, 1, 0], rank=3), vec(1, 2), [2, 2, 2]),
                      (idx([0, 0, 0], [1, 0, 1], rank=3), vec(3, 4), [2, 1, 2])], 1)
concat("error_shape", [_P1, (idx([0, 0]), floats(1), [4, 2])], 1)
concat("error_dim", [_P1, _P2], 2)
concat("error_rank", [_P1, (idx([0, 0, 0], rank=3), floats(1), [3, 1, 1])], 1)

# --- SparseAdd ----------------------------------------------------------------------------------


def sparse_add(name: str, a: tuple[np.ndarray, np.ndarray, list[int]],
               b: tuple[np.ndarray, np.ndarray, list[int]], thresh: Any) -> None:
    add(f"SparseAdd_{name}", "SparseAdd",
        {"a_indices": a[0], "a_values": a[1], "a_shape": vec(*a[2]), "b_indices": b[0],
         "b_values": b[1], "b_shape": vec(*b[2]), "thresh": thresh})


_AI = idx([0, 0], [0, 2], [1, 1], [2, 3])
_BI = idx([0, 2], [1, 0], [1, 1], [2, 0], [3, 3])
_AV = np.array([1.0, 2.0, -3.0, 4.0], np.float32)
_BV = np.array([0.5, 7.0, 3.0, -1.0, 2.0], np.float32)
sparse_add("overlap", (_AI, _AV, [4, 4]), (_BI, _BV, [4, 4]), np.float32(0))
sparse_add("thresh_drops_cancelled", (_AI, _AV, [4, 4]), (_BI, _BV, [4, 4]), np.float32(0.1))
sparse_add("thresh_keeps_unsummed", (_AI, _AV, [4, 4]), (_BI, _BV, [4, 4]), np.float32(3.0))
sparse_add("ints", (_AI, vec(1, 2, 3, 4, dtype=np.int32), [4, 4]),
           (_BI, vec(5, -2, -3, 1, 1, dtype=np.int32), [4, 4]), np.int32(1))
sparse_add("a_empty", (idx(rank=2), floats(0, dtype=np.float64), [4, 4]),
           (_BI, _BV.astype(np.float64), [4, 4]), np.float64(0))
sparse_add("both_empty", (idx(rank=2), floats(0), [2, 2]), (idx(rank=2), floats(0), [2, 2]),
           np.float32(0))
sparse_add("complex", (_AI, (_AV + 1j).astype(np.complex64), [4, 4]),
           (_BI, (_BV - 1j).astype(np.complex64), [4, 4]), np.float32(1.0))
sparse_add("error_shape", (_AI, _AV, [4, 4]), (_BI, _BV, [4, 5]), np.float32(0))
sparse_add("error_rank", (_AI, _AV, [4, 4]), (idx([0, 0, 0], rank=3), floats(1), [4, 4, 1]),
           np.float32(0))
sparse_add("error_thresh_shape", (_AI, _AV, [4, 4]), (_BI, _BV, [4, 4]), floats(2))

# --- SparseReorder ------------------------------------------------------------------------------


def reorder(name: str, indices: np.ndarray, values: np.ndarray, shape: list[int]) -> None:
    add(f"SparseReorder_{name}", "SparseReorder",
        {"input_indices": indices, "input_values": values, "input_shape": vec(*shape)})


reorder("unordered", idx([2, 1], [0, 3], [2, 0], [1, 1], [0, 0]), floats(5), [3, 4])
reorder("ordered", idx([0, 0], [0, 3], [1, 1]), S("a", "b", "c"), [2, 4])
reorder("rank3", idx([1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 2], rank=3),
        vec(1, 2, 3, 4), [2, 2, 3])
reorder("empty", idx(rank=2), floats(0), [3, 3])
reorder("error_values_length", idx([0, 0], [1, 1]), floats(3), [2, 2])

# --- SparseReduceSum ----------------------------------------------------------------------------

_RS_IDX = idx([0, 0], [0, 2], [1, 1], [3, 0], [3, 2])
_RS_IDX3 = idx([0, 0, 1], [0, 1, 1], [1, 0, 0], [1, 1, 2], [1, 2, 2], rank=3)


def reduce_sum(name: str, indices: np.ndarray, values: np.ndarray, shape: list[int],
               axes: Any, keep_dims: bool = False) -> None:
    add(f"SparseReduceSum_{name}", "SparseReduceSum",
        {"input_indices": indices, "input_values": values, "input_shape": vec(*shape),
         "reduction_axes": np.array(axes, np.int32)}, {"keep_dims": keep_dims},
        rtol=1e-5, atol=1e-5)


reduce_sum("axis1", _RS_IDX, floats(5), [4, 3], [1])
reduce_sum("axis0", _RS_IDX, floats(5), [4, 3], 0)
reduce_sum("all", _RS_IDX, floats(5), [4, 3], [0, 1])
reduce_sum("negative_axis", _RS_IDX, floats(5, dtype=np.float64), [4, 3], [-1])
reduce_sum("keep_dims", _RS_IDX, vec(1, 2, 3, 4, 5, dtype=np.int32), [4, 3], [1], True)
reduce_sum("rank3_outer", _RS_IDX3, floats(5), [2, 3, 3], [0, 2])
reduce_sum("rank3_keep", _RS_IDX3, vec(1, 2, 3, 4, 5), [2, 3, 3], [1], True)
reduce_sum("no_axes", _RS_IDX, floats(5), [4, 3], np.zeros(0, np.int32))
reduce_sum("empty", idx(rank=2), floats(0), [2, 3], [1])
reduce_sum("error_axis", _RS_IDX, floats(5), [4, 3], [2])
# An index past the shape in a kept dimension: TensorFlow's INTERNAL error, not a bad argument.
reduce_sum("error_write_index", idx([0, 0], [5, 1]), floats(2), [2, 2], [1])

# --- Fast paths and their fallbacks --------------------------------------------------------------
# Appended last so that the random values of the cases above stay as recorded.

# SparseReshape to the shape the tensor has takes a shortcut; an inferred dimension that lands
# on the same shape does not. Offsets of indices past the shape (which TensorFlow does not check)
# are split with C++'s truncating division, unlike valid ones.
reshape("same_shape_one_per_row", idx([0, 0], [1, 0], [2, 0], [3, 0]), [4, 1], [4, 1])
reshape("same_shape_rank1", idx([1], [3], rank=1), [5], [5])
reshape("negative_index_truncates", idx([0, -1], [1, 2], [-1, 1]), [2, 3], [3, 2])
# SparseFillEmptyRows: one entry per row in row order is its own output; sorted rows with gaps
# are filled without a sort; unsorted or out-of-range rows take the general path.
fill("one_per_row", idx([0, 0], [1, 0], [2, 0], [3, 0]), vec(5, 6, 7, 8), [4, 1], 0)
fill("sorted_gaps_repeats", idx([0, 0], [0, 1], [0, 2], [2, 0], [2, 1], [5, 0]), floats(6),
     [7, 3], 2.5)
fill("sorted_last_row_empty", idx([0, 0], [1, 1], [1, 2]), S("a", "b", "c"), [3, 3], b"z")
fill("error_sorted_negative", idx([-1, 0], [0, 0], [1, 0]), floats(3), [2, 1], 0.0)
fill("error_unsorted_huge_row", idx([0, 0], [(1 << 63) - 1, 0], [1, 0]), floats(3), [2, 1], 0.0)
