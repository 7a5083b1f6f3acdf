"""Input typing and the JSON tensor codec, checked against numpy and the server's own parser."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from runtime.dtypes import DataType
from serving.client.errors import InvalidArgumentError
from serving.client.tensors import as_array, from_json, to_json
from serving.rest.json_codec import decode_inputs, parse_predict_body


def test_python_values_follow_tensorflow_defaults() -> None:
    assert as_array([[1.0]]).dtype == np.float32
    assert as_array(3).dtype == np.int32
    assert as_array([1, 2**40]).dtype == np.int64
    assert as_array([True]).dtype == np.bool_
    strings = as_array([["a", "é"], [b"\x00\xff", "c"]])
    assert strings.dtype == object and strings.shape == (2, 2)
    assert strings.tolist() == [[b"a", "é".encode()], [b"\x00\xff", b"c"]]
    assert as_array([b"a\x00"]).tolist() == [b"a\x00"]  # no trailing NUL is lost
    with pytest.raises(InvalidArgumentError, match="ragged"):
        as_array([[1.0], [1.0, 2.0]])


def test_numpy_values_keep_their_dtype() -> None:
    for dtype in (np.float64, np.int64, np.uint8, np.float16, ml_dtypes.bfloat16):
        assert as_array(np.zeros((2,), dtype)).dtype == dtype
    assert as_array(np.float64(1.5)).dtype == np.float64
    assert as_array(np.array([b"ab", b"c"])).tolist() == [b"ab", b"c"]
    with pytest.raises(InvalidArgumentError, match="bytes or str"):
        as_array(np.array([1, "a"], dtype=object))


@pytest.mark.parametrize(
    ("array", "dtype"),
    [
        (np.array([[0.1, -2.5e-8], [np.inf, -0.0]], np.float32), DataType.DT_FLOAT),
        (np.array([1e300, 5e-324]), DataType.DT_DOUBLE),
        (np.array([[-(2**63), 2**63 - 1]], np.int64), DataType.DT_INT64),
        (np.array([True, False]), DataType.DT_BOOL),
        (np.array(7, np.int32), DataType.DT_INT32),
        (np.array([[b"\x00\xffbytes", b"text"]], object), DataType.DT_STRING),
    ],
)
def test_json_requests_parse_back_in_the_server(array: np.ndarray, dtype: DataType) -> None:
    """What the client writes, the server's JSON parser reads back unchanged."""
    body = json.dumps({"inputs": {"t": to_json(array)}}).encode()
    parsed = decode_inputs(parse_predict_body(body), {"t": dtype})["t"]
    assert parsed.shape == array.shape
    if array.dtype == object:
        assert parsed.tolist() == array.tolist()
    else:
        np.testing.assert_array_equal(parsed, array)


def test_narrow_floats_go_as_their_values() -> None:
    assert to_json(np.array([1.5, -2.0], ml_dtypes.bfloat16)) == [1.5, -2.0]
    assert to_json(np.array([0.5], np.float16)) == [0.5]
    with pytest.raises(InvalidArgumentError, match="cannot carry complex64"):
        to_json(np.array([1j], np.complex64))


def test_answers_take_the_signature_dtype() -> None:
    assert from_json([[2.5]], np.dtype(np.float32)).dtype == np.float32
    assert from_json([1, 2], np.dtype(np.int32)).dtype == np.int32
    assert from_json([True], np.dtype(np.bool_)).tolist() == [True]
    strings = from_json([["a", {"b64": "AP8="}]], np.dtype(object))
    assert strings.dtype == object and strings.tolist() == [[b"a", b"\x00\xff"]]
    assert from_json("x", np.dtype(object)).shape == ()
    # Without a dtype: as JSON gives it.
    assert from_json([1.0, 2.0], None).dtype == np.float64
    assert from_json(["a"], None).tolist() == [b"a"]
    with pytest.raises(InvalidArgumentError, match="ragged"):
        from_json([["a"], ["b", "c"]], np.dtype(object))
    with pytest.raises(InvalidArgumentError, match="bad base64"):
        from_json([{"b64": "!!"}], np.dtype(object))


def test_empty_answers_get_their_trailing_dimensions() -> None:
    assert from_json([], np.dtype(np.float32), [-1, 3]).shape == (0, 3)
    assert from_json([], np.dtype(np.float32), [-1, -1]).shape == (0,)
    assert from_json([], np.dtype(object), [-1, 2]).shape == (0, 2)
    assert from_json([], np.dtype(np.float32), None).shape == (0,)


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
        elements=st.floats(width=32),
    )
)
def test_float32_round_trips_exactly_through_json_text(array: np.ndarray) -> None:
    text = json.dumps(to_json(array))
    back = from_json(json.loads(text), np.dtype(np.float32), list(array.shape))
    assert back.shape == array.shape
    np.testing.assert_array_equal(back, array)
