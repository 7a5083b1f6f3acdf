"""TensorProto <-> numpy conversion, following TensorFlow's ``Tensor::FromProto`` semantics.

Decoding rules (what TensorFlow's C++ runtime does when a ``Const`` node or a request is parsed):

* ``tensor_content``, when non-empty, wins over every typed field. It holds the elements as raw
  little-endian bytes and must be exactly ``num_elements * itemsize`` long. Bool bytes must be 0
  or 1. String tensors use TensorFlow's string-list encoding: one varint32 length per element,
  then all the bytes, with nothing left over.
* Otherwise the typed field for the dtype is read (``float_val``, ``int_val``, ``half_val``, ...).
  Fewer values than elements repeat the last value; no values at all mean zeros (empty strings);
  extra values are ignored. Narrow integer types are truncated from ``int_val`` as C++ casts do.
  ``half_val`` holds float16/bfloat16 bit patterns; ``float8_val`` holds one byte per element;
  ``scomplex_val``/``dcomplex_val`` hold (real, imag) pairs.
* The shape is the listed dimensions. TensorFlow ignores ``unknown_rank`` here (a proto marked
  unknown-rank with no dimensions decodes as a scalar), and so do we; negative dimensions are an
  error.

Arrays decoded from ``tensor_content`` (or ``float8_val``) are read-only views over the proto's
bytes (no copy); arrays decoded from the other typed fields are fresh. Callers must treat every result as immutable, which
is the runtime's rule for tensors anyway. String tensors are numpy object arrays of ``bytes``.
Resource and variant tensors cannot be represented and raise ``UnimplementedError``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from protos.tensorflow.core.framework import tensor_pb2
from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, UnimplementedError

TensorProto = tensor_pb2.TensorProto

# TensorFlow stores tensor bytes in host order and every supported host is little-endian.
if sys.byteorder != "little":  # pragma: no cover - no big-endian CI
    raise ImportError("runtime.tensor_codec assumes a little-endian host")

_UNREPRESENTABLE = (DataType.DT_RESOURCE, DataType.DT_VARIANT, DataType.DT_INVALID)

# dtype -> name of the TensorProto repeated field holding its values (TensorFlow's ProtoHelper).
_INT_VAL_TYPES = frozenset(
    {
        DataType.DT_INT32,
        DataType.DT_INT16,
        DataType.DT_INT8,
        DataType.DT_UINT8,
        DataType.DT_UINT16,
        DataType.DT_QINT8,
        DataType.DT_QUINT8,
        DataType.DT_QINT16,
        DataType.DT_QUINT16,
        DataType.DT_QINT32,
        DataType.DT_INT4,
        DataType.DT_UINT4,
    }
)
_SIMPLE_FIELDS: dict[DataType, str] = {
    DataType.DT_FLOAT: "float_val",
    DataType.DT_DOUBLE: "double_val",
    DataType.DT_INT64: "int64_val",
    DataType.DT_UINT32: "uint32_val",
    DataType.DT_UINT64: "uint64_val",
    DataType.DT_BOOL: "bool_val",
    **{dt: "int_val" for dt in _INT_VAL_TYPES},
}
# Stored one element per byte in memory, but TensorFlow writes them to protos through int_val.
_SUB_BYTE_TYPES = frozenset({DataType.DT_INT4, DataType.DT_UINT4})
_HALF_TYPES = frozenset({DataType.DT_HALF, DataType.DT_BFLOAT16})
_FLOAT8_TYPES = frozenset({DataType.DT_FLOAT8_E5M2, DataType.DT_FLOAT8_E4M3FN})
_COMPLEX_FIELDS = {DataType.DT_COMPLEX64: "scomplex_val", DataType.DT_COMPLEX128: "dcomplex_val"}
# numpy dtype of one value in a typed field (before conversion to the tensor's dtype).
_FIELD_NUMPY = {
    "float_val": np.float32,
    "double_val": np.float64,
    "int_val": np.int32,
    "int64_val": np.int64,
    "uint32_val": np.uint32,
    "uint64_val": np.uint64,
    "bool_val": np.bool_,
}

# TensorFlow's TensorShape limit: the element count must fit in int64.
_MAX_ELEMENTS = 2**63 - 1


def _dtype_of(proto: TensorProto) -> DataType:
    try:
        dt = DataType.of(proto.dtype)
    except ValueError as err:
        raise InvalidArgumentError(f"TensorProto has unknown dtype {proto.dtype}") from err
    if dt in _UNREPRESENTABLE:
        if dt == DataType.DT_INVALID:
            raise InvalidArgumentError("TensorProto has dtype DT_INVALID")
        raise UnimplementedError(f"cannot decode a {dt.name} TensorProto into an array")
    try:
        dtypes.to_numpy(dt)
    except ValueError as err:
        raise UnimplementedError(f"cannot decode a {dt.name} TensorProto: {err}") from err
    return dt


def proto_shape(proto: TensorProto) -> tuple[int, ...]:
    """The shape a TensorProto describes; negative or overflowing dimensions are errors."""
    shape = tuple(int(d.size) for d in proto.tensor_shape.dim)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"TensorProto shape {list(shape)} has a negative dimension")
    if math.prod(shape) > _MAX_ELEMENTS:
        raise InvalidArgumentError(f"TensorProto shape {list(shape)} has too many elements")
    return shape


# dtype number -> numpy dtype, for the dtypes whose tensor_content is the array's raw bytes.
RAW_CONTENT_DTYPES: dict[int, np.dtype] = {
    int(dt): dtypes.to_numpy(dt)
    for dt in (
        DataType.DT_FLOAT, DataType.DT_DOUBLE, DataType.DT_INT32, DataType.DT_INT64,
        DataType.DT_UINT8, DataType.DT_INT8, DataType.DT_INT16, DataType.DT_UINT16,
        DataType.DT_UINT32, DataType.DT_UINT64, DataType.DT_HALF, DataType.DT_BFLOAT16,
        DataType.DT_COMPLEX64, DataType.DT_COMPLEX128,
    )
}


def to_ndarray(proto: TensorProto) -> np.ndarray:
    """Decode a TensorProto the way TensorFlow's runtime does (see the module docstring)."""
    content = proto.tensor_content
    if content:
        # The common case of a request, first and cheaply: raw bytes that exactly fill a
        # well-formed shape are a read-only view of them. Anything else takes the checks below.
        np_dtype = RAW_CONTENT_DTYPES.get(proto.dtype)
        if np_dtype is not None:
            shape = tuple([d.size for d in proto.tensor_shape.dim])
            if (not shape or min(shape) >= 0) and math.prod(shape) * np_dtype.itemsize == len(
                content
            ):
                return np.frombuffer(content, np_dtype).reshape(shape)
    dt = _dtype_of(proto)
    shape = proto_shape(proto)
    np_dtype = dtypes.to_numpy(dt)
    n = math.prod(shape)
    if n == 0:
        return _empty(np_dtype, shape)
    content = proto.tensor_content
    if content:
        return _from_content(dt, np_dtype, content, shape, n)
    return _from_fields(proto, dt, np_dtype, n).reshape(shape)


