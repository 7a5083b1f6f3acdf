"""Kernel cases for how tensors print: StringFormat (``tf.print``'s layout) and a failing Assert
(the layout of Assert and Print messages), recorded via tf.raw_ops
(fixtures/record_kernel_cases.py). Every dtype's element format, nesting, ``summarize`` cuts.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tests.runtime.kernels.case import Case


def S(*items: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    values = [v.encode() if isinstance(v, str) else v for v in items]
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape) if shape is not None else out


FLOATS = [0.1, 1 / 3, 1e-7, 1e20, -2.5, np.nan, -np.nan, np.inf, -np.inf, 100.0, 1234567.0, -0.0]
VALUES: dict[str, np.ndarray] = {
    "f32": np.array(FLOATS, np.float32),
    "f64": np.array(FLOATS, np.float64),
    "f16": np.array([0.1, 1 / 3, 65504, -0.0], np.float16),
    "bf16": np.array([0.1, 1 / 3, 3.0e38], ml_dtypes.bfloat16),
    "i8": np.array([-5, 7, -128], np.int8),
    "u8": np.array([200, 7], np.uint8),
    "i64": np.array([2**40, -3], np.int64),
    "u64": np.array([2**64 - 1], np.uint64),
    "bool": np.array([True, False, True]),
    "str": S(b'ab"c', b"x\ny\tz", "é", b"\xff", b"\x01\x7f", b"back\\slash", b"'q'"),
    "f32_scalar": np.array(3.5, np.float32),
    "str_scalar": np.array(b"hi", dtype=object),
    "i32_2x3": np.arange(6, dtype=np.int32).reshape(2, 3),
    "i32_2x3x4": np.arange(24, dtype=np.int32).reshape(2, 3, 4),
    "i32_long": np.arange(12, dtype=np.int32),
    "bool_2x2": np.array([[True, False], [False, True]]),
    "empty": np.zeros((0,), np.float32),
    "empty_2x0": np.zeros((2, 0), np.float32),
    "empty_bool": np.zeros((0,), np.bool_),
    "c64": np.array([1 + 2j, 3j], np.complex64),
}

CASES: list[Case] = []

for _name, _value in VALUES.items():
    for _summarize in (3, 2, 1, 0, -1):
        _attrs = {"summarize": _summarize}
        _types = {"T": [_value.dtype.type]}
        CASES.append(Case(
            f"format_{_name}_s{_summarize}", "StringFormat", {"inputs": [_value]},
            {"template": "<{}>", "placeholder": "{}", **_attrs}, _types,
        ))
        CASES.append(Case(
            f"assert_{_name}_s{_summarize}", "Assert",
            {"condition": np.array(False), "data": [_value]}, _attrs, _types, expect_error=True,
        ))

CASES += [
    Case("format_two_inputs", "StringFormat",
         {"inputs": [np.int32(1), S("a")]}, {"template": "a=%s b=%s %"},
         {"T": [np.int32, np.object_]}),
    Case("format_no_inputs", "StringFormat", {"inputs": []}, {"template": "plain"}, {"T": []}),
    Case("assert_several", "Assert",
         {"condition": np.array(False), "data": [np.array(b"x:", object), np.arange(4)]},
         {}, {"T": [np.object_, np.int64]}, expect_error=True),
    Case("assert_condition_vector", "Assert",
         {"condition": np.array([False]), "data": [np.int32(1)]}, {}, {"T": [np.int32]},
         expect_error=True),
]
