""":classify and :regress JSON: tf.Example typing rules, 400 messages, response layout."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protos.tensorflow.core.example import example_pb2
from runtime.errors import InvalidArgumentError
from serving.rest.json_examples import (
    encode_classify_response,
    encode_regress_response,
    make_example,
    parse_examples_body,
)


def parse(body: Any) -> list[example_pb2.Example]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return [example_pb2.Example.FromString(e) for e in parse_examples_body(raw).examples]


def features(body: Any) -> list[dict[str, tuple[str | None, list[Any]]]]:
    """Per example: feature -> (kind, values)."""
    out = []
    for example in parse(body):
        entry = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            entry[name] = (kind, list(getattr(feature, kind).value) if kind else [])
        out.append(entry)
    return out


def error_of(body: Any) -> str:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(InvalidArgumentError) as info:
        parse_examples_body(raw)
    return info.value.message


def test_json_kinds_pick_the_feature_list() -> None:
    body = (
        b'{"examples": [{"s": "caf\xc3\xa9", "b": {"b64": "AP8="}, "i": 7, "f": 1.5,'
        b' "one": 1.0, "e": 1e2, "t": true, "n": false, "ints": [1, -2, true],'
        b' "strs": ["a", {"b64": "Yg=="}], "floats": [0.1, NaN, -Infinity], "empty": []}]}'
    )
    (got,) = features(body)
    assert got["s"] == ("bytes_list", ["café".encode()])
    assert got["b"] == ("bytes_list", [b"\x00\xff"])
    assert got["i"] == ("int64_list", [7])
    assert got["f"] == ("float_list", [1.5])
    assert got["one"] == ("float_list", [1.0])  # 1.0 is a float, 1 an integer
    assert got["e"] == ("float_list", [100.0])
    assert got["t"] == ("int64_list", [1]) and got["n"] == ("int64_list", [0])
    assert got["ints"] == ("int64_list", [1, -2, 1])
    assert got["strs"] == ("bytes_list", [b"a", b"b"])
    kind, floats = got["floats"]
    assert kind == "float_list" and floats[0] == np.float32(0.1)
    assert math.isnan(floats[1]) and floats[2] == -math.inf
    assert got["empty"] == (None, [])  # present, with no kind set


def test_integer_range() -> None:
    (got,) = features({"examples": [{"lo": -(2**63), "hi": 2**63 - 1, "huge": 2**64,
                                     "neg": -(2**63) - 1}]})
    assert got["lo"] == ("int64_list", [-(2**63)])
    assert got["hi"] == ("int64_list", [2**63 - 1])
    # Beyond uint64 (or int64, for negatives) the number is a double, hence a float feature.
    assert got["huge"] == ("float_list", [float(np.float32(2.0**64))])
    assert got["neg"] == ("float_list", [float(np.float32(-(2.0**63)))])
    assert error_of({"examples": [{"u": 2**63}]}) == (
        "Feature: u has uint64_t element. Only int64_t is supported."
    )


_VALUES = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4).map(lambda v: ("int64_list", v)),
    st.lists(st.floats(allow_nan=False, width=32), max_size=4).map(lambda v: ("float_list", v)),
    st.lists(st.text(), max_size=4).map(lambda v: ("bytes_list", v)),
)


@given(st.dictionaries(st.text(min_size=1), _VALUES, max_size=5))
def test_typed_lists_round_trip(spec: dict[str, tuple[str, list[Any]]]) -> None:
    (got,) = features({"examples": [{name: values for name, (_, values) in spec.items()}]})
    expected = {}
    for name, (kind, values) in spec.items():
        if kind == "bytes_list":
            values = [v.encode() for v in values]
        expected[name] = (kind if values else None, values)
    assert got == expected


def test_context_bytes_precede_every_example() -> None:
    raw = json.dumps({"context": {"x": 9.0, "c": "ctx"}, "examples": [{}, {"x": 1.0}]}).encode()
    body = parse_examples_body(raw)
    context, with_x = body.examples
    assert example_pb2.Example.FromString(context) == make_example({"x": 9.0, "c": "ctx"})
    assert with_x == context + make_example({"x": 1.0}).SerializeToString()
    merged = parse(raw)
    assert [list(e.features.feature["x"].float_list.value) for e in merged] == [[9.0], [1.0]]
    assert [list(e.features.feature["c"].bytes_list.value) for e in merged] == [[b"ctx"]] * 2


def test_signature_name() -> None:
    raw = b'{"signature_name": "classify_x_to_y", "examples": [{}]}'
    assert parse_examples_body(raw).signature_name == "classify_x_to_y"
    assert parse_examples_body(b'{"examples": [{}]}').signature_name == ""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "JSON Parse error: The document is empty"),
        (b"{", "JSON Parse error: Missing a name for object member. at offset: 1"),
        (b"[]", "JSON Value: [] Is not object"),
        ({"signature_name": 1, "examples": [{}]},
         ('JSON Value: {\n    "signature_name": 1,\n    "examples": [{}]\n} not formatted '
         "correctly. 'signature_name' key must be a string value.")),
        ({"instances": [1]},
         ('JSON Value: {\n    "instances": [1]\n} When method is classify, key \'examples\' is '
         "expected and was not found")),
        ({"examples": {"x": 1}},
         ('JSON Value: {\n    "examples": {\n        "x": 1\n    }\n} Expecting \'examples\' '
         "value to be an list/array")),
        ({"examples": []}, ('JSON Value: {\n    "examples": []\n} \'examples\' value is an empty '
                           "array")),
        ({"examples": [[1.0]]}, "Example must be JSON object but got JSON Array"),
        ({"examples": [{"x": 1.0}, "x"]}, "Example must be JSON object but got JSON String"),
        ({"context": 1, "examples": [{}]}, "Example must be JSON object but got JSON Number"),
        ({"examples": [{"x": None}]}, "Feature: x has element with unexpected JSON type: Null"),
        ({"examples": [{"x": [[1.0]]}]},
         "Feature: x has element with unexpected JSON type: Array"),
        ({"examples": [{"x": {"a": 1}}]},
         "Feature: x has element with unexpected JSON type: Object"),
        ({"examples": [{"x": {"b64": "AA==", "c": 1}}]},
         "Feature: x has element with unexpected JSON type: Object"),
        ({"examples": [{"x": {"b64": "!!"}}]}, "Unable to base64 decode"),
        ({"examples": [{"x": [1.0, 2]}]},
         "Unexpected element type in feature: x expecting type: float"),
        ({"examples": [{"x": [2, 1.0]}]},
         "Unexpected element type in feature: x expecting type: int64"),
        ({"examples": [{"x": ["a", 1]}]},
         "Unexpected element type in feature: x expecting type: bytes"),
        ({"examples": [{"x": [1, {"b64": "AA=="}]}]},
         "Unexpected element type in feature: x expecting type: int64"),
        (b'{"examples": [{"x": 1e999}]}',
         "JSON Parse error: Number too big to be stored in double. at offset: 20"),
        (b'{"examples": [{"x": ' + b"9" * 400 + b"}]}",
         "JSON Parse error: Number too big to be stored in double. at offset: 20"),
        (b'{"examples": [{"\xff": 1}]}', 'Feature name "\udcff" is not valid UTF-8'),
    ],
)
def test_errors(body: Any, message: str) -> None:
    assert error_of(body) == message


def test_classify_response_layout() -> None:
    body = encode_classify_response([[(b"", 2.5)], [(b"", 3.5)]])
    assert body == b'{\n    "results": [[["", 2.5]], [["", 3.5]]\n    ]\n}'
    body = encode_classify_response([[(b"cat", 0.1), (b'say "hi"\n', 1 / 3)], [], [(b"\xff", 0)]])
    assert body == (
        b'{\n    "results": [[["cat", 0.1], ["say \\"hi\\"\\n", 0.333333343]], [], '
        b'[["\xff", 0.0]]\n    ]\n}'
    )
    assert json.loads(encode_classify_response([[(b"a", 1e10)]])) == {"results": [[["a", 1e10]]]}


def test_regress_response_layout() -> None:
    assert encode_regress_response([2.5, 3.5]) == b'{\n    "results": [2.5, 3.5]\n}'
    assert encode_regress_response([0.1, 9e6, math.nan, -math.inf, 3.0]) == (
        b'{\n    "results": [0.1, 9e+06, NaN, -Infinity, 3.0]\n}'
    )


def test_empty_results_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="^Cannot convert empty ClassificationResults"):
        encode_classify_response([])
    with pytest.raises(InvalidArgumentError, match="^Cannot convert empty RegressionResults"):
        encode_regress_response([])
