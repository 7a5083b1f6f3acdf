"""Kernel cases for DecodeCSV, DecodeRaw and DecodePaddedRaw, recorded via tf.raw_ops."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(5)
CASES: list[Case] = []


def strings(*values: bytes) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def f64(*v: float) -> np.ndarray:
    return np.array(v, np.float64)


def i32(*v: int) -> np.ndarray:
    return np.array(v, np.int32)


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def text(*v: bytes) -> np.ndarray:
    return np.array(v, dtype=bytes)


def csv(name: str, records: Any, defaults: list[np.ndarray], **attrs: Any) -> None:
    records = records if isinstance(records, np.ndarray) else strings(*records)
    out_type = [np.dtype(d.dtype).type for d in defaults]
    CASES.append(Case(f"DecodeCSV_{name}", "DecodeCSV",
                      {"records": records, "record_defaults": defaults}, attrs,
                      node_attrs={"OUT_TYPE": out_type}, expect_error="error" in name))


ALL_TYPES = [i32(0), f32(0.5), text(b"?"), i64(-1), f64(0.25)]

# --- DecodeCSV: typical records --------------------------------------------------------------------
csv("typical", [b"1,2.5,abc,7,1.25", b"-3,4e2,d e f,8000000000,-0.1"], ALL_TYPES)
csv("empty_fields_take_defaults", [b",,,,", b"1,,x,,"], ALL_TYPES)
csv("scalar_defaults", [b",", b"4,"], [np.array(9, np.int32), np.array(b"dflt")])
csv("quoted", [b'"a,b",1', b'"he said ""hi""",2', b'"",3', b'x,"4"'], [text(b"d"), i32(0)])
csv("quoted_newline", [b'"line1\nline2",1', b'"cr\r",2'], [text(b""), i32(0)])
csv("leading_crlf_skipped", [b"\n1,2", b"1,\r\n2", b"\r\r3,4"], [i32(0), i32(0)])
csv("trailing_delim", [b"1,", b"2,5"], [i32(0), i32(-7)])
csv("na_value", [b"NA,1.5", b"x,NA", b",2"], [text(b"missing"), f32(-1)], na_value="NA")
csv("na_value_not_string_default", [b"NA"], [i64(11)], na_value="NA")
csv("pipe_delim", [b"1|a|2.5", b"2||"], [i32(0), text(b"z"), f64(0)], field_delim="|")
csv("tab_delim", [b"1\tx", b"2\t"], [i32(0), text(b"-")], field_delim="\t")
csv("no_quote_delim", [b'"a",b"', b'c,""'], [text(b""), text(b"")], use_quote_delim=False)
csv("utf8", ["ü,日本".encode(), b"a,b"], [text(b""), text(b"")])
csv("select_cols", [b"1,x,2.5,y", b"3,,4.5", b'5,"q",6.5,"unused'],
    [i32(0), f32(0)], select_cols=[0, 2])
csv("select_cols_last", [b"a,b,", b"a,b,c"], [text(b"d")], select_cols=[2])
csv("select_cols_skips_bad_tail", [b'1,2,x"y'], [i32(0), i32(0)], select_cols=[0, 1])
csv("records_2d", np.array([[b"1,a", b"2,b"], [b"3,c", b"4,d"]], dtype=object),
    [i32(0), text(b"")])
csv("records_empty", strings(), [i32(0), f32(0), text(b"")])
csv("records_scalar", np.array(b"7,8.5", dtype=object), [i64(0), f64(0)])

# Random records built from plain, quoted and malformed fields: TensorFlow's splitting rules
# (and which error comes first) on inputs no one would think to write by hand.
_PLAIN = [b"", b"a", b"ab", b"1"]
_INNER = [b"a", b",", b"|", b'""', b"\n", b"\r", b" "]
_BROKEN = [b'a"b', b'"ab', b'"a"b', b"a\nb", b'"a""', b'""a', b"a\r"]


def _field(quoting: bool) -> bytes:
    kind = R.random()
    if kind < 0.08:
        return bytes(R.choice(_BROKEN))
    prefix = b"\n" if R.random() < 0.08 else b""
    if kind < 0.5 or not quoting:
        return prefix + bytes(R.choice(_PLAIN))
    return prefix + b'"' + b"".join(R.choice(_INNER, size=R.integers(0, 4)).tolist()) + b'"'


