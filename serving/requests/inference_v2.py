"""The Open Inference Protocol (KServe v2, spoken by Triton) on the request layer: what its REST
and gRPC adapters share.

    adapter: wire ─▶ InferRequest (tensors as received) ─▶ infer ─▶ Dispatcher.predict
        ─▶ InferResponse (arrays with their v2 datatype) ─▶ wire

A request names a model, a version (``""``: the latest; digits: that version; anything else: a
version label such as ``stable``), optionally a signature (the request parameter
``signature_name``; ``serving_default`` otherwise), its inputs and the outputs it wants (none:
all of them). Everything else (batching, deadlines, cancellation, the tensor-size limit, the
checks of names and dtypes) is Predict's, through the same dispatcher.

An input arrives either as values (JSON ``data``, flat or nested; gRPC's typed ``contents``) or
as raw bytes (the binary tensor data extension; gRPC's ``raw_input_contents``): little-endian
elements, a byte per BOOL, and for BYTES each element as a 4-byte little-endian length and its
bytes. Its datatype must be the signature's (no conversions), and its data must fill its shape.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NamedTuple

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, NotFoundError, OpError, UnimplementedError
from runtime.saved_model import DEFAULT_SIGNATURE_KEY, Signature, TensorSpec
from runtime.tensor_codec import STRING_ELEMENT_BYTES, TensorBudget
from serving.requests.call_context import CallContext
from serving.requests.dispatcher import Dispatcher
from serving.servable import ManagerState, ServableManager, ServableRequest

SERVER_NAME = "graphserve"
# The protocol's extensions served: binary tensor data (REST) and the ``parameters`` fields.
EXTENSIONS = ("binary_tensor_data", "parameters")
PLATFORM = "tensorflow_savedmodel"  # Triton's name for a TensorFlow SavedModel
SIGNATURE_PARAMETER = "signature_name"

# TensorFlow's dtypes that the protocol has a datatype for.
DATATYPES: dict[DataType, str] = {
    DataType.DT_BOOL: "BOOL",
    DataType.DT_UINT8: "UINT8",
    DataType.DT_UINT16: "UINT16",
    DataType.DT_UINT32: "UINT32",
    DataType.DT_UINT64: "UINT64",
    DataType.DT_INT8: "INT8",
    DataType.DT_INT16: "INT16",
    DataType.DT_INT32: "INT32",
    DataType.DT_INT64: "INT64",
    DataType.DT_HALF: "FP16",
    DataType.DT_BFLOAT16: "BF16",
    DataType.DT_FLOAT: "FP32",
    DataType.DT_DOUBLE: "FP64",
    DataType.DT_STRING: "BYTES",
}
BY_DATATYPE: dict[str, DataType] = {name: dt for dt, name in DATATYPES.items()}


def server_version() -> str:
    try:
        return version("graphserve")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "0"


def datatype_of(dt: DataType) -> str:
    """The protocol's datatype for a TensorFlow dtype; ``""`` for one it has none for (complex
    numbers, quantized types, resources, variants)."""
    return DATATYPES.get(dt, "")


def numpy_dtype(datatype: str) -> np.dtype[Any]:
    """The array dtype of a protocol datatype (BYTES: object arrays of ``bytes``)."""
    dt = BY_DATATYPE.get(datatype)
    if dt is None:
        known = ", ".join(DATATYPES.values())
        raise InvalidArgumentError(f"unknown datatype '{datatype}': expected one of {known}")
    return dtypes.to_numpy(dt)


def version_request(name: str, model_version: str) -> ServableRequest:
    """The servable a (model name, version field) pair names."""
    if not name:
        raise InvalidArgumentError("the request names no model")
    if not model_version:
        return ServableRequest(name)
    if model_version.isdigit() and model_version.isascii():
        number = int(model_version)
        if number >= 2**63:
            raise InvalidArgumentError(f"model version {model_version} is out of range")
        return ServableRequest(name, number)
    return ServableRequest(name, label=model_version)


# -- tensors ------------------------------------------------------------------------------------


# The request and response types are NamedTuples: made for every request, and a tuple is
# built several times faster than a frozen dataclass.
class InferInput(NamedTuple):
    """One input as the transport received it: ``raw`` (binary data) or ``values`` (JSON data,
    nested or flat; gRPC typed contents), never both."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    raw: bytes | memoryview | None = None
    values: Any = None


