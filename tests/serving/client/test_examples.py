"""Feature dicts become the same tf.Example over gRPC (a proto) and REST (JSON the server parses)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from serving.client import examples
from serving.client.errors import InvalidArgumentError
from serving.rest.json_examples import make_example, parse_examples_body

CASES: list[dict[str, Any]] = [
    {"x": 1.0},
    {"x": [3.0, -0.5], "n": 7, "flag": True, "word": "héllo", "raw": b"\x00\xff\x00"},
    {
        "ints": np.array([1, 2, 3], np.int64),
        "floats": np.array([[0.1, 2.0]], np.float32),
        "words": np.array([b"a", b"b\x00"], object),
        "scalar": np.float32(2.0),
    },
    {"empty": [], "big": 2**62, "neg": -3},
]


@pytest.mark.parametrize("features", CASES)
def test_both_transports_build_the_same_example(features: dict[str, Any]) -> None:
    proto = examples.to_proto(features)
    parsed_by_server = make_example(json.loads(json.dumps(examples.to_json(features))))
    assert parsed_by_server == proto


def test_kinds_follow_the_python_values() -> None:
    proto = examples.to_proto(CASES[1])
    feature = proto.features.feature
    assert list(feature["x"].float_list.value) == [3.0, -0.5]
    assert list(feature["n"].int64_list.value) == [7]
    assert list(feature["flag"].int64_list.value) == [1]
    assert list(feature["word"].bytes_list.value) == ["héllo".encode()]
    assert list(feature["raw"].bytes_list.value) == [b"\x00\xff\x00"]
    assert feature["x"].WhichOneof("kind") == "float_list"


def test_a_ready_example_passes_through_both_ways() -> None:
    proto = example_pb2.Example()
    proto.features.feature["x"].float_list.value.append(4.0)
    proto.features.feature["s"].bytes_list.value.append(b"\xfe")
    proto.features.feature["i"].int64_list.value.extend([1, -2])
    assert examples.to_proto(proto) is proto
    assert make_example(json.loads(json.dumps(examples.to_json(proto)))) == proto


def test_context_is_sent_and_merged_the_same_way() -> None:
    """The server feeds context + example bytes; the example wins on shared features."""
    body = {
        "examples": [examples.to_json({"x": 2.0})],
        "context": examples.to_json({"x": 10.0, "c": "ctx"}),
    }
    fed = parse_examples_body(json.dumps(body).encode()).examples[0]
    merged = example_pb2.Example.FromString(fed)
    assert list(merged.features.feature["x"].float_list.value) == [2.0]
    assert list(merged.features.feature["c"].bytes_list.value) == [b"ctx"]


def test_refusals() -> None:
    with pytest.raises(InvalidArgumentError, match="Feature: x mixes value kinds"):
        examples.to_proto({"x": [1, 2.5]})
    with pytest.raises(InvalidArgumentError, match="Feature: x has a value of type NoneType"):
        examples.to_json({"x": None})
    with pytest.raises(InvalidArgumentError, match="Input is empty"):
        examples.example_list([])
    with pytest.raises(InvalidArgumentError, match="not one example"):
        examples.example_list({"x": 1.0})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="mapping of feature name"):
        examples.features([("x", 1.0)])  # type: ignore[arg-type]
