"""Encoding :predict responses, byte for byte as TensorFlow Serving writes them."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from runtime.errors import InvalidArgumentError
from serving.rest.json_codec import RequestFormat
from serving.rest.json_encode import encode_predict_response
from serving.rest.json_numbers import bool_tokens, float_tokens, int_tokens
from serving.rest.json_text import PrettyWriter, quote, quote_bytes

ROW, COLUMNAR = RequestFormat.ROW, RequestFormat.COLUMNAR


def text(outputs: dict[str, np.ndarray], fmt: RequestFormat) -> str:
    return encode_predict_response(outputs, fmt).decode("utf-8", "surrogateescape")


def test_half_plus_two_row_response() -> None:
    y = np.array([2.5, 3.0, 4.5], dtype=np.float32)
    assert text({"y": y}, ROW) == '{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'
    assert text({"y": y[:, None]}, ROW) == (
        '{\n    "predictions": [[2.5], [3.0], [4.5]\n    ]\n}'
    )


def test_columnar_response_is_indented() -> None:
    y = np.array([[2.5], [3.0]], dtype=np.float32)
    assert text({"y": y}, COLUMNAR) == (
        '{\n    "outputs": [\n        [\n            2.5\n        ],\n'
        '        [\n            3.0\n        ]\n    ]\n}'
    )
    assert text({"y": np.float32(1.5)}, COLUMNAR) == '{\n    "outputs": 1.5\n}'


def test_several_outputs() -> None:
    outputs = {"b": np.array([1, 2], dtype=np.int64), "a": np.array([[True], [False]])}
    assert text(outputs, ROW) == (
        '{\n    "predictions": [\n        {\n            "a": [true],\n            "b": 1\n'
        '        },\n        {\n            "a": [false],\n            "b": 2\n        }\n'
        "    ]\n}"
    )
    assert text(outputs, COLUMNAR) == (
        '{\n    "outputs": {\n        "a": [\n            [\n                true\n'
        '            ],\n            [\n                false\n            ]\n        ],\n'
        '        "b": [\n            1,\n            2\n        ]\n    }\n}'
    )


def test_strings_and_bytes_outputs() -> None:
    strings = np.array([b"caf\xc3\xa9", b"\xff"], dtype=object)
    assert encode_predict_response({"s": strings}, ROW) == (
        b'{\n    "predictions": ["caf\xc3\xa9", "\xff"\n    ]\n}'
    )
    assert text({"s_bytes": strings}, ROW) == (
        '{\n    "predictions": [{\n            "b64": "Y2Fmw6k="\n        }, {\n'
        '            "b64": "/w=="\n        }\n    ]\n}'
    )


def test_empty_tensors() -> None:
    assert text({"y": np.zeros((0, 2), np.float32)}, ROW) == '{\n    "predictions": []\n}'
    assert text({"y": np.zeros((2, 0), np.float32)}, COLUMNAR) == (
        '{\n    "outputs": [\n        [],\n        []\n    ]\n}'
    )


def test_row_format_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="^Tensor name: y has no shape information $"):
        encode_predict_response({"y": np.float32(1)}, ROW)
    with pytest.raises(InvalidArgumentError) as info:
        encode_predict_response({"a": np.zeros(2), "b": np.zeros(3)}, ROW)
    assert info.value.message == "Tensor name: b has inconsistent batch size: 3 expecting: 2"


def test_unwritable_dtypes_and_empty_maps() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        encode_predict_response({"h": np.zeros(2, np.float16)}, COLUMNAR)
    assert info.value.message == "Failed to write JSON value for tensor type: half"
    with pytest.raises(InvalidArgumentError, match="^Cannot convert empty tensor map to JSON$"):
        encode_predict_response({}, COLUMNAR)


# --- An event-by-event port of TensorFlow Serving's writer calls, as the oracle ----------------


def _leaf_tokens(name: str, array: np.ndarray) -> list[str] | None:
    if array.dtype.kind == "f":
        return float_tokens(array)
    if array.dtype.kind in "iu":
        return int_tokens(array)
    if array.dtype.kind == "b":
        return bool_tokens(array)
    return None


def _add_values(writer: PrettyWriter, name: str, array: np.ndarray, dim: int,
                flat: list, offset: list[int]) -> None:
    def single() -> None:
        value = flat[offset[0]]
        offset[0] += 1
        if isinstance(value, bytes):
            if name.endswith("_bytes"):
                writer.start_object()
                writer.key("b64")
                writer.raw(quote(base64.b64encode(value).decode()))
                writer.end_object()
            else:
                writer.raw(quote_bytes(value))
        else:
            writer.raw(value)

    if dim > array.ndim - 1:
        single()
        return
    writer.start_array()
    for _ in range(array.shape[dim]):
        if dim == array.ndim - 1:
            single()
        else:
            _add_values(writer, name, array, dim + 1, flat, offset)
    writer.end_array()


def tensorflow_serving_text(outputs: dict[str, np.ndarray], fmt: RequestFormat) -> str:
    items = sorted(outputs.items())
    flats = {n: (_leaf_tokens(n, a) or a.reshape(-1).tolist()) for n, a in items}
    offsets = {n: [0] for n, _ in items}
    writer = PrettyWriter()
    writer.start_object()
    several = len(items) > 1
    if fmt is ROW:
        writer.key("predictions")
        writer.start_array()
        for _ in range(items[0][1].shape[0]):
            if several:
                writer.start_object()
            writer.single_line_arrays = True
            for name, array in items:
                if several:
                    writer.key(name)
                _add_values(writer, name, array, 1, flats[name], offsets[name])
            writer.single_line_arrays = False
            if several:
                writer.end_object()
        writer.end_array()
    else:
        writer.key("outputs")
        if several:
            writer.start_object()
        for name, array in items:
            if several:
                writer.key(name)
            _add_values(writer, name, array, 0, flats[name], offsets[name])
        if several:
            writer.end_object()
    writer.end_object()
    return writer.text()


def _tensors(batch: int | None) -> st.SearchStrategy[np.ndarray]:
    dims = st.lists(st.integers(0, 3), min_size=0 if batch is None else 1, max_size=3)

    def build(shape: list[int]) -> st.SearchStrategy[np.ndarray]:
        if batch is not None:
            shape = [batch, *shape[1:]]
        return st.one_of(
            hnp.arrays(np.float32, shape),
            hnp.arrays(np.int64, shape),
            hnp.arrays(np.bool_, shape),
            hnp.arrays(object, shape, elements=st.binary(max_size=4)),
        )

    return dims.flatmap(build)


names = st.sampled_from(["y", "out_bytes", "a", "scores"])


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_layout_matches_tensorflow_serving_writer_calls(data: st.DataObject) -> None:
    fmt = data.draw(st.sampled_from([ROW, COLUMNAR]))
    batch = data.draw(st.integers(0, 3)) if fmt is ROW else None
    chosen = data.draw(st.lists(names, min_size=1, max_size=3, unique=True))
    outputs = {n: data.draw(_tensors(batch)) for n in chosen}
    assert text(outputs, fmt) == tensorflow_serving_text(outputs, fmt)


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        st.sampled_from([np.float32, np.float64]),
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=8),
        elements=st.floats(width=32, allow_subnormal=False),
    )
)
def test_a_small_float_answer_is_written_as_the_general_path_writes_it(array: np.ndarray) -> None:
    from serving.rest import json_encode

    general = json_encode._BODIES[RequestFormat.ROW][1]({"y": array})
    expected = ("{" + json_encode._indent(1) + '"predictions": ' + general + "\n}").encode()
    assert encode_predict_response({"y": array}, RequestFormat.ROW) == expected