def element_count(shape: Sequence[int], name: str) -> int:
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"input '{name}' has a negative dimension in shape {list(shape)}")
    return math.prod(shape)


def split_bytes(raw: bytes | memoryview, count: int, name: str) -> list[bytes]:
    """BYTES elements from their binary form: each a 4-byte little-endian length and its bytes."""
    view = memoryview(raw)
    elements: list[bytes] = []
    offset = 0
    while offset < len(view):
        if offset + 4 > len(view):
            raise InvalidArgumentError(
                f"input '{name}': BYTES data ends inside an element's 4-byte length"
            )
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise InvalidArgumentError(
                f"input '{name}': a BYTES element of {length} bytes runs past the end of the data"
            )
        elements.append(bytes(view[offset : offset + length]))
        offset += length
        if len(elements) > count:
            break
    if len(elements) != count:
        raise InvalidArgumentError(
            f"input '{name}': {len(elements) if len(elements) <= count else 'more'} BYTES "
            f"elements given where its shape holds {count}"
        )
    return elements


def join_bytes(array: np.ndarray) -> bytes:
    """A BYTES tensor in binary form (row-major elements, each length-prefixed)."""
    parts: list[bytes] = []
    for value in array.reshape(-1).tolist():
        data = value if isinstance(value, bytes) else str(value).encode()
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def raw_bytes(array: np.ndarray) -> bytes:
    """A tensor's binary form: little-endian elements in row-major order, or ``join_bytes``."""
    if array.dtype.kind == "O":
        return join_bytes(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array).tobytes()


