"""``ModelInferRequest`` / ``ModelInferResponse`` to and from the protocol's transport-agnostic
request and response (``serving.requests.inference_v2``).

An input's data is either its entry in ``raw_input_contents`` (then every input has one, in
order, and none has ``contents``) or its typed ``contents``, in the one field its datatype
uses (FP16 and BF16 have none: they only come raw). Outputs always go out raw, in
``raw_output_contents``: it is what Triton's client reads, and the cheap way to write them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from protos.inference import grpc_service_pb2 as pb
from runtime.errors import InvalidArgumentError
from runtime.tensor_codec import encode_varint
from serving.requests import inference_v2 as v2
from serving.requests.proto_convert import CHEAP_REQUEST_BYTES

# datatype -> the InferTensorContents field holding its values, and that field's element type
_CONTENTS: dict[str, tuple[str, Any]] = {
    "BOOL": ("bool_contents", np.bool_),
    "INT8": ("int_contents", np.int32),
    "INT16": ("int_contents", np.int32),
    "INT32": ("int_contents", np.int32),
    "INT64": ("int64_contents", np.int64),
    "UINT8": ("uint_contents", np.uint32),
    "UINT16": ("uint_contents", np.uint32),
    "UINT32": ("uint_contents", np.uint32),
    "UINT64": ("uint64_contents", np.uint64),
    "FP32": ("fp32_contents", np.float32),
    "FP64": ("fp64_contents", np.float64),
    "BYTES": ("bytes_contents", object),
}
# (name, datatype, shape) -> an output's encoded InferOutputTensor field
_TENSORS: dict[tuple[str, str, tuple[int, ...]], bytes] = {}
# (model name, version) -> their encoded fields 1 and 2
_HEADS: dict[tuple[str, str], bytes] = {}
_MAX_CACHED = 4096  # names and shapes come from clients: forget rather than grow unbounded
# Protocol features whose parameters we cannot honour: refused rather than silently ignored.
_SHARED_MEMORY = "shared_memory_region"
_CLASSIFICATION = "classification"


def parameter_value(parameter: pb.InferParameter) -> Any:
    """The value a parameter holds (None when it holds none)."""
    choice = parameter.WhichOneof("parameter_choice")
    return None if choice is None else getattr(parameter, choice)


def parameters(entries: Mapping[str, pb.InferParameter]) -> dict[str, Any]:
    return {key: parameter_value(value) for key, value in entries.items()}


def _typed_values(tensor: pb.ModelInferRequest.InferInputTensor) -> Any:
    """The input's values from its typed contents: an array of the field's element type (a
    list of bytes for BYTES); None when it has no contents and its shape holds elements."""
    datatype = tensor.datatype
    if datatype not in _CONTENTS:
        v2.numpy_dtype(datatype)  # an unknown datatype is said as such
        raise InvalidArgumentError(
            f"input '{tensor.name}': {datatype} data can only be sent in raw_input_contents"
        )
    field, element = _CONTENTS[datatype]
    contents = tensor.contents
    for descriptor, _ in contents.ListFields():
        if descriptor.name != field:
            raise InvalidArgumentError(
                f"input '{tensor.name}': {datatype} data goes in contents.{field}, "
                f"not contents.{descriptor.name}"
            )
    if not tensor.HasField("contents") and 0 not in tensor.shape:
        return None
    values = getattr(contents, field)
    if element is object:
        return list(values)
    return np.fromiter(values, dtype=element, count=len(values))


def _refuse_unsupported(tensor: Any, kind: str, parameter: str) -> None:
    if parameter in tensor.parameters:
        raise InvalidArgumentError(
            f"{kind} '{tensor.name}': the parameter '{parameter}' is not supported"
        )


def infer_request(proto: pb.ModelInferRequest, size: int) -> v2.InferRequest:
    """The request's inputs as received (typed contents as arrays); ``size`` is its serialized
    size (a large request is decoded off the event loop)."""
    raws = proto.raw_input_contents
    tensors = proto.inputs
    if raws and len(raws) != len(tensors):
        raise InvalidArgumentError(
            f"raw_input_contents has {len(raws)} entries for {len(tensors)} inputs: "
            "with raw data, every input has one, in order"
        )
    inputs = []
    strings = False
    for index, tensor in enumerate(tensors):
        if tensor.parameters:
            _refuse_unsupported(tensor, "input", _SHARED_MEMORY)
        datatype = tensor.datatype
        strings = strings or datatype == "BYTES"
        if raws:
            if tensor.HasField("contents"):
                raise InvalidArgumentError(
                    f"input '{tensor.name}' has contents while the request has "
                    "raw_input_contents: an input's data goes in one or the other"
                )
            inputs.append(v2.InferInput(tensor.name, datatype, tuple(tensor.shape), raws[index]))
        else:
            inputs.append(v2.InferInput(
                tensor.name, datatype, tuple(tensor.shape), None, _typed_values(tensor)
            ))
    names = []
    for output in proto.outputs:
        if output.parameters:
            _refuse_unsupported(output, "output", _SHARED_MEMORY)
            _refuse_unsupported(output, "output", _CLASSIFICATION)
        names.append(output.name)
    signature = v2.signature_parameter(parameters(proto.parameters)) if proto.parameters else ""
    # Splitting or encoding strings is a loop per element: off the loop when there are many.
    cheap = size <= CHEAP_REQUEST_BYTES or not strings
    return v2.InferRequest(
        proto.model_name, proto.model_version, inputs, names, proto.id, signature, cheap
    )


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def _output_tensor(name: str, datatype: str, shape: tuple[int, ...]) -> bytes:
    """An ``InferOutputTensor`` (name 1, datatype 2, packed shape 3) as field 5 of the
    response; the same for every response of an output and shape, so it is kept."""
    key = (name, datatype, shape)
    encoded = _TENSORS.get(key)
    if encoded is None:
        dims = b"".join(encode_varint(d) for d in shape)
        body = _field(1, name.encode()) + _field(2, datatype.encode())
        if shape:  # protobuf leaves an empty packed field out
            body += _field(3, dims)
        encoded = _field(5, body)
        if len(_TENSORS) >= _MAX_CACHED:
            _TENSORS.clear()
        _TENSORS[key] = encoded
    return encoded


def infer_response(response: v2.InferResponse) -> bytes:
    """The serialized ``ModelInferResponse``, every output's data raw. Written as wire bytes
    (the fields in number order, as protobuf writes them): building the message costs more
    than a small model's run."""
    head_key = (response.model_name, response.model_version)
    head = _HEADS.get(head_key)
    if head is None:
        head = b"".join(_field(number, text.encode()) for number, text in enumerate(head_key, 1)
                        if text)
        if len(_HEADS) >= _MAX_CACHED:
            _HEADS.clear()
        _HEADS[head_key] = head
    parts = [head, _field(3, response.id.encode()) if response.id else b""]
    for output in response.outputs:
        parts.append(_output_tensor(output.name, output.datatype, output.array.shape))
    for output in response.outputs:
        data = v2.raw_bytes(output.array)
        parts.append(encode_varint(6 << 3 | 2) + encode_varint(len(data)))
        parts.append(data)
    return b"".join(parts)