for _k in range(150):
    _select = [[], [], [0, 1, 2], [1, 3], [2]][_k % 5]
    _width = len(_select) or 3
    _quoting = _k % 7 != 3
    _delim = b"|" if _k % 11 == 5 else b","
    _records = []
    for _ in range(3):
        _count = 4 if _select else _width
        _count += int(R.choice([0, 0, 0, 0, 0, 0, 0, 0, 1, -1]))
        _record = _delim.join(_field(_quoting) for _ in range(max(_count, 0)))
        _records.append(_record + (_delim if R.random() < 0.1 else b""))
    csv(f"random_{_k}", _records, [text(b"-")] * _width, select_cols=_select,
        use_quote_delim=_quoting, field_delim=_delim.decode())

# --- DecodeCSV: numbers as absl parses them ------------------------------------------------------
_FLOATS = [b"1e10", b".5", b"5.", b"-0", b"inf", b"-Infinity", b"NaN", b" 3.25 ", b"+1.5",
           b"1e-50", b"1e39", b"-1e39", b"3.4028235e38", b"3.4028236e38", b"1.4e-45", b"0.1",
           b"16777217", b"1.000000059604644775390625000001", b"1.0000000596046447753906249999",
           b"\t2\n", b"0x10", b"0X1P3", b"-0x1.8p1", b"+0x.8p1", b"0x1p-160", b"0x1e3",
           b"0x1.fffffffp127", b"0x1.000001p0", b"0x1.0000010000000000001p0", b"0x1p2000",
           b"nan(123)", b"nan()", b"+nan", b"INFINITY", b"1E-2", b"1e+5", b"5.e1"]
csv("floats", [b'"' + v + b'"' for v in _FLOATS], [f32(0)])
csv("doubles", [b'"' + v + b'"' for v in _FLOATS + [b"1e308", b"1e309", b"-2.5e-310",
                                                  b"0.30000000000000004"]], [f64(0)])
csv("ints", [b"0", b"-0", b"+7", b" 42 ", b"2147483647", b"-2147483648", b"007"], [i32(0)])
csv("int64s", [b"9223372036854775807", b"-9223372036854775808", b"\t-12\t"], [i64(0)])
for _name, _value, _default in [
    ("int_trailing_text", b"12a", i32(0)), ("int_float_text", b"1.0", i32(0)),
    ("int32_overflow", b"2147483648", i32(0)), ("int32_underflow", b"-2147483649", i32(0)),
    ("int64_overflow", b"9223372036854775808", i64(0)), ("int_hex", b"0x10", i32(0)),
    ("int_plus_minus", b"+-1", i32(0)), ("int_sign_only", b"-", i32(0)),
    ("int_underscore", b"1_000", i32(0)), ("float_trailing_text", b"1.5x", f32(0)),
    ("float_hex_no_digits", b"0x", f32(0)), ("float_exponent_only", b"1e", f32(0)),
    ("float_hex_no_exponent_digits", b"0x1p", f32(0)), ("float_nan_open", b"nan(", f32(0)),
    ("float_plus_minus", b"+-1", f32(0)), ("float_underscore", b"1_0", f32(0)),
    ("float_inner_space", b"1.5 e3", f32(0)),
    ("float_infin", b"infin", f32(0)), ("double_dot", b".", f64(0)),
    ("double_text", b"abc", f64(0)), ("int64_space_only", b"   ", i64(0)),
]:
    csv(f"error_{_name}", [b"1", b'"' + _value + b'"'], [_default])