def _empty(np_dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if np_dtype == object:
        out = np.empty(shape, dtype=object)
        out.fill(b"")
        return out
    return np.zeros(shape, dtype=np_dtype)


def _from_content(
    dt: DataType, np_dtype: np.dtype, content: bytes, shape: tuple[int, ...], n: int
) -> np.ndarray:
    if dt == DataType.DT_STRING:
        return decode_string_list(content, n).reshape(shape)
    expected = n * np_dtype.itemsize
    if len(content) != expected:
        raise InvalidArgumentError(
            f"TensorProto tensor_content for {dt.name} shape {list(shape)} has {len(content)} "
            f"bytes; expected {expected}"
        )
    if dt == DataType.DT_BOOL:
        raw = np.frombuffer(content, dtype=np.uint8)
        if raw.max() > 1:
            raise InvalidArgumentError("TensorProto tensor_content for DT_BOOL has a byte not 0/1")
    return np.frombuffer(content, dtype=np_dtype).reshape(shape)


def _fill(values: np.ndarray, n: int, np_dtype: np.dtype) -> np.ndarray:
    """TensorFlow's rule: no values -> zeros; fewer -> repeat the last; more -> first n."""
    k = values.shape[0]
    if k == 0:
        return np.zeros(n, dtype=np_dtype)
    if k >= n:
        return values[:n]
    return np.concatenate([values, np.full(n - k, values[-1], dtype=values.dtype)])


def _from_fields(proto: TensorProto, dt: DataType, np_dtype: np.dtype, n: int) -> np.ndarray:
    if dt == DataType.DT_STRING:
        strings = list(proto.string_val[:n])
        if strings and len(strings) < n:
            strings.extend([strings[-1]] * (n - len(strings)))
        out = np.empty(n, dtype=object)
        out[: len(strings)] = strings
        if not strings:
            out.fill(b"")
        return out
    if dt in _HALF_TYPES:
        # np.array over a whole repeated field is a fast bulk copy; slicing it first is not.
        bits = np.array(proto.half_val, dtype=np.int32)[:n].astype(np.uint16)
        return _fill(bits, n, np.dtype(np.uint16)).view(np_dtype)
    if dt in _FLOAT8_TYPES:
        raw = np.frombuffer(proto.float8_val[:n], dtype=np.uint8)
        return _fill(raw, n, np.dtype(np.uint8)).view(np_dtype)
    if dt in _COMPLEX_FIELDS:
        parts = getattr(proto, _COMPLEX_FIELDS[dt])
        k = min(len(parts) // 2, n)
        part_dtype = np.float32 if dt == DataType.DT_COMPLEX64 else np.float64
        pairs = np.array(parts, dtype=part_dtype)[: 2 * k].view(np_dtype)
        return _fill(pairs, n, np_dtype)
    field = _SIMPLE_FIELDS[dt]
    raw = np.array(getattr(proto, field), dtype=_FIELD_NUMPY[field])[:n]
    # C++ static_cast semantics: narrow integers wrap, which numpy's astype also does.
    return _fill(raw.astype(np_dtype, copy=False), n, np_dtype)


def encode_varint(value: int) -> bytes:
    """A non-negative int as a protobuf varint (also the length prefix of TensorFlow's
    string-list encoding)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_string_list(content: bytes, n: int) -> np.ndarray:
    """TensorFlow's string-list encoding: ``n`` varint32 lengths, then the concatenated bytes."""
    lengths = []
    pos = 0
    size = len(content)
    for _ in range(n):
        value = shift = 0
        while True:
            if pos >= size or shift > 28:
                raise InvalidArgumentError(
                    f"TensorProto string tensor_content is truncated or malformed: could not read "
                    f"{n} lengths from {size} bytes"
                )
            byte = content[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        lengths.append(value)
    if pos + sum(lengths) != size:
        raise InvalidArgumentError(
            f"TensorProto string tensor_content has {size - pos} bytes of data after the lengths; "
            f"the lengths add up to {sum(lengths)}"
        )
    out = np.empty(n, dtype=object)
    for i, length in enumerate(lengths):
        out[i] = content[pos : pos + length]
        pos += length
    return out


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview, np.bytes_)):
        return bytes(value)
    raise InvalidArgumentError(
        f"string tensors hold bytes or str; found element of type {type(value).__name__}"
    )


def _as_array(values: Any, target: np.dtype | None) -> np.ndarray:
    """``np.asarray`` that keeps Python bytes/str sequences as objects.

    A fixed-width numpy bytes array would silently drop trailing NUL bytes.
    """
    try:
        if target is not None and target != object:
            return np.asarray(values, dtype=target)
        arr = np.asarray(values)
        if arr.dtype.kind in "SU" and not isinstance(values, np.ndarray):
            arr = np.array(values, dtype=object)
        return arr
    except (TypeError, ValueError, OverflowError) as err:
        raise InvalidArgumentError(f"cannot convert values to a tensor: {err}") from err


def _coerce(values: Any, dtype: int | None) -> tuple[np.ndarray, DataType]:
    """Array and DataType for an input value, converting to ``dtype`` when it is given."""
    if dtype is None:
        arr = _as_array(values, None)
        try:
            dt = dtypes.from_numpy(arr.dtype)
        except ValueError as err:
            raise InvalidArgumentError(str(err)) from err
    else:
        dt = DataType.of(dtype)
        if dt in _UNREPRESENTABLE:
            raise UnimplementedError(f"cannot encode an array as a {dt.name} TensorProto")
        arr = _as_array(values, dtypes.to_numpy(dt))
    if dt == DataType.DT_STRING:
        strings = np.empty(arr.shape, dtype=object)
        strings.reshape(-1)[:] = [_as_bytes(v) for v in arr.reshape(-1).tolist()]
        arr = strings
    return arr, dt


def from_ndarray(
    array: Any, dtype: int | None = None, *, use_tensor_content: bool = True
) -> TensorProto:
    """Encode an array (anything ``np.asarray`` accepts) as a TensorProto.

    ``dtype`` (a DataType number) converts the values first; by default it is inferred from the
    numpy dtype (bytes/str/object arrays become DT_STRING). Numeric tensors go into
    ``tensor_content`` when ``use_tensor_content`` is true (compact, fast), else into the typed
    field TensorFlow's ``AsProtoField`` uses. String tensors always use ``string_val``, and
    int4/uint4 always use ``int_val``, as ``tf.make_tensor_proto`` does.
    """
    arr, dt = _coerce(array, dtype)
    proto = TensorProto(dtype=dt.name)
    proto.tensor_shape.SetInParent()  # TensorFlow always writes the shape, even for scalars
    for d in arr.shape:
        proto.tensor_shape.dim.add(size=int(d))
    if arr.size == 0:
        return proto
    if dt == DataType.DT_STRING:
        proto.string_val.extend(arr.reshape(-1).tolist())
    elif use_tensor_content and dt not in _SUB_BYTE_TYPES:
        proto.tensor_content = np.ascontiguousarray(arr).tobytes()
    else:
        _set_fields(proto, arr.reshape(-1), dt)
    return proto


def _set_fields(proto: TensorProto, flat: np.ndarray, dt: DataType) -> None:
    if dt in _HALF_TYPES:
        proto.half_val.extend(flat.view(np.uint16).tolist())
    elif dt in _FLOAT8_TYPES:
        proto.float8_val = flat.view(np.uint8).tobytes()
    elif dt in _COMPLEX_FIELDS:
        part = np.float32 if dt == DataType.DT_COMPLEX64 else np.float64
        getattr(proto, _COMPLEX_FIELDS[dt]).extend(flat.view(part).tolist())
    else:
        field = _SIMPLE_FIELDS[dt]
        getattr(proto, field).extend(flat.astype(_FIELD_NUMPY[field]).tolist())


def make_tensor_proto(
    values: Any,
    dtype: int | None = None,
    shape: Sequence[int] | None = None,
    *,
    use_tensor_content: bool = True,
) -> TensorProto:
    """Like ``tf.make_tensor_proto``: values plus an optional shape.

    With ``shape``, the values must have exactly that many elements (they are reshaped), or be a
    single value, which is stored once in the typed field and repeated by TensorFlow's fill rule.
    """
    arr, dt = _coerce(values, dtype)
    if shape is None:
        return from_ndarray(arr, dt, use_tensor_content=use_tensor_content)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"shape {list(shape)} has a negative dimension")
    n = math.prod(shape)
    if arr.size == n:
        return from_ndarray(arr.reshape(shape), dt, use_tensor_content=use_tensor_content)
    if arr.size != 1:
        raise InvalidArgumentError(
            f"{arr.size} values cannot fill shape {list(shape)} ({n} elements)"
        )
    if n == 0:
        return from_ndarray(np.empty(shape, dtype=arr.dtype), dt)
    proto = from_ndarray(arr.reshape(1), dt, use_tensor_content=False)
    del proto.tensor_shape.dim[:]
    for d in shape:
        proto.tensor_shape.dim.add(size=d)
    return proto
