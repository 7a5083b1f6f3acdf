"""The Open Inference Protocol's REST bodies: JSON, with the binary tensor data extension.

Request: a JSON object, optionally followed by binary data; the header
``Inference-Header-Content-Length`` then gives the JSON's length. Each input whose
``parameters.binary_data_size`` is set takes that many bytes of the binary data, in input
order, and has no ``data``; the sizes must add up to the binary data exactly. JSON ``data`` is
flat or nested (row-major either way); BYTES values are strings.

Response: JSON, followed by the binary data of the outputs sent as binary: those asked for so
(the output's ``parameters.binary_data``, else the request parameter ``binary_data_output``),
and BYTES outputs that are not UTF-8, which JSON cannot carry. Each such output has
``parameters.binary_data_size`` instead of ``data``. Binary data is little-endian and row-major,
a byte per BOOL, and for BYTES each element as a 4-byte little-endian length and its bytes.
NaN and infinities go into JSON as the tokens ``NaN``, ``Infinity`` and ``-Infinity``, which
Triton's clients read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from runtime.errors import InvalidArgumentError
from serving.requests.inference_v2 import (
    EXTENSIONS,
    SERVER_NAME,
    InferInput,
    InferOutput,
    InferRequest,
    InferResponse,
    ModelMetadata,
    TensorMetadata,
    raw_bytes,
    server_version,
    signature_parameter,
)
from serving.rest.json_text import parse_json

BINARY_DATA_SIZE = "binary_data_size"
BINARY_DATA = "binary_data"
BINARY_DATA_OUTPUT = "binary_data_output"
_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_NON_FINITE = {"nan": b"NaN", "inf": b"Infinity", "-inf": b"-Infinity"}


@dataclass(frozen=True)
class InferBody:
    """A parsed infer request and how its outputs are to be sent."""

    request: InferRequest
    binary_output: bool = False  # the request parameter binary_data_output
    binary: Mapping[str, bool] | None = None  # per requested output, when it says

    def wants_binary(self, name: str) -> bool:
        if self.binary is not None:
            choice = self.binary.get(name)
            if choice is not None:
                return choice
        return self.binary_output


def header_length(value: bytes | None, body_size: int) -> int | None:
    """The JSON's length from ``Inference-Header-Content-Length`` (None: the whole body)."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit():
        raise InvalidArgumentError(
            f"Inference-Header-Content-Length must be a byte count, got "
            f"'{text.decode('latin-1')}'"
        )
    length = int(text)
    if length > body_size:
        raise InvalidArgumentError(
            f"Inference-Header-Content-Length is {length}, but the body has only {body_size} bytes"
        )
    return length


