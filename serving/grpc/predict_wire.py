"""A ``PredictResponse`` written straight to its wire bytes, without building the message.

On the hot path, building protobuf objects field by field and serializing them costs more
than the model run of a small model. The bytes that frame an output tensor (its map entry, the
alias, dtype and shape, the tag and length of the values) are the same for every response of a
given output and shape, so they are made once and kept; a response is then, per output, that
prefix and the values' raw little-endian bytes, and the model spec's bytes (also kept).

Raw bytes are exactly the encoding of ``tensor_content``, and of the packed typed fields whose
elements have a fixed width: ``float_val``, ``double_val``, ``scomplex_val``, ``dcomplex_val``
and ``bool_val`` (a varint 0 or 1 is one byte). Any other output (integers and halves in their
varint fields, strings) is encoded by protobuf (``proto_convert.tensor_proto``), so every
response parses to the same message ``proto_convert.predict_response`` builds (and with one
output, is byte for byte what protobuf writes for it).
"""

from __future__ import annotations

import numpy as np

from protos.tensorflow_serving.apis import predict_pb2
from runtime import dtypes
from runtime.dtypes import DataType
from runtime.tensor_codec import encode_varint
from serving.requests import proto_convert as convert
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import PredictResponse

# numpy dtype -> (DataType, typed field number whose packed encoding is the raw bytes)
_TYPED_RAW: dict[np.dtype, tuple[DataType, int]] = {
    np.dtype(np.float32): (DataType.DT_FLOAT, 5),
    np.dtype(np.float64): (DataType.DT_DOUBLE, 6),
    np.dtype(np.complex64): (DataType.DT_COMPLEX64, 9),
    np.dtype(np.complex128): (DataType.DT_COMPLEX128, 12),
    np.dtype(np.bool_): (DataType.DT_BOOL, 11),
}
_TENSOR_CONTENT = 4
# With --enable_serialization_as_tensor_content every fixed-width dtype is raw bytes, except
# the 4-bit integers, which TensorFlow writes to int_val.
_NOT_CONTENT = frozenset({DataType.DT_STRING, DataType.DT_INT4, DataType.DT_UINT4})
_MAX_CACHED = 4096  # shapes and names come from clients: forget rather than grow unbounded


def _length_delimited(field: int, payload: bytes) -> bytes:
    return encode_varint(field << 3 | 2) + encode_varint(len(payload)) + payload


def _shape(shape: tuple[int, ...]) -> bytes:
    """A TensorShapeProto (present even for a scalar, as TensorFlow writes it)."""
    return b"".join(_length_delimited(2, b"\x08" + encode_varint(d) if d else b"") for d in shape)


class PredictResponseWriter:
    """Writes responses; keeps the framing it has made (one writer per server)."""

    def __init__(self, tensor_content: bool = False) -> None:
        self.tensor_content = tensor_content
        self._specs: dict[tuple[str, int | None, str], bytes] = {}
        self._prefixes: dict[tuple[str, np.dtype, tuple[int, ...]], bytes | None] = {}

    def write(self, response: PredictResponse) -> bytes:
        parts = []
        for alias, array in response.outputs.items():
            key = (alias, array.dtype, array.shape)
            try:
                prefix = self._prefixes[key]
            except KeyError:
                prefix = self._prefix(key)
            if prefix is None:  # not raw bytes: protobuf's encoding
                tensor = convert.tensor_proto(array, tensor_content=self.tensor_content)
                parts.append(_map_entry(alias, tensor.SerializeToString()))
            else:
                parts.append(prefix)
                parts.append(array.tobytes())  # C order, as TensorFlow's row-major values
        parts.append(self._spec(response.model_spec))  # field 2 after field 1, as protobuf
        return b"".join(parts)

    def _spec(self, spec: ModelSpec) -> bytes:
        key = (spec.name, spec.version, spec.signature_name)  # what the response holds
        encoded = self._specs.get(key)
        if encoded is None:
            message = predict_pb2.PredictResponse()
            convert.fill_model_spec(message.model_spec, spec)
            encoded = message.SerializeToString()
            if len(self._specs) >= _MAX_CACHED:
                self._specs.clear()
            self._specs[key] = encoded
        return encoded

    def _prefix(self, key: tuple[str, np.dtype, tuple[int, ...]]) -> bytes | None:
        """Everything of the map entry before the values' bytes; None: not raw bytes."""
        alias, dtype, shape = key
        if self.tensor_content:
            try:
                dt: DataType | None = dtypes.from_numpy(dtype)
            except ValueError:
                dt = None
            dt = None if dt in _NOT_CONTENT else dt
            field = _TENSOR_CONTENT
        else:
            dt, field = _TYPED_RAW.get(dtype, (None, 0))
        prefix = None
        if dt is not None:
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            tensor_head = b"\x08" + encode_varint(int(dt)) + _length_delimited(2, _shape(shape))
            if size:  # an empty tensor has no values at all
                tensor_head += encode_varint(field << 3 | 2) + encode_varint(size)
            entry_head = _length_delimited(1, alias.encode()) + b"\x12" + encode_varint(
                len(tensor_head) + size
            ) + tensor_head
            prefix = b"\x0a" + encode_varint(len(entry_head) + size) + entry_head
        if len(self._prefixes) >= _MAX_CACHED:
            self._prefixes.clear()
        self._prefixes[key] = prefix
        return prefix


def _map_entry(alias: str, tensor: bytes) -> bytes:
    return _length_delimited(1, _length_delimited(1, alias.encode()) + _length_delimited(2, tensor))