def _object_array(values: list[bytes]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


# The kinds of values (numpy's dtype.kind) each kind of datatype takes without conversion.
_ACCEPTED_KINDS = {"b": "b", "i": "iu", "u": "iu", "f": "iuf", "V": "iuf"}
_KIND_NAMES = {"b": "booleans", "i": "integers", "u": "integers", "f": "numbers with fractions",
               "U": "strings", "O": "values of mixed types"}


def _from_values(tensor: InferInput, dtype: np.dtype[Any], count: int) -> np.ndarray:
    """An input's array from values, refusing what would only fit by conversion (a float for
    an integer, a number for a BOOL, an integer out of range)."""
    name, datatype = tensor.name, tensor.datatype
    values = tensor.values
    if isinstance(values, np.ndarray):  # gRPC's typed contents, already numeric
        flat = values.reshape(-1)
    else:
        try:
            flat = np.asarray(values, dtype=object if dtype == object else None).reshape(-1)
        except (ValueError, TypeError) as err:
            raise InvalidArgumentError(
                f"input '{name}': data is not a regular array of {datatype} values"
            ) from err
    if flat.size != count:
        raise InvalidArgumentError(
            f"input '{name}': {flat.size} values given where its shape "
            f"{list(tensor.shape)} holds {count}"
        )
    if dtype == object:
        encoded: list[bytes] = []
        for value in flat.tolist():
            if isinstance(value, str):
                encoded.append(value.encode())
            elif isinstance(value, bytes):
                encoded.append(value)
            else:
                raise InvalidArgumentError(
                    f"input '{name}': BYTES data holds {type(value).__name__} values, not strings"
                )
        return _object_array(encoded)
    kind = flat.dtype.kind
    if count == 0:
        return np.empty(0, dtype=dtype)
    if kind not in _ACCEPTED_KINDS[dtype.kind]:
        held = _KIND_NAMES.get(kind, "values of another type")
        raise InvalidArgumentError(f"input '{name}': {datatype} data holds {held}")
    if dtype.kind in "iu" and kind in "iu":
        info = np.iinfo(dtype)
        low, high = int(flat.min()), int(flat.max())
        if low < info.min or high > info.max:
            raise InvalidArgumentError(f"input '{name}': a value is out of range for {datatype}")
    return flat.astype(dtype)


_LITTLE_ENDIAN = sys.byteorder == "little"


def decode_input(
    tensor: InferInput, expected: np.dtype[Any], budget: TensorBudget | None
) -> np.ndarray:
    """The input's array, charged against ``budget`` before it is built."""
    count = element_count(tensor.shape, tensor.name)
    strings = expected.kind == "O"
    if budget is not None:
        per_element = STRING_ELEMENT_BYTES if strings else expected.itemsize
        raw_size = len(tensor.raw) if tensor.raw is not None and strings else 0
        budget.charge(count * per_element + raw_size, tensor.shape,
                      int(BY_DATATYPE[tensor.datatype]))
    if tensor.raw is not None:
        if strings:
            return _object_array(split_bytes(tensor.raw, count, tensor.name)).reshape(tensor.shape)
        size = count * expected.itemsize
        if len(tensor.raw) != size:
            raise InvalidArgumentError(
                f"input '{tensor.name}': {len(tensor.raw)} bytes of data given where its shape "
                f"{list(tensor.shape)} of {tensor.datatype} takes {size}"
            )
        if _LITTLE_ENDIAN:  # the wire's byte order: the bytes are the array as they are
            return np.frombuffer(tensor.raw, expected).reshape(tensor.shape)
        little = expected.newbyteorder("<")
        return np.frombuffer(tensor.raw, little).astype(expected).reshape(tensor.shape)
    if tensor.values is None:
        raise InvalidArgumentError(f"input '{tensor.name}' has no data")
    return _from_values(tensor, expected, count).reshape(tensor.shape)


_EXPECTED = "_v2_expected_inputs"


def _expected_inputs(signature: Signature) -> dict[str, tuple[str, np.dtype[Any]]]:
    """Each input's datatype and array dtype, worked out once per signature (kept on the
    signature object, as its own ``input_dtypes`` are)."""
    store: dict[str, Any] = signature.__dict__
    cached: dict[str, tuple[str, np.dtype[Any]]] | None = store.get(_EXPECTED)
    if cached is None:
        cached = {
            alias: (datatype_of(spec.dtype), dtypes.to_numpy(spec.dtype))
            for alias, spec in signature.inputs.items()
        }
        store[_EXPECTED] = cached
    return cached


class InferInputs:
    """A request's inputs as the dispatcher's input decoder."""

    __slots__ = ("_cheap", "model", "tensors")

    def __init__(self, model: str, tensors: Sequence[InferInput], cheap: bool) -> None:
        self.model = model
        self.tensors = tensors
        self._cheap = cheap

    def cheap(self) -> bool:
        return self._cheap

    def decode(self, signature: Signature, max_bytes: int | None) -> dict[str, np.ndarray]:
        budget = TensorBudget.of(max_bytes)
        arrays: dict[str, np.ndarray] = {}
        for tensor in self.tensors:
            if tensor.name in arrays:
                raise InvalidArgumentError(f"input '{tensor.name}' is given more than once")
            expected = _expected_inputs(signature).get(tensor.name)
            if expected is None:
                # Said here: Predict's check names an extra input only when the count is off.
                raise InvalidArgumentError(
                    f"model '{self.model}' has no input '{tensor.name}' in signature "
                    f"'{signature.key}' (its inputs: {', '.join(sorted(signature.inputs))})"
                )
            wanted, array_dtype = expected
            if tensor.datatype != wanted:
                numpy_dtype(tensor.datatype)  # an unknown datatype is said as such
                raise InvalidArgumentError(
                    f"input '{tensor.name}' has datatype {tensor.datatype}, but model "
                    f"'{self.model}' expects {wanted or signature.inputs[tensor.name].dtype.name}"
                )
            arrays[tensor.name] = decode_input(tensor, array_dtype, budget)
        return arrays

    def unknown_signature(self, key: str) -> OpError:
        return InvalidArgumentError(
            f"model '{self.model}' has no signature '{key}' (the request parameter "
            f"'{SIGNATURE_PARAMETER}' names one)"
        )


# -- infer --------------------------------------------------------------------------------------


class InferRequest(NamedTuple):
    model_name: str
    model_version: str  # "" (latest), a number, or a label
    inputs: Sequence[InferInput]
    outputs: Sequence[str] = ()  # requested outputs; none: all
    id: str = ""
    signature_name: str = ""
    cheap: bool = True  # decoding may be done on the event loop


class InferOutput(NamedTuple):
    name: str
    datatype: str
    array: np.ndarray

    @property
    def shape(self) -> list[int]:
        return list(self.array.shape)


class InferResponse(NamedTuple):
    model_name: str
    model_version: str  # the version that ran
    id: str
    outputs: list[InferOutput]


def signature_parameter(parameters: Mapping[str, Any]) -> str:
    value = parameters.get(SIGNATURE_PARAMETER, "")
    if not isinstance(value, str):
        raise InvalidArgumentError(f"the parameter '{SIGNATURE_PARAMETER}' must be a string")
    return value


async def infer(dispatcher: Dispatcher, request: InferRequest, call: CallContext) -> InferResponse:
    servable = version_request(request.model_name, request.model_version)
    response = await dispatcher.predict(
        servable.name, servable.version, servable.label, request.signature_name,
        InferInputs(request.model_name, request.inputs, request.cheap), tuple(request.outputs),
        call,
    )
    outputs = []
    for name, array in response.outputs.items():
        datatype = _ARRAY_DATATYPES.get(array.dtype)
        if datatype is None:
            datatype = _ARRAY_DATATYPES[array.dtype] = datatype_of(_dtype_of(array))
        if not datatype:
            raise UnimplementedError(
                f"output '{name}' has dtype {array.dtype}, which the protocol has no datatype for"
            )
        outputs.append(InferOutput(name, datatype, array))
    if request.outputs:  # in the order asked for
        order = {name: i for i, name in enumerate(request.outputs)}
        outputs.sort(key=lambda o: order[o.name])
    return InferResponse(
        request.model_name, str(response.model_spec.version), request.id, outputs
    )


# An output array's dtype -> its datatype ("" for none); numpy's dtypes are few, so it stays small.
_ARRAY_DATATYPES: dict[np.dtype[Any], str] = {}


def _dtype_of(array: np.ndarray) -> DataType:
    if array.dtype.kind == "O":
        return DataType.DT_STRING
    try:
        return dtypes.from_numpy(array.dtype)
    except ValueError:
        return DataType.DT_INVALID


# -- health and metadata ------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorMetadata:
    name: str
    datatype: str
    shape: list[int]  # -1 for a dimension of any size


@dataclass(frozen=True)
class ModelMetadata:
    name: str
    versions: list[str]  # every AVAILABLE version, newest first
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


def _tensors(specs: Mapping[str, TensorSpec]) -> list[TensorMetadata]:
    # An unknown rank has no v2 form: said as one dimension of any size.
    return [
        TensorMetadata(alias, datatype_of(spec.dtype) or spec.dtype.name,
                       list(spec.shape) if spec.shape is not None else [-1])
        for alias, spec in sorted(specs.items())
    ]


def available_versions(manager: ServableManager, name: str) -> list[int]:
    return sorted(
        (s.id.version for s in manager.version_states(name) if s.state == ManagerState.AVAILABLE),
        reverse=True,
    )


def model_metadata(
    manager: ServableManager, name: str, model_version: str, signature_name: str = ""
) -> ModelMetadata:
    """The model's metadata, with the inputs and outputs of its ``serving_default`` signature
    (or ``signature_name``) in the version named (the latest when none)."""
    with manager.handle(version_request(name, model_version)) as handle:
        key = signature_name or DEFAULT_SIGNATURE_KEY
        signature = handle.servable.signatures.get(key)
        if signature is None:
            raise NotFoundError(f"model '{name}' has no signature '{key}'")
        inputs, outputs = _tensors(signature.inputs), _tensors(signature.outputs)
        served = handle.id.version
    versions = available_versions(manager, name) or [served]
    return ModelMetadata(name, [str(v) for v in versions], PLATFORM, inputs, outputs)


def model_ready(manager: ServableManager, name: str, model_version: str) -> bool:
    """Whether the version named (any, when none) is AVAILABLE to serve."""
    try:
        with manager.handle(version_request(name, model_version)):
            return True
    except OpError:
        return False