# --- DecodeCSV: errors ---------------------------------------------------------------------------
csv("error_missing_required", [b"1,a", b",b"], [np.array([], np.int32), text(b"")])
csv("error_missing_required_string", [b"1,"], [i32(0), np.array([], dtype=bytes)])
csv("error_too_many_fields", [b"1,2", b"1,2,3"], [i32(0), i32(0)])
csv("error_too_few_fields", [b"1"], [i32(0), i32(0)])
csv("error_empty_record", [b""], [i32(0)])
csv("error_quote_not_escaped", [b'"a"b,1'], [text(b""), i32(0)])
csv("error_quote_unterminated", [b'1,"abc'], [i32(0), text(b"")])
csv("error_quote_escape_at_end", [b'"a""'], [text(b"")])
csv("error_quote_in_unquoted", [b'a"b,1'], [text(b""), i32(0)])
csv("error_newline_in_unquoted", [b"1\n,2"], [i32(0), i32(0)])
csv("error_first_error_wins", [b'"x,1', b"y,2,3"], [text(b""), i32(0)])
csv("error_two_defaults", [b"1,2"], [i32(0), i32(1, 2)])
csv("error_default_rank2", [b"1"], [np.array([[1]], np.int32)])
csv("error_delim_two_chars", [b"1"], [i32(0)], field_delim="ab")
csv("error_select_cols_size", [b"1,2"], [i32(0), i32(0)], select_cols=[0])
csv("error_select_cols_order", [b"1,2,3"], [i32(0), i32(0)], select_cols=[2, 1])
csv("error_select_cols_negative", [b"1,2"], [i32(0), i32(0)], select_cols=[-1, 0])

# --- DecodeRaw / DecodePaddedRaw -----------------------------------------------------------------


def raw(name: str, data: Any, out_type: type, **attrs: Any) -> None:
    data = data if isinstance(data, np.ndarray) else strings(*data)
    CASES.append(Case(f"DecodeRaw_{name}", "DecodeRaw", {"bytes": data},
                      {"out_type": out_type, **attrs}, expect_error="error" in name))


def padded(name: str, data: list[bytes], length: Any, out_type: type, **attrs: Any) -> None:
    CASES.append(Case(f"DecodePaddedRaw_{name}", "DecodePaddedRaw",
                      {"input_bytes": strings(*data), "fixed_length": np.array(length, np.int32)},
                      {"out_type": out_type, **attrs}, expect_error="error" in name))


_BYTES = [R.integers(0, 256, 16, dtype=np.uint8).tobytes() for _ in range(3)]
for _type in (np.float32, np.float64, np.int32, np.uint16, np.uint8, np.int16, np.int8,
              np.int64, np.float16, np.complex64, np.complex128):
    _t = np.dtype(_type).name
    raw(f"{_t}_le", _BYTES, _type)
    raw(f"{_t}_be", _BYTES, _type, little_endian=False)
raw("bfloat16_le", _BYTES, ml_dtypes.bfloat16)
raw("bfloat16_be", _BYTES, ml_dtypes.bfloat16, little_endian=False)
raw("bool", [bytes([0, 1, 1, 0]), bytes([1, 1, 0, 0])], np.bool_)
raw("floats_roundtrip", [np.arange(5, dtype=">f4").tobytes()], np.float32, little_endian=False)
raw("input_2d", np.array([[b"ab", b"cd"], [b"ef", b"gh"]], dtype=object), np.int16)
raw("scalar_input", np.array(b"\x01\x00\x00\x00\x02\x00\x00\x00", dtype=object), np.int32)
raw("no_strings", strings(), np.float32)
raw("empty_strings", [b"", b""], np.int32)
raw("error_unequal_sizes", [b"abcd", b"ab"], np.uint8)
raw("error_not_a_multiple", [b"abcde"], np.int32)
raw("error_first_empty", [b"", b"abcd"], np.int32)

padded("int16_short_and_long", [b"\x01", b"\x01\x02\x03\x04\x05\x06\x07", b""], 4, np.int16)
padded("float32_be", [np.arange(3, dtype=">f4").tobytes(), np.ones(3, ">f4").tobytes()], 8,
       np.float32, little_endian=False)
padded("uint8_be", [b"abc", b"d"], 3, np.uint8, little_endian=False)
padded("bfloat16_be", [b"\x3f\x80\x40\x49", b"\xc0\x00\x7f\x80"], 4, ml_dtypes.bfloat16,
       little_endian=False)
padded("no_strings", [], 8, np.int64)
padded("error_not_a_multiple", [b"abc"], 3, np.int16)
padded("error_zero_length", [b"abc"], 0, np.uint8)
padded("error_negative_length", [b"abc"], -4, np.int32)
padded("error_length_not_scalar", [b"abc"], [4], np.uint8)