def _parameters(owner: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    parameters = owner.get("parameters")
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise InvalidArgumentError(f"the 'parameters' of {what} must be an object")
    return parameters


def _flag(parameters: Mapping[str, Any], key: str, what: str) -> bool | None:
    value = parameters.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise InvalidArgumentError(f"the parameter '{key}' of {what} must be true or false")


def _string(item: Mapping[str, Any], key: str, what: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{what} needs a '{key}' string")
    return value


def _shape(item: Mapping[str, Any], what: str) -> tuple[int, ...]:
    shape = item.get("shape")
    if not isinstance(shape, list) or not all(
        type(d) is int and d >= 0 for d in shape
    ):
        raise InvalidArgumentError(f"{what} needs a 'shape': a list of non-negative integers")
    return tuple(shape)


def _inputs(root: Mapping[str, Any], binary: memoryview) -> list[InferInput]:
    items = root.get("inputs")
    if not isinstance(items, list):
        raise InvalidArgumentError("the request needs 'inputs': a list of input objects")
    inputs: list[InferInput] = []
    offset = 0
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidArgumentError(f"input {index} is not an object")
        name = _string(item, "name", f"input {index}")
        what = f"input '{name}'"
        datatype = _string(item, "datatype", what)
        shape = _shape(item, what)
        size = _parameters(item, what).get(BINARY_DATA_SIZE)
        if size is None:
            if "data" not in item:
                raise InvalidArgumentError(
                    f"{what} has neither 'data' nor the parameter '{BINARY_DATA_SIZE}'"
                )
            inputs.append(InferInput(name, datatype, shape, values=item["data"]))
            continue
        if type(size) is not int or size < 0:
            raise InvalidArgumentError(
                f"the parameter '{BINARY_DATA_SIZE}' of {what} must be a byte count"
            )
        if "data" in item:
            raise InvalidArgumentError(
                f"{what} has both 'data' and the parameter '{BINARY_DATA_SIZE}'"
            )
        if offset + size > len(binary):
            raise InvalidArgumentError(
                f"{what}: its {size} bytes of binary data run past the end of the body "
                f"({len(binary) - offset} bytes of binary data left)"
            )
        inputs.append(InferInput(name, datatype, shape, raw=binary[offset : offset + size]))
        offset += size
    if offset != len(binary):
        raise InvalidArgumentError(
            f"{len(binary)} bytes of binary data follow the JSON, but the inputs' "
            f"'{BINARY_DATA_SIZE}' add up to {offset}"
        )
    return inputs


def _outputs(root: Mapping[str, Any]) -> tuple[list[str], dict[str, bool] | None]:
    items = root.get("outputs")
    if items is None:
        return [], None
    if not isinstance(items, list):
        raise InvalidArgumentError("the request's 'outputs' must be a list of output objects")
    names: list[str] = []
    binary: dict[str, bool] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidArgumentError(f"requested output {index} is not an object")
        name = _string(item, "name", f"requested output {index}")
        what = f"requested output '{name}'"
        parameters = _parameters(item, what)
        if parameters.get("classification"):
            raise InvalidArgumentError(
                f"{what}: the classification extension is not supported"
            )
        choice = _flag(parameters, BINARY_DATA, what)
        if choice is not None:
            binary[name] = choice
        names.append(name)
    return names, binary or None


def parse_infer_body(
    body: bytes, json_length: int | None, model_name: str, model_version: str, cheap: bool
) -> InferBody:
    """The infer request in ``body`` for the model (and version) its path names."""
    if json_length is None:
        head, binary = body, memoryview(b"")
    else:
        head, binary = body[:json_length], memoryview(body)[json_length:]
    root = parse_json(head)
    if not isinstance(root, dict):
        raise InvalidArgumentError("the request body must be a JSON object")
    request_id = root.get("id", "")
    if not isinstance(request_id, str):
        raise InvalidArgumentError("the request's 'id' must be a string")
    parameters = _parameters(root, "the request")
    binary_output = _flag(parameters, BINARY_DATA_OUTPUT, "the request") or False
    names, binary_choice = _outputs(root)
    request = InferRequest(
        model_name, model_version, _inputs(root, binary), names, request_id,
        signature_parameter(parameters), cheap,
    )
    return InferBody(request, binary_output, binary_choice)


# -- responses ----------------------------------------------------------------------------------


def _float_data(flat: np.ndarray) -> Any:
    """Floats for JSON; non-finite values as the tokens JSON parsers that allow them read."""
    finite = np.isfinite(flat)
    if finite.all():
        return flat
    tokens = orjson.dumps(flat, option=_NUMPY)[1:-1].split(b",")
    for index in np.flatnonzero(~finite).tolist():
        tokens[index] = _NON_FINITE[str(float(flat[index]))]
    return orjson.Fragment(b"[" + b",".join(tokens) + b"]")


def _json_data(output: InferOutput) -> Any:
    """The output's flat data as orjson writes it; None when JSON cannot carry it."""
    array = output.array
    if array.dtype == object:
        try:
            return [
                v.decode() if isinstance(v, bytes) else str(v) for v in array.reshape(-1).tolist()
            ]
        except UnicodeDecodeError:
            return None
    if output.datatype == "BF16":  # orjson knows no bfloat16; float32 holds each value exactly
        array = array.astype(np.float32)
    flat = np.ascontiguousarray(array.reshape(-1))
    if not flat.dtype.isnative:
        flat = flat.astype(flat.dtype.newbyteorder("="))
    if flat.dtype.kind == "f":
        return _float_data(flat)
    return flat


def encode_infer_response(response: InferResponse, body: InferBody) -> tuple[bytes, int | None]:
    """The response body, and the JSON's length when binary data follows it (None: all JSON)."""
    outputs: list[dict[str, Any]] = []
    buffers: list[bytes] = []
    for output in response.outputs:
        entry: dict[str, Any] = {
            "name": output.name, "datatype": output.datatype, "shape": output.shape,
        }
        data = None if body.wants_binary(output.name) else _json_data(output)
        if data is None:
            raw = raw_bytes(output.array)
            entry["parameters"] = {BINARY_DATA_SIZE: len(raw)}
            buffers.append(raw)
        else:
            entry["data"] = data
        outputs.append(entry)
    head: dict[str, Any] = {
        "model_name": response.model_name, "model_version": response.model_version,
    }
    if response.id:
        head["id"] = response.id
    head["outputs"] = outputs
    text = orjson.dumps(head, option=_NUMPY)
    if not buffers:
        return text, None
    return b"".join([text, *buffers]), len(text)


def output_bytes(response: InferResponse) -> int:
    """The outputs' size in memory: what encoding them costs in proportion to."""
    total = 0
    for output in response.outputs:
        total += output.array.nbytes
    return total


# -- metadata -----------------------------------------------------------------------------------


def server_metadata_json() -> bytes:
    return orjson.dumps(
        {"name": SERVER_NAME, "version": server_version(), "extensions": list(EXTENSIONS)}
    )


def _tensors(tensors: list[TensorMetadata]) -> list[dict[str, Any]]:
    return [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in tensors]


def model_metadata_json(metadata: ModelMetadata) -> bytes:
    return orjson.dumps({
        "name": metadata.name,
        "versions": metadata.versions,
        "platform": metadata.platform,
        "inputs": _tensors(metadata.inputs),
        "outputs": _tensors(metadata.outputs),
    })
