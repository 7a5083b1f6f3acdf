"""Kernel cases for array_ops, recorded through ``tf.raw_ops`` (see ``case.py``).

Inputs are keyed by ``tf.raw_ops``' argument names, which differ from the op registry's in a few
places (ExpandDims/Split/SplitV ``axis``, Where ``condition``); only their order reaches our
kernels. Squeeze's ``squeeze_dims`` attr is ``axis`` in ``tf.raw_ops``, so its cases pass ``axis``
to TensorFlow and ``squeeze_dims`` (in node_attrs) to our kernel.
"""

from __future__ import annotations

import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(7)
I32, I64 = np.int32, np.int64


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def iota(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def vec(*values: int, dtype: type = np.int32) -> np.ndarray:
    return np.array(values, dtype=dtype)


STRINGS = np.array([[b"a", b"bc"], [b"", b"xyz"]], dtype=object)
X345 = iota(3, 4, 5)

CASES: list[Case] = []
add = CASES.append

# --- identities -------------------------------------------------------------------------------
for op in ("Identity", "Snapshot", "StopGradient", "PreventGradient"):
    add(Case(f"{op}_f32", op, {"input": f32(2, 3)}))
    if op != "Snapshot":  # TensorFlow has no CPU Snapshot kernel for strings
        add(Case(f"{op}_str", op, {"input": STRINGS}))
add(Case("Identity_scalar_i64", "Identity", {"input": np.int64(-4)}))
add(Case("Identity_bool_empty", "Identity", {"input": np.zeros((0, 3), bool)}))
add(Case("Identity_f16", "Identity", {"input": f32(4).astype(np.float16)}))
add(Case("IdentityN_two", "IdentityN", {"input": [f32(2), vec(1, 2, 3)]}))
add(Case("IdentityN_one", "IdentityN", {"input": [f32(2, 2)]}))
add(
    Case(
        "PlaceholderWithDefault", "PlaceholderWithDefault", {"input": f32(2, 3)}, {"shape": [-1, 3]}
    )
)
add(Case("EnsureShape_ok", "EnsureShape", {"input": f32(2, 3)}, {"shape": [2, 3]}))
add(Case("EnsureShape_unknown_dim", "EnsureShape", {"input": f32(2, 3)}, {"shape": [-1, 3]}))
add(Case("EnsureShape_scalar", "EnsureShape", {"input": np.float32(1)}, {"shape": []}))
add(
    Case(
        "EnsureShape_bad_dim",
        "EnsureShape",
        {"input": f32(2, 3)},
        {"shape": [-1, 4]},
        expect_error=True,
    )
)
add(
    Case(
        "EnsureShape_bad_rank",
        "EnsureShape",
        {"input": f32(6)},
        {"shape": [-1, 2]},
        expect_error=True,
    )
)

for op in ("CheckNumerics", "CheckNumericsV2"):
    add(Case(f"{op}_ok", op, {"tensor": f32(3, 2)}, {"message": "m"}))
    add(Case(f"{op}_f16", op, {"tensor": f32(3).astype(np.float16)}, {"message": "m"}))
    add(Case(f"{op}_f64_empty", op, {"tensor": np.zeros((0,), np.float64)}, {"message": "m"}))
    add(
        Case(
            f"{op}_nan",
            op,
            {"tensor": np.array([1, np.nan], np.float32)},
            {"message": "bad"},
            expect_error=True,
        )
    )
    add(
        Case(
            f"{op}_inf",
            op,
            {"tensor": np.array([1, -np.inf], np.float32)},
            {"message": "bad"},
            expect_error=True,
        )
    )

# --- shapes -----------------------------------------------------------------------------------
for name, x in (
    ("f32", f32(2, 3, 4)),
    ("scalar", np.float32(2)),
    ("empty", np.zeros((0, 5))),
    ("str", STRINGS),
):
    add(Case(f"Shape_{name}", "Shape", {"input": x}))
    add(Case(f"Size_{name}", "Size", {"input": x}))
    add(Case(f"Rank_{name}", "Rank", {"input": x}))
add(Case("Shape_i64", "Shape", {"input": f32(3, 1)}, {"out_type": np.int64}))
add(Case("Size_i64", "Size", {"input": f32(3, 2)}, {"out_type": np.int64}))
add(Case("ShapeN_two", "ShapeN", {"input": [f32(2, 3), f32(0)]}))
add(Case("ShapeN_one_i64", "ShapeN", {"input": [f32(2, 3)]}, {"out_type": np.int64}))

# --- Reshape ----------------------------------------------------------------------------------
for name, x, shape in (
    ("basic", iota(2, 3), vec(3, 2)),
    ("infer", iota(2, 3, 4), vec(-1, 4)),
    ("infer_mid", iota(2, 3, 4), vec(2, -1, 3)),
    ("to_scalar", np.array([5.0], np.float32), np.zeros(0, I32)),
    ("from_scalar", np.float32(5), vec(1, 1)),
    ("scalar_shape", np.array([7], np.int32), np.int32(1)),
    ("i64_shape", iota(6, dtype=np.int64), vec(2, 3, dtype=I64)),
    ("empty_zero_infer", np.zeros((0, 3), np.float32), vec(0, -1)),
    ("empty_infer", np.zeros((0, 3), np.float32), vec(5, -1)),
    ("empty_to_empty", np.zeros((2, 0), np.float32), vec(0, 7)),
    ("str", STRINGS, vec(4)),
    ("bad_count", iota(6), vec(4)),
    ("bad_multiple", iota(6), vec(4, -1)),
    ("two_unknown", iota(6), vec(-1, -1)),
    ("negative", iota(6), vec(-2, 3)),
    ("matrix_shape", iota(6), vec(2, 3).reshape(1, 2)),
):
    add(Case(f"Reshape_{name}", "Reshape", {"tensor": x, "shape": shape}))

# --- Squeeze / ExpandDims / Transpose ---------------------------------------------------------
for name, x, dims in (
    ("all", f32(1, 3, 1, 2), []),
    ("all_ones", f32(1, 1), []),
    ("some", f32(1, 3, 1, 2), [2]),
    ("negative", f32(1, 3, 1, 2), [-4, -2]),
    ("duplicate", f32(1, 2), [0, -2]),
    ("not_one", f32(1, 2), [1]),
    ("out_of_range", f32(1, 2), [2]),
):
    add(
        Case(
            f"Squeeze_{name}",
            "Squeeze",
            {"input": x},
            {"axis": dims},
            node_attrs={"squeeze_dims": dims},
        )
    )

for name, x, dim in (
    ("front", f32(2, 3), np.int32(0)),
    ("back", f32(2, 3), np.int32(2)),
    ("negative", f32(2, 3), np.int32(-1)),
    ("negative_front", f32(2, 3), np.int32(-3)),
    ("scalar_input", np.float32(3), np.int32(0)),
    ("vector_dim", f32(2, 3), vec(1)),
    ("i64_dim", f32(2), np.int64(1)),
    ("too_big", f32(2, 3), np.int32(3)),
    ("too_small", f32(2, 3), np.int32(-4)),
    ("two_dims", f32(2, 3), vec(1, 2)),
):
    add(Case(f"ExpandDims_{name}", "ExpandDims", {"input": x, "axis": dim}))

for name, x, perm in (
    ("2d", f32(2, 3), vec(1, 0)),
    ("3d", f32(2, 3, 4), vec(2, 0, 1)),
    ("identity", f32(2, 3), vec(0, 1)),
    ("i64", f32(2, 3, 4), vec(1, 2, 0, dtype=I64)),
    ("scalar", np.float32(1), np.zeros(0, I32)),
    ("negative", f32(2, 3), vec(-1, 0)),
    ("empty_dim", np.zeros((0, 3), np.float32), vec(1, 0)),
    ("str", STRINGS, vec(1, 0)),
    ("repeated", f32(2, 3), vec(0, 0)),
    ("wrong_length", f32(2, 3), vec(0)),
):
    add(Case(f"Transpose_{name}", "Transpose", {"x": x, "perm": perm}))

add(Case("InvertPermutation", "InvertPermutation", {"x": vec(2, 0, 3, 1)}))
add(Case("InvertPermutation_i64", "InvertPermutation", {"x": vec(1, 0, dtype=I64)}))
add(Case("InvertPermutation_dup", "InvertPermutation", {"x": vec(2, 2, 1)}, expect_error=True))

# --- Concat / Pack / Unpack / Split -----------------------------------------------------------
for name, values, axis in (
    ("axis0", [f32(2, 3), f32(1, 3)], np.int32(0)),
    ("axis1", [f32(2, 3), f32(2, 1), f32(2, 2)], np.int32(1)),
    ("negative", [f32(2, 3), f32(2, 2)], np.int32(-1)),
    ("i64_axis", [f32(2), f32(3)], np.int64(0)),
    (
        "zero_size",
        [np.zeros((0, 3), np.float32), f32(2, 3), np.zeros((0, 3), np.float32)],
        np.int32(0),
    ),
    ("all_empty", [np.zeros((2, 0), np.float32), np.zeros((2, 0), np.float32)], np.int32(1)),
    ("int32", [vec(1, 2), vec(3)], np.int32(0)),
    ("bool", [np.array([True]), np.array([False, True])], np.int32(0)),
    ("str", [STRINGS, STRINGS[:1]], np.int32(0)),
    ("scalars", [np.float32(1), np.float32(2)], np.int32(0)),
    ("rank_mismatch", [f32(1, 2), f32(2)], np.int32(0)),
    ("dim_mismatch", [f32(1, 2), f32(1, 3)], np.int32(0)),
    ("axis_out_of_range", [f32(1, 2), f32(1, 2)], np.int32(2)),
):
    add(Case(f"ConcatV2_{name}", "ConcatV2", {"values": values, "axis": axis}))
add(Case("Concat_v1", "Concat", {"concat_dim": np.int32(1), "values": [f32(2, 1), f32(2, 2)]}))

for name, values, axis in (
    ("axis0", [f32(2, 3), f32(2, 3), f32(2, 3)], 0),
    ("axis1", [f32(2, 3), f32(2, 3)], 1),
    ("axis_last", [f32(2, 3), f32(2, 3)], 2),
    ("negative", [f32(2, 3), f32(2, 3)], -1),
    ("scalars", [np.int32(1), np.int32(5), np.int32(-1)], 0),
    ("one", [f32(3)], 0),
    ("str", [STRINGS, STRINGS], 1),
    ("empty", [np.zeros((0,), np.float32), np.zeros((0,), np.float32)], 1),
    ("mismatch", [f32(1, 2), f32(1, 3)], 0),
    ("bad_axis", [f32(2), f32(2)], 2),
):
    add(Case(f"Pack_{name}", "Pack", {"values": values}, {"axis": axis}))

for name, x, num, axis in (
    ("axis0", f32(3, 2), 3, 0),
    ("axis1", f32(3, 2), 2, 1),
    ("negative", f32(2, 4, 3), 3, -1),
    ("vector", vec(4, 5, 6), 3, 0),
    ("one", f32(1, 4), 1, 0),
    ("str", STRINGS, 2, 1),
    ("wrong_num", f32(3, 2), 2, 0),
):
    add(Case(f"Unpack_{name}", "Unpack", {"value": x}, {"num": num, "axis": axis}))

for name, axis, x, num in (
    ("axis0", np.int32(0), f32(4, 3), 2),
    ("axis1", np.int32(1), f32(2, 6), 3),
    ("negative", np.int32(-1), f32(2, 4), 4),
    ("one", np.int32(0), f32(2, 2), 1),
    ("empty", np.int32(0), np.zeros((0, 2), np.float32), 2),
    ("uneven", np.int32(0), f32(3, 2), 2),
    ("bad_axis", np.int32(2), f32(3, 2), 1),
):
    add(Case(f"Split_{name}", "Split", {"axis": axis, "value": x}, {"num_split": num}))

for name, x, sizes, axis in (
    ("basic", f32(6, 2), vec(1, 2, 3, dtype=I64), np.int32(0)),
    ("infer", f32(2, 7), vec(2, -1, 1), np.int32(1)),
    ("zero_sizes", f32(3, 2), vec(0, 3, 0), np.int32(0)),
    ("negative_axis", f32(2, 5), vec(4, -1), np.int32(-1)),
    ("one", f32(2, 5), vec(5), np.int32(1)),
    ("sum_too_small", f32(3, 2), vec(1, 1), np.int32(0)),
    ("sum_too_big", f32(3, 2), vec(4, -1), np.int32(0)),
    ("two_unknown", f32(3, 2), vec(-1, -1), np.int32(0)),
    ("negative_size", f32(3, 2), vec(-2, 5), np.int32(0)),
):
    add(
        Case(
            f"SplitV_{name}",
            "SplitV",
            {"value": x, "size_splits": sizes, "axis": axis},
            {"num_split": len(sizes)},
        )
    )

# --- StridedSlice -----------------------------------------------------------------------------
# Each spec: (begin, end, strides, masks) with masks in the order begin, end, ellipsis, new_axis,
# shrink; hand-picked to cover each mask, clamping, negative strides and the error paths.
_SS_SPECS = {
    "range": ((1,), (3,), (1,), (0, 0, 0, 0, 0)),
    "two_dims": ((1, 0), (3, 2), (1, 1), (0, 0, 0, 0, 0)),
    "all_dims": ((0, 1, 2), (3, 3, 5), (1, 2, 2), (0, 0, 0, 0, 0)),
    "reverse": ((0,), (0,), (-1,), (1, 1, 0, 0, 0)),
    "reverse_step2": ((-1, 0), (-10, 0), (-2, 1), (0, 2, 0, 0, 0)),
    "reverse_from_past_end": ((10,), (0,), (-1,), (0, 0, 0, 0, 0)),
    "reverse_to_start": ((2,), (-100,), (-1,), (0, 0, 0, 0, 0)),
    "negative_bounds": ((-2, -3), (-1, -1), (1, 1), (0, 0, 0, 0, 0)),
    "clamp_high": ((1, 2), (100, 100), (1, 1), (0, 0, 0, 0, 0)),
    "clamp_low": ((-100,), (2,), (1,), (0, 0, 0, 0, 0)),
    "begin_past_end": ((5,), (10,), (1,), (0, 0, 0, 0, 0)),
    "empty_range": ((2,), (1,), (1,), (0, 0, 0, 0, 0)),
    "empty_reverse": ((1,), (2,), (-1,), (0, 0, 0, 0, 0)),
    "negative_begin_neg_stride_low": ((-10,), (0,), (-1,), (0, 0, 0, 0, 0)),
    "int32_max_end": ((1,), (2**31 - 1,), (1,), (0, 0, 0, 0, 0)),
    "begin_mask": ((2, 3), (3, 4), (1, 1), (1, 0, 0, 0, 0)),
    "end_mask": ((1, 3), (0, 4), (1, 1), (0, 1, 0, 0, 0)),
    "both_masks_step": ((9, 9), (-9, -9), (2, -2), (3, 3, 0, 0, 0)),
    "shrink_first": ((1,), (2,), (1,), (0, 0, 0, 0, 1)),
    "shrink_negative": ((-1,), (0,), (1,), (0, 0, 0, 0, 1)),
    "shrink_middle": ((0, 2), (0, 3), (1, 1), (1, 1, 0, 0, 2)),
    "shrink_all": ((2, 3, 4), (3, 4, 5), (1, 1, 1), (0, 0, 0, 0, 7)),
    "shrink_ignores_begin_mask": ((1, 0), (2, 0), (1, 1), (1, 2, 0, 0, 1)),
    "shrink_stride2": ((1,), (2,), (2,), (0, 0, 0, 0, 1)),
    "ellipsis_last_index": ((0, 1), (0, 2), (1, 1), (0, 0, 1, 0, 2)),
    "ellipsis_first": ((0, 1), (0, 3), (1, 1), (0, 0, 1, 0, 0)),
    "ellipsis_middle": ((1, 0, 1), (2, 0, 3), (1, 1, 1), (0, 0, 2, 0, 1)),
    "ellipsis_alone": ((0,), (0,), (1,), (0, 0, 1, 0, 0)),
    "new_axis_front": ((0, 1), (0, 2), (1, 1), (0, 0, 0, 1, 0)),
    "new_axis_back": ((0, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 1), (7, 7, 0, 8, 0)),
    "new_axis_after_ellipsis": ((0, 0, 0), (0, 0, 0), (1, 1, 1), (0, 0, 1, 2, 0)),
    "new_axis_and_shrink": ((0, 1), (1, 2), (1, 1), (0, 0, 0, 1, 3)),
    "new_axis_and_ellipsis_bits": ((0, 1), (1, 2), (1, 1), (0, 0, 1, 1, 0)),
    "new_axis_twice": ((0, 0, 1), (0, 0, 2), (1, 1, 1), (0, 0, 0, 3, 4)),
    "empty_spec": ((), (), (), (0, 0, 0, 0, 0)),
    "shrink_out_of_range": ((3,), (4,), (1,), (0, 0, 0, 0, 1)),
    "shrink_negative_out_of_range": ((-4,), (0,), (1,), (0, 0, 0, 0, 1)),
    "shrink_negative_stride": ((1,), (0,), (-1,), (0, 0, 0, 0, 1)),
    "zero_stride": ((0,), (1,), (0,), (0, 0, 0, 0, 0)),
    "two_ellipses": ((0, 0), (0, 0), (1, 1), (0, 0, 3, 0, 0)),
    "too_many_indices": ((0, 0, 0, 0), (1, 1, 1, 1), (1, 1, 1, 1), (0, 0, 0, 0, 0)),
}
for name, (begin, end, strides, masks) in _SS_SPECS.items():
    attrs = dict(
        zip(("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"), masks)
    )
    add(
        Case(
            f"StridedSlice_{name}",
            "StridedSlice",
            {
                "input": X345,
                "begin": np.array(begin, I32),
                "end": np.array(end, I32),
                "strides": np.array(strides, I32),
            },
            attrs,
        )
    )

add(
    Case(
        "StridedSlice_i64_spec",
        "StridedSlice",
        {
            "input": iota(4, 6),
            "begin": vec(3, 1, dtype=I64),
            "end": vec(0, 6, dtype=I64),
            "strides": vec(-1, 2, dtype=I64),
        },
    )
)
add(
    Case(
        "StridedSlice_scalar_input",
        "StridedSlice",
        {"input": np.float32(5), "begin": vec(), "end": vec(), "strides": vec()},
    )
)
add(
    Case(
        "StridedSlice_scalar_new_axis",
        "StridedSlice",
        {"input": np.float32(5), "begin": vec(0), "end": vec(0), "strides": vec(1)},
        {"new_axis_mask": 1},
    )
)
add(
    Case(
        "StridedSlice_zero_size_dim",
        "StridedSlice",
        {
            "input": np.zeros((0, 3), np.float32),
            "begin": vec(0, 1),
            "end": vec(5, 3),
            "strides": vec(1, 1),
        },
    )
)
add(
    Case(
        "StridedSlice_shrink_zero_size_dim",
        "StridedSlice",
        {"input": np.zeros((0, 3), np.float32), "begin": vec(0), "end": vec(1), "strides": vec(1)},
        {"shrink_axis_mask": 1},
    )
)
add(
    Case(
        "StridedSlice_str",
        "StridedSlice",
        {"input": STRINGS, "begin": vec(1), "end": vec(0), "strides": vec(-1)},
        {"end_mask": 1},
    )
)
add(
    Case(
        "StridedSlice_bool_shrink",
        "StridedSlice",
        {
            "input": np.array([[True, False], [False, False]]),
            "begin": vec(0, 0),
            "end": vec(1, 1),
            "strides": vec(1, 1),
        },
        {"shrink_axis_mask": 2},
    )
)
add(
    Case(
        "StridedSlice_spec_length_mismatch",
        "StridedSlice",
        {"input": X345, "begin": vec(0, 0), "end": vec(1), "strides": vec(1)},
    )
)

# Random specs: every mask bit, bounds well past the dims, strides of both signs.
_SS_RNG = rng(11)
for k in range(60):
    rank = int(_SS_RNG.integers(0, 4))
    shape = tuple(int(d) for d in _SS_RNG.integers(0, 5, size=rank))
    n = int(_SS_RNG.integers(0, rank + 2))
    begin = _SS_RNG.integers(-6, 7, size=n)
    end = _SS_RNG.integers(-6, 7, size=n)
    strides = _SS_RNG.choice([-3, -2, -1, 1, 2, 3], size=n)
    bits = [int(_SS_RNG.integers(0, 1 << n)) if n else 0 for _ in range(5)]
    bits[2] = 0 if n == 0 or _SS_RNG.random() < 0.6 else 1 << int(_SS_RNG.integers(0, n))
    bits[3] &= int(_SS_RNG.integers(0, 1 << n)) if n else 0  # new axes are rarer
    add(
        Case(
            f"StridedSlice_random_{k}",
            "StridedSlice",
            {
                "input": iota(*shape) if shape else np.float32(1),
                "begin": begin.astype(I32),
                "end": end.astype(I32),
                "strides": strides.astype(I32),
            },
            dict(
                zip(
                    (
                        "begin_mask",
                        "end_mask",
                        "ellipsis_mask",
                        "new_axis_mask",
                        "shrink_axis_mask",
                    ),
                    bits,
                )
            ),
        )
    )

# --- Slice ------------------------------------------------------------------------------------
for name, x, begin, size in (
    ("basic", X345, vec(1, 0, 2), vec(2, 3, 2)),
    ("minus_one", X345, vec(1, 2, 0), vec(-1, -1, 3)),
    ("i64", iota(4, 4), vec(1, 1, dtype=I64), vec(2, -1, dtype=I64)),
    ("empty", X345, vec(3, 0, 0), vec(0, 4, 5)),
    ("scalar", np.float32(3), vec(), vec()),
    ("str", STRINGS, vec(1, 0), vec(1, 2)),
    ("negative_begin", iota(3, 4), vec(-1, 0), vec(1, 1)),
    ("too_big", iota(3, 4), vec(1, 0), vec(3, 1)),
    ("negative_size", iota(3, 4), vec(1, 2), vec(-2, -1)),
    ("wrong_rank", iota(3, 4), vec(1), vec(1)),
):
    add(Case(f"Slice_{name}", "Slice", {"input": x, "begin": begin, "size": size}))

# --- Tile / Fill / ZerosLike / OnesLike / BroadcastTo / BroadcastArgs ----------------------------
for name, x, multiples in (
    ("2d", f32(2, 3), vec(2, 3)),
    ("ones", f32(2, 3), vec(1, 1)),
    ("zero", f32(2, 3), vec(0, 2)),
    ("i64", vec(1, 2), vec(3, dtype=I64)),
    ("scalar", np.float32(3), vec()),
    ("str", STRINGS, vec(1, 2)),
    ("wrong_length", f32(2, 3), vec(2)),
    ("negative", f32(2, 3), vec(2, -1)),
):
    add(Case(f"Tile_{name}", "Tile", {"input": x, "multiples": multiples}))

for name, dims, value in (
    ("f32", vec(2, 3), np.float32(1.5)),
    ("zero_dim", vec(2, 0), np.int32(3)),
    ("scalar", vec(), np.int64(9)),
    ("i64_dims", vec(3, dtype=I64), np.array(True)),
    ("str", vec(2), np.array(b"ab", dtype=object)),
    ("vector_value", vec(2), vec(3)),
    ("negative", vec(-2), np.int32(3)),
):
    add(Case(f"Fill_{name}", "Fill", {"dims": dims, "value": value}))

for op in ("ZerosLike", "OnesLike"):
    for name, x in (
        ("f32", f32(2, 3)),
        ("i32", vec(1, 2)),
        ("bool", np.array([True, False])),
        ("scalar_f64", np.float64(3)),
        ("empty", np.zeros((0, 2), np.float32)),
    ):
        add(Case(f"{op}_{name}", op, {"x": x}))
add(Case("ZerosLike_str", "ZerosLike", {"x": STRINGS}))

for name, x, shape in (
    ("rank_up", f32(3), vec(2, 3)),
    ("ones", f32(1, 3, 1), vec(2, 3, 4)),
    ("same", f32(2, 3), vec(2, 3)),
    ("scalar", np.float32(3), vec(2, 2)),
    ("i64", vec(1, 2), vec(3, 2, dtype=I64)),
    ("zero", f32(1, 3), vec(0, 3)),
    ("incompatible", iota(3, 4), vec(2, 3, 3)),
):
    add(Case(f"BroadcastTo_{name}", "BroadcastTo", {"input": x, "shape": shape}))

for name, s0, s1 in (
    ("basic", vec(2, 1, 3), vec(4, 1)),
    ("zero", vec(0, 1), vec(1, 3)),
    ("empty", vec(), vec(3)),
    ("i64", vec(5, 1, dtype=I64), vec(1, 7, dtype=I64)),
    ("incompatible", vec(2, 1, 3), vec(4, 2)),
):
    add(Case(f"BroadcastArgs_{name}", "BroadcastArgs", {"s0": s0, "s1": s1}))

# --- Pad / PadV2 / MirrorPad / ReverseV2 ------------------------------------------------------
for name, x, paddings in (
    ("2d", f32(2, 3), vec(1, 2, 0, 1).reshape(2, 2)),
    ("zero", f32(2, 3), np.zeros((2, 2), I32)),
    ("i64", vec(1, 2), vec(2, 0, dtype=I64).reshape(1, 2)),
    ("scalar", np.float32(3), np.zeros((0, 2), I32)),
    ("empty", np.zeros((0, 2), np.float32), vec(1, 1, 0, 0).reshape(2, 2)),
    ("str", STRINGS, vec(0, 1, 1, 0).reshape(2, 2)),
    ("negative", f32(2, 3), vec(-1, 0, 0, 0).reshape(2, 2)),
    ("wrong_rank", f32(2, 3), vec(1, 0).reshape(1, 2)),
):
    add(Case(f"Pad_{name}", "Pad", {"input": x, "paddings": paddings}))
add(
    Case(
        "PadV2_f32",
        "PadV2",
        {
            "input": f32(2, 2),
            "paddings": vec(1, 1, 2, 0).reshape(2, 2),
            "constant_values": np.float32(-3),
        },
    )
)
add(
    Case(
        "PadV2_i32",
        "PadV2",
        {"input": vec(1, 2), "paddings": vec(0, 3).reshape(1, 2), "constant_values": np.int32(7)},
    )
)
add(
    Case(
        "PadV2_vector_constant",
        "PadV2",
        {"input": vec(1, 2), "paddings": vec(0, 3).reshape(1, 2), "constant_values": vec(7, 8)},
    )
)

for mode in ("REFLECT", "SYMMETRIC"):
    for name, x, paddings in (
        ("1d", iota(5), vec(2, 3).reshape(1, 2)),
        ("2d", iota(3, 4), vec(2, 1, 1, 3).reshape(2, 2)),
        ("max", iota(3, 4), vec(2, 2, 3, 3).reshape(2, 2)),
        ("i64_int", iota(2, 3, dtype=np.int32), vec(1, 0, 0, 2, dtype=I64).reshape(2, 2)),
        ("zero", iota(2, 3), np.zeros((2, 2), I32)),
        ("too_big", iota(3, 4), vec(3, 0, 0, 0).reshape(2, 2)),
        ("far_too_big", iota(3, 4), vec(0, 4, 0, 0).reshape(2, 2)),
    ):
        add(
            Case(
                f"MirrorPad_{mode}_{name}",
                "MirrorPad",
                {"input": x, "paddings": paddings},
                {"mode": mode},
            )
        )

for name, x, axis in (
    ("axis0", X345, vec(0)),
    ("two", X345, vec(0, 2)),
    ("negative", X345, vec(-1)),
    ("none", X345, np.zeros(0, I32)),
    ("i64", iota(3, 2), vec(1, dtype=I64)),
    ("str", STRINGS, vec(1)),
    ("duplicate", iota(3, 4), vec(0, -2)),
    ("out_of_range", iota(3, 4), vec(2)),
):
    add(Case(f"ReverseV2_{name}", "ReverseV2", {"tensor": x, "axis": axis}))

# --- Gather / GatherNd / ScatterNd ------------------------------------------------------------
P = iota(3, 4)
for name, params, indices, axis, batch_dims in (
    ("axis0", P, vec(2, 0, 2), np.int32(0), 0),
    ("axis1", P, vec(3, 1), np.int32(1), 0),
    ("negative_axis", P, vec(3, 1), np.int32(-1), 0),
    ("matrix_indices", iota(5, 2), vec(0, 4, 1, 1).reshape(2, 2), np.int32(0), 0),
    ("scalar_index", P, np.int32(1), np.int32(0), 0),
    ("i64", P, vec(1, dtype=I64), np.int64(1), 0),
    ("empty_indices", P, np.zeros((0,), I32), np.int32(0), 0),
    ("str", STRINGS, vec(1, 1, 0), np.int32(0), 0),
    ("batch1", P, vec(0, 1, 2).reshape(3, 1), np.int32(1), 1),
    ("batch1_negative", P, vec(0, 1, 2).reshape(3, 1), np.int32(-1), -1),
    ("batch1_axis2", iota(2, 3, 4, 5), vec(0, 3, 1, 1).reshape(2, 2), np.int32(2), 1),
    ("batch2", iota(2, 3, 4, 5), iota(2, 3, 2, dtype=np.int32) % 4, np.int32(2), 2),
    ("batch1_axis1_wide", iota(2, 3, 4), vec(2, 0, 1, 1, 0, 2).reshape(2, 3), np.int32(1), 1),
    ("negative_index", P, vec(-1), np.int32(0), 0),
    ("index_too_big", P, vec(0, 3), np.int32(0), 0),
    ("axis_out_of_range", P, vec(0), np.int32(2), 0),
    ("batch_after_axis", P, vec(0, 1, 2).reshape(3, 1), np.int32(0), 1),
    ("batch_mismatch", P, vec(0, 1).reshape(2, 1), np.int32(1), 1),
):
    add(
        Case(
            f"GatherV2_{name}",
            "GatherV2",
            {"params": params, "indices": indices, "axis": axis},
            {"batch_dims": batch_dims},
        )
    )
add(Case("Gather_v1", "Gather", {"params": P, "indices": vec(2, 1, 2)}))
add(Case("Gather_v1_bad", "Gather", {"params": P, "indices": vec(3)}))

for name, params, indices in (
    ("full", P, vec(0, 1, 2, 3).reshape(2, 2)),
    ("rows", P, vec(2, 0).reshape(2, 1)),
    ("batched", iota(2, 3, 4), vec(1, 2, 0, 0, 1, 1).reshape(3, 2)),
    ("nested", iota(2, 3, 4), vec(1, 0, 1, 2).reshape(2, 1, 2)),
    ("i64", P, vec(2, 3, dtype=I64).reshape(1, 2)),
    ("empty_depth", P, np.zeros((2, 0), I32)),
    ("no_rows", P, np.zeros((0, 2), I32)),
    ("str", STRINGS, vec(1, 1, 0, 0).reshape(2, 2)),
    ("out_of_range", P, vec(3, 0).reshape(1, 2)),
    ("negative", P, vec(0, -1).reshape(1, 2)),
    ("too_deep", P, vec(0, 0, 0).reshape(1, 3)),
):
    add(Case(f"GatherNd_{name}", "GatherNd", {"params": params, "indices": indices}))
add(
    Case(
        "GatherNd_ignore_bad",
        "GatherNd",
        {"params": P, "indices": vec(0, 1, 5, 0, 2, -1).reshape(3, 2)},
        {"bad_indices_policy": "IGNORE"},
    )
)

for name, indices, updates, shape in (
    ("1d", vec(4, 3, 1, 7).reshape(4, 1), f32(4), vec(8)),
    ("duplicates", vec(0, 0, 2).reshape(3, 1), vec(1, 2, 3, dtype=np.float32), vec(4)),
    ("slices", vec(0, 2).reshape(2, 1), f32(2, 3), vec(4, 3)),
    ("full_index", vec(0, 1, 2, 2).reshape(2, 2), vec(5, 6), vec(3, 3)),
    ("i64", vec(1, dtype=I64).reshape(1, 1), vec(5, dtype=I64), vec(3, dtype=I64)),
    ("bool", vec(1).reshape(1, 1), np.array([True]), vec(4)),
    ("empty", np.zeros((0, 1), I32), np.zeros((0,), np.float32), vec(3)),
    ("out_of_range", vec(5).reshape(1, 1), f32(1), vec(4)),
    ("bad_updates", vec(1).reshape(1, 1), f32(2), vec(4)),
):
    add(
        Case(
            f"ScatterNd_{name}",
            "ScatterNd",
            {"indices": indices, "updates": updates, "shape": shape},
        )
    )

# --- OneHot / Where / Unique / Bitcast --------------------------------------------------------
for name, indices, depth, on, off, axis in (
    ("basic", vec(0, 2, 1), 3, np.float32(1), np.float32(0), -1),
    ("negative_and_big", vec(0, -1, 3, 5), 4, np.float32(1), np.float32(0), -1),
    ("axis0", vec(0, 2), 3, np.int32(5), np.int32(-1), 0),
    ("matrix_axis1", vec(0, 2, 1, 1).reshape(2, 2), 3, np.float32(2), np.float32(-2), 1),
    ("matrix_axis_last", vec(0, 2, 1, 1).reshape(2, 2), 3, np.float32(2), np.float32(-2), 2),
    ("i64", vec(1, 0, dtype=I64), 2, np.float64(1), np.float64(0), -1),
    ("uint8", np.array([0, 2], np.uint8), 3, np.int32(5), np.int32(-1), -1),
    ("scalar", np.int32(1), 3, np.float32(1), np.float32(0), -1),
    ("zero_depth", vec(0, 1), 0, np.float32(1), np.float32(0), -1),
    ("bool_values", vec(1, 0), 2, np.array(True), np.array(False), -1),
    ("bad_axis", vec(0, 2).reshape(1, 2), 3, np.int32(5), np.int32(-1), -2),
    ("negative_depth", vec(0), -1, np.float32(1), np.float32(0), -1),
):
    add(
        Case(
            f"OneHot_{name}",
            "OneHot",
            {"indices": indices, "depth": np.int32(depth), "on_value": on, "off_value": off},
            {"axis": axis},
        )
    )

for name, cond in (
    ("bool_2d", X345[0] > 7),
    ("bool_1d", np.array([False, True, True])),
    ("float", np.array([[0.0, 1.5], [-2.0, 0.0]], np.float32)),
    ("int", vec(0, 3, 0, 1)),
    ("none", np.zeros((2, 2), bool)),
    ("empty", np.zeros((0, 3), bool)),
    ("3d", X345 % 7 == 0),
    ("scalar", np.array(True)),
):
    add(Case(f"Where_{name}", "Where", {"condition": cond}))

for name, x, out_idx in (
    ("int", vec(3, 1, 3, 2, 1, 7), np.int32),
    ("i64_idx", vec(5, 5, 4, dtype=I64), np.int64),
    ("float", np.array([1.5, -0.5, 1.5, 2.0], np.float32), np.int32),
    ("nan", np.array([np.nan, 1.0, np.nan, 1.0], np.float32), np.int32),
    ("str", np.array([b"b", b"a", b"b", b""], dtype=object), np.int32),
    ("empty", np.zeros((0,), np.int32), np.int32),
    ("matrix", vec(1, 2, 1, 2).reshape(2, 2), np.int32),
):
    add(Case(f"Unique_{name}", "Unique", {"x": x}, {"out_idx": out_idx}))
# Long vectors: the kernel sorts them instead of using a dict (its own generator: the cases after
# these keep their inputs).
_LONG = rng(8)
for name, x in (
    ("long_int", _LONG.integers(-20, 20, 300).astype(I64)),
    (
        "long_float",
        _LONG.choice(np.array([0.0, -0.0, np.nan, 1.5, -2.0, np.inf]), 200).astype(np.float32),
    ),
    ("long_str", np.array([b"k%d" % v for v in _LONG.integers(0, 30, 150)], dtype=object)),
):
    add(Case(f"Unique_{name}", "Unique", {"x": x}, {"out_idx": np.int32}))

for name, x, to in (
    ("f32_to_i32", vec(1, -2, dtype=np.float32), np.int32),
    ("f32_to_u8", vec(1, 2, dtype=np.float32), np.uint8),
    ("u8_to_f32", np.arange(8, dtype=np.uint8).reshape(2, 4), np.float32),
    ("i64_to_i32", vec(-1, 2**40, dtype=I64), np.int32),
    ("f16_to_i16", vec(1, 2, dtype=np.float16), np.int16),
    ("scalar", np.float32(1), np.uint32),
    ("bad_last_dim", np.zeros((3, 2), np.uint8), np.float32),
):
    add(Case(f"Bitcast_{name}", "Bitcast", {"input": x}, {"type": to}))


# Cases TensorFlow rejects (the recording decides what is checked; marking them documents the
# intent and keeps the recorder quiet about them).
_REJECTED = frozenset(
    (
        "Bitcast_bad_last_dim",
        "BroadcastArgs_incompatible",
        "BroadcastTo_incompatible",
        "ConcatV2_axis_out_of_range",
        "ConcatV2_dim_mismatch",
        "ConcatV2_rank_mismatch",
        "ConcatV2_scalars",
        "ExpandDims_too_big",
        "ExpandDims_too_small",
        "ExpandDims_two_dims",
        "Fill_negative",
        "GatherNd_negative",
        "GatherNd_out_of_range",
        "GatherNd_too_deep",
        "GatherV2_axis_out_of_range",
        "GatherV2_batch_after_axis",
        "GatherV2_batch_mismatch",
        "GatherV2_index_too_big",
        "GatherV2_negative_index",
        "Gather_v1_bad",
        "MirrorPad_REFLECT_far_too_big",
        "MirrorPad_REFLECT_too_big",
        "MirrorPad_SYMMETRIC_far_too_big",
        "OneHot_bad_axis",
        "OneHot_negative_depth",
        "Pack_bad_axis",
        "Pack_mismatch",
        "PadV2_vector_constant",
        "Pad_negative",
        "Pad_wrong_rank",
        "Reshape_bad_count",
        "Reshape_bad_multiple",
        "Reshape_matrix_shape",
        "Reshape_negative",
        "Reshape_two_unknown",
        "ReverseV2_duplicate",
        "ReverseV2_out_of_range",
        "ScatterNd_bad_updates",
        "ScatterNd_out_of_range",
        "Slice_negative_begin",
        "Slice_negative_size",
        "Slice_too_big",
        "Slice_wrong_rank",
        "SplitV_negative_size",
        "SplitV_sum_too_big",
        "SplitV_sum_too_small",
        "SplitV_two_unknown",
        "Split_bad_axis",
        "Split_uneven",
        "Squeeze_not_one",
        "Squeeze_out_of_range",
        "StridedSlice_random_1",
        "StridedSlice_random_13",
        "StridedSlice_random_19",
        "StridedSlice_random_29",
        "StridedSlice_random_31",
        "StridedSlice_random_33",
        "StridedSlice_random_42",
        "StridedSlice_random_46",
        "StridedSlice_random_54",
        "StridedSlice_random_55",
        "StridedSlice_shrink_negative_out_of_range",
        "StridedSlice_shrink_negative_stride",
        "StridedSlice_shrink_out_of_range",
        "StridedSlice_shrink_zero_size_dim",
        "StridedSlice_spec_length_mismatch",
        "StridedSlice_too_many_indices",
        "StridedSlice_two_ellipses",
        "StridedSlice_zero_stride",
        "Tile_negative",
        "Tile_wrong_length",
        "Transpose_repeated",
        "Transpose_wrong_length",
        "Unique_matrix",
        "Unpack_wrong_num",
        "Where_scalar",
    )
)
for _case in CASES:
    _case.expect_error = _case.expect_error or _case.name in _REJECTED
