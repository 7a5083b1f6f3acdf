"""JSON requests are bounded: nesting deeper than a tensor's dimensions is a 400, the request's
byte budget covers every decoded tensor, and running out of memory or stack is a status, never a
bare Python exception."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, OpError, ResourceExhaustedError
from runtime.tensor_codec import TensorBudget
from serving.config import ModelConfig
from serving.core.server_core import ServerCore
from serving.rest import json_codec
from serving.rest.app import RestOptions, create_app
from serving.rest.json_codec import decode_inputs, parse_predict_body
from serving.rest.json_text import parse_json
from tests.serving.support import HALF_PLUS_TWO, start_core

F = DataType.DT_FLOAT
S = DataType.DT_STRING
TOO_DEEP = "Tensor has 1000 dimensions, more than the 64 allowed"


def nested(depth: int, leaf: str = "1.0") -> bytes:
    return ("[" * depth + leaf + "]" * depth).encode()


def body(key: str, value: bytes) -> bytes:
    return b'{"' + key.encode() + b'": ' + value + b"}"


def decode(raw: bytes, dtypes: dict[str, DataType], **kw: Any) -> dict[str, np.ndarray]:
    return decode_inputs(parse_predict_body(raw), dtypes, **kw)


def error_of(raw: bytes, dtypes: dict[str, DataType], **kw: Any) -> OpError:
    with pytest.raises(OpError) as info:
        decode(raw, dtypes, **kw)
    return info.value


# -- nesting ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F, S])
def test_columnar_nesting_past_a_tensors_rank_is_invalid(dtype: DataType) -> None:
    leaf = "1.0" if dtype == F else '{"b64": "YQ=="}'
    err = error_of(body("inputs", nested(1000, leaf)), {"x": dtype})
    assert isinstance(err, InvalidArgumentError) and err.message == TOO_DEEP
    err = error_of(body("inputs", b'{"x": ' + nested(1000, leaf) + b"}"), {"x": dtype})
    assert isinstance(err, InvalidArgumentError) and err.message == TOO_DEEP


def test_row_nesting_counts_the_instances_list() -> None:
    err = error_of(body("instances", nested(1000)), {"x": F})
    assert isinstance(err, InvalidArgumentError)
    assert err.message == (
        f"Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: {TOO_DEEP}"
    )
    err = error_of(body("instances", b'[{"x": ' + nested(999) + b"}]"), {"x": F})
    assert err.message == (
        "Failed to process element: 0 key: x of 'instances' list. Error: INVALID_ARGUMENT: "
        f"{TOO_DEEP}"
    )
    # 64 levels in 'instances' are a tensor of 64 dimensions, 65 are one too many
    assert decode(body("instances", nested(64)), {"x": F})["x"].shape == (1,) * 64
    err = error_of(body("instances", nested(65)), {"x": F})
    assert err.message.endswith("Tensor has 65 dimensions, more than the 64 allowed")


@pytest.mark.parametrize("dtype", [F, S])
def test_64_dimensions_decode(dtype: DataType) -> None:
    leaf = "2.0" if dtype == F else '{"b64": "YQ=="}'
    out = decode(body("inputs", nested(64, leaf)), {"x": dtype})["x"]
    assert out.shape == (1,) * 64
    assert out.reshape(-1).tolist() == ([2.0] if dtype == F else [b"a"])
    err = error_of(body("inputs", nested(65, leaf)), {"x": dtype})
    assert err.message == "Tensor has 65 dimensions, more than the 64 allowed"


def test_a_deep_value_after_a_shallow_first_element_is_still_an_ordinary_error() -> None:
    raw = body("inputs", b"[[1.0], " + nested(900) + b"]")
    err = error_of(raw, {"x": F})
    assert isinstance(err, InvalidArgumentError)
    assert err.message == "Encountered list at unexpected level: 2 expected < 2"


def test_documents_past_the_parsers_depth_stay_a_parse_error() -> None:
    err = error_of(body("inputs", nested(5000)), {"x": F})
    assert isinstance(err, InvalidArgumentError)
    assert err.message.startswith("JSON Parse error: ")


# -- byte budget --------------------------------------------------------------------------------


def test_the_budget_covers_the_fast_numeric_path() -> None:
    raw = body("inputs", json.dumps([[1.0] * 10] * 10).encode())
    assert decode(raw, {"x": F}, max_bytes=400)["x"].shape == (10, 10)
    err = error_of(raw, {"x": F}, max_bytes=399)
    assert isinstance(err, ResourceExhaustedError)
    assert err.message == (
        "Tensor of shape [10,10] and type float needs 400 bytes, more than the 399 allowed per "
        "request"
    )


def test_the_budget_covers_the_careful_path_before_the_array_is_built() -> None:
    raw = body("inputs", b'[["ab", {"b64": "Y2Rl"}]]')  # strings: their bytes + 8 per element
    assert decode(raw, {"x": S}, max_bytes=21)["x"].tolist() == [[b"ab", b"cde"]]
    err = error_of(raw, {"x": S}, max_bytes=20)
    assert isinstance(err, ResourceExhaustedError)
    assert err.message.startswith("Tensor of shape [1,2] and type string needs 21 bytes")
    raw = body("inputs", b"[[1.0, 2.0], [3.0, true]]")  # a bool token sends floats the careful way
    assert isinstance(error_of(raw, {"x": F}, max_bytes=1), InvalidArgumentError)  # TF's error first


def test_one_budget_spans_the_inputs_of_a_request() -> None:
    dtypes = {"a": F, "b": DataType.DT_INT64}
    rows = body("instances", b'[{"a": [1.0, 2.0], "b": 3}, {"a": [4.0, 5.0], "b": 6}]')
    columns = body("inputs", b'{"a": [[1.0, 2.0], [4.0, 5.0]], "b": [3, 6]}')
    for raw in (rows, columns):
        budget = TensorBudget(32)
        out = decode(raw, dtypes, max_bytes=budget)
        assert out["a"].shape == (2, 2) and out["b"].shape == (2,)
        assert budget.remaining == 0
        err = error_of(raw, dtypes, max_bytes=31)
        assert isinstance(err, ResourceExhaustedError)
        assert "left of the 31 allowed per request" in err.message
    slow_rows = body("instances", b'[{"a": ["x"], "b": 3}, {"a": ["y"], "b": true}]')
    err = error_of(slow_rows, {"a": S, "b": DataType.DT_INT64}, max_bytes=1000)
    assert isinstance(err, InvalidArgumentError)  # the careful path still checks values first
    budget = TensorBudget(18)
    out = decode(body("instances", b'[{"a": ["x"]}, {"a": ["y"]}]'), {"a": S}, max_bytes=budget)
    assert out["a"].tolist() == [[b"x"], [b"y"]] and budget.remaining == 0


def test_no_limit_by_default() -> None:
    raw = body("inputs", json.dumps([0.5] * 1000).encode())
    assert decode(raw, {"x": F})["x"].shape == (1000,)


# -- memory and stack ---------------------------------------------------------------------------


def test_a_memory_error_while_decoding_is_resource_exhausted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_memory(*args: Any) -> Any:
        raise MemoryError("Unable to allocate 8.00 TiB")

    monkeypatch.setattr(json_codec, "_from_inputs", no_memory)
    err = error_of(body("inputs", b"[1.0]"), {"x": F})
    assert isinstance(err, ResourceExhaustedError)
    assert err.message == "OOM when allocating the request's tensors"


def test_a_recursion_error_while_decoding_is_invalid_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_deep(*args: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(json_codec, "_from_instances", too_deep)
    err = error_of(body("instances", b"[1.0]"), {"x": F})
    assert isinstance(err, InvalidArgumentError)
    assert err.message == "JSON value is nested too deeply to decode"


def test_a_memory_error_while_parsing_is_resource_exhausted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_memory(*args: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(orjson, "loads", no_memory)
    with pytest.raises(ResourceExhaustedError, match="^OOM when allocating the parsed JSON body$"):
        parse_json(b"[1.0]")


# -- over HTTP ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def core() -> Iterator[ServerCore]:
    core = start_core([ModelConfig("half_plus_two", HALF_PLUS_TWO)])
    yield core
    core.close()


def _post_all(core: ServerCore, bodies: list[bytes]) -> list[httpx.Response]:
    app: Any = create_app(core, RestOptions(num_threads=2))

    async def send() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [
                await client.post("/v1/models/half_plus_two:predict", content=b) for b in bodies
            ]

    return asyncio.run(send())


def test_deep_requests_answer_400_and_normal_ones_still_work(core: ServerCore) -> None:
    deep_rows, deep_columns, ok_rows, ok_columns = _post_all(core, [
        body("instances", nested(1000)),
        body("inputs", b'{"x": ' + nested(1000) + b"}"),
        body("instances", b"[[1.0], [2.0]]"),
        body("inputs", b'{"x": [[4.0]]}'),
    ])
    assert deep_rows.status_code == 400
    assert deep_rows.json() == {"error": (
        f"Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: {TOO_DEEP}"
    )}
    assert deep_columns.status_code == 400
    assert deep_columns.json() == {"error": TOO_DEEP}
    assert ok_rows.status_code == 200 and ok_rows.json() == {"predictions": [[2.5], [3.0]]}
    assert ok_columns.status_code == 200 and ok_columns.json() == {"outputs": [[4.0]]}
