"""The fast JSON steps give what the reference steps give: orjson parsing against the
rapidjson-rules parser, and value-by-value float/int tokens against the whole-array ones."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, OpError
from serving.rest import json_numbers
from serving.rest.json_codec import decode_inputs, parse_predict_body
from serving.rest.json_numbers import float_tokens, int_tokens, reference_float_token
from serving.rest.json_text import parse_json, parse_json_reference

_INT_LOW, _INT_END = -(2**63), 2**64  # integer literals rapidjson (and orjson) keep as integers


def _as_rapidjson(value: Any) -> Any:
    """The reference parse's value as rapidjson holds it: integers outside 64 bits are
    doubles."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not _INT_LOW <= value < _INT_END:
        return float(value)
    if isinstance(value, list):
        return [_as_rapidjson(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_rapidjson(v) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (and float signs and NaNs) all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _parse(parser: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "ok", parser(body)
    except InvalidArgumentError as err:
        return "error", err.message


def _check_body(body: bytes) -> None:
    fast, reference = _parse(parse_json, body), _parse(parse_json_reference, body)
    assert fast[0] == reference[0], (body, fast, reference)
    if fast[0] == "ok":
        assert _same(_as_rapidjson(fast[1]), _as_rapidjson(reference[1])), (body, fast, reference)
    else:
        assert fast[1] == reference[1], body


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_orjson_reads_any_document_as_the_reference_parser(value: Any) -> None:
    _check_body(json.dumps(value).encode())
    _check_body(json.dumps(value, ensure_ascii=False).encode())


_TOKENS = [b"{", b"}", b"[", b"]", b",", b":", b" ", b'"a"', b'"\\ud800"', b"1", b"-0", b"1.5e3",
           b"1e400", b"18446744073709551616", b"-9223372036854775809", b"NaN", b"-Infinity",
           b"true", b"null", b"\xff", b"\xef\xbb\xbf", b"x"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=12))
def test_orjson_refuses_or_agrees_on_token_soup(tokens: list[bytes]) -> None:
    _check_body(b"".join(tokens))


@pytest.mark.parametrize("body", [
    b"", b"   ", b"{} trailing", b"[1] [2]", b'{"a": NaN}', b"[" * 2000 + b"]" * 2000,
    b'"\\udc80"', b'"\xc3"', b"\xef\xbb\xbf{}", b'{"a": 1, "a": 2}', b"[" + b"9" * 5000 + b"]",
])
def test_orjson_and_the_reference_on_edge_bodies(body: bytes) -> None:
    _check_body(body)


@pytest.mark.parametrize("dtype", [DataType.DT_FLOAT, DataType.DT_DOUBLE, DataType.DT_INT64,
                                   DataType.DT_INT32, DataType.DT_UINT64, DataType.DT_STRING,
                                   DataType.DT_BOOL])
@pytest.mark.parametrize("literal", [b"18446744073709551616", b"-9223372036854775809",
                                     b"18446744073709551615", b"-9223372036854775808",
                                     b"123456789012345678901234567890"])
def test_integers_beyond_64_bits_decode_as_with_the_reference_parser(
    dtype: DataType, literal: bytes
) -> None:
    """orjson reads them as doubles, the reference parser as Python ints: every tensor and
    every message must come out the same."""
    for body in (b'{"instances": [[' + literal + b", 1]]}",
                 b'{"inputs": {"x": [' + literal + b"]}}",
                 b'{"instances": ' + literal + b"}"):
        results = []
        for parser in (parse_json, parse_json_reference):
            parsed = parse_predict_body(body)
            document = parser(body)
            parsed = type(parsed)(document, parsed.signature_name, parsed.has_bool_tokens)
            try:
                arrays = decode_inputs(parsed, {"x": dtype})
                results.append(("ok", {k: (v.dtype, v.tolist()) for k, v in arrays.items()}))
            except OpError as err:
                results.append(("error", err.message))
        assert results[0] == results[1], (body, dtype)


# -- tokens: value by value (small arrays) against the whole-array arithmetic ----------------


def _whole_array(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_numbers, "SMALL_ARRAY", -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_and_whole_array_float_tokens_agree(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    width = np.dtype(dtype).itemsize * 8
    uint = np.uint32 if width == 32 else np.uint64
    special = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e6, 999999.5, 1e-5,
                        16777216.0, 1e16, 1e17, 2.5, 100.0, 1 / 3], dtype=np.float64)
    arrays = [
        rng.integers(0, 2**width, size=json_numbers.SMALL_ARRAY, dtype=np.uint64)
        .astype(uint).view(dtype),
        (rng.standard_normal(json_numbers.SMALL_ARRAY) * 1e3).astype(dtype),
        np.round(rng.standard_normal(json_numbers.SMALL_ARRAY) * 1e4).astype(dtype),
        special.astype(dtype),
    ]
    small = [float_tokens(a) for a in arrays]
    _whole_array(monkeypatch)
    assert small == [float_tokens(a) for a in arrays]
    for tokens, array in zip(small, arrays, strict=True):
        assert tokens == [reference_float_token(v, np.dtype(dtype)) for v in array.tolist()]


def test_small_and_whole_array_int_tokens_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = [np.array([0, -1, 2**62, -(2**63)], np.int64), np.array([2**64 - 1, 3], np.uint64),
              np.array([[255, 0]], np.uint8), np.array([-128, 127], np.int8)]
    small = [int_tokens(a) for a in arrays]
    _whole_array(monkeypatch)
    assert small == [int_tokens(a) for a in arrays]
