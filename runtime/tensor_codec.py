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

Limits, all checked before anything the size of the tensor is allocated (the fill rule above
lets a message of a few bytes describe a tensor of terabytes):

* At most ``MAX_DIMS`` (64, numpy's limit) dimensions, and at most 2**63-1 elements; beyond
  either is INVALID_ARGUMENT.
* ``to_ndarray(proto, max_bytes=...)`` bounds the decoded size. An ``int`` is a limit for that
  one tensor; a ``TensorBudget`` is one limit shared by all the tensors of a request: create
  one per request and pass it to every ``to_ndarray`` call, and each decoded tensor's size is
  subtracted from its ``remaining``. A tensor that does not fit is RESOURCE_EXHAUSTED. The size
  charged is ``elements * itemsize`` (whether the result is a view of the proto's bytes or a
  copy); a string tensor is charged the bytes the proto holds (its ``tensor_content``, or its
  ``string_val`` values) plus ``STRING_ELEMENT_BYTES`` per element (values repeated by the fill
  rule are shared, not copied). ``None`` (the default) means no limit.
* Whatever the limit, a tensor numpy cannot address is refused up front, and a ``MemoryError``
  while decoding becomes RESOURCE_EXHAUSTED in TensorFlow's wording (``OOM when allocating
  tensor with shape[...] and type float``).

Arrays decoded from ``tensor_content`` (or ``float8_val``) are read-only views over the proto's
bytes (no copy); arrays decoded from the other typed fields are fresh. Callers must treat every result as immutable, which
is the runtime's rule for tensors anyway. String tensors are numpy object arrays of ``bytes``.
Resource and variant tensors cannot be represented and raise ``UnimplementedError``.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from protos.tensorflow.core.framework import tensor_pb2
from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import (
    InvalidArgumentError,
    ResourceExhaustedError,
    UnimplementedError,
    from_memory_error,
)

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
# numpy cannot make an array of more dimensions than this.
MAX_DIMS = 64
# What a string element costs beyond its bytes: the object array's pointer to it.
STRING_ELEMENT_BYTES = 8


def shape_text(shape: Sequence[int]) -> str:
    """``[2,3]``: a shape as TensorFlow's messages print it."""
    return "[" + ",".join(map(str, shape)) + "]"


def check_rank(rank: int) -> None:
    """INVALID_ARGUMENT for a tensor of more than ``MAX_DIMS`` dimensions."""
    if rank > MAX_DIMS:
        raise InvalidArgumentError(
            f"Tensor has {rank} dimensions, more than the {MAX_DIMS} allowed"
        )


def array_nbytes(array: np.ndarray) -> int:
    """What a decoded tensor is charged against a ``TensorBudget``: its bytes, or for a string
    (object) array the bytes of its values plus ``STRING_ELEMENT_BYTES`` per element."""
    if array.dtype != object:
        return int(array.nbytes)
    return sum(map(len, array.reshape(-1).tolist())) + array.size * STRING_ELEMENT_BYTES


class TensorBudget:
    """The bytes a request's decoded tensors may still take, shared by all of its tensors.

    Pass the same budget as ``max_bytes`` to each decode of one request; every decoded tensor
    is charged before it is built, and one that does not fit is RESOURCE_EXHAUSTED.
    Not thread-safe: one request decodes its tensors one at a time.
    """

    __slots__ = ("limit", "remaining")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"a tensor budget cannot be negative, got {limit}")
        self.limit = limit
        self.remaining = limit

    @classmethod
    def of(cls, max_bytes: int | TensorBudget | None) -> TensorBudget | None:
        """``max_bytes`` as a budget: a shared budget itself, an ``int`` a fresh one."""
        if max_bytes is None or isinstance(max_bytes, TensorBudget):
            return max_bytes
        return cls(max_bytes)

    def charge(self, nbytes: int, shape: Sequence[int], dtype: int) -> None:
        """Take ``nbytes`` for a tensor of ``shape`` and ``dtype``, or raise
        ResourceExhaustedError (leaving the budget as it was)."""
        if nbytes > self.remaining:
            if self.remaining == self.limit:
                bound = f"the {self.limit} allowed per request"
            else:
                bound = f"the {self.remaining} left of the {self.limit} allowed per request"
            raise ResourceExhaustedError(
                f"Tensor of shape {shape_text(shape)} and type {dtypes.short_name(dtype)} "
                f"needs {nbytes} bytes, more than {bound}"
            )
        self.remaining -= nbytes


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
    """The shape a TensorProto describes; too many, negative or overflowing dimensions are
    errors."""
    check_rank(len(proto.tensor_shape.dim))
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


def to_ndarray(
    proto: TensorProto, *, max_bytes: int | TensorBudget | None = None
) -> np.ndarray:
    """Decode a TensorProto the way TensorFlow's runtime does (see the module docstring).

    ``max_bytes``: a limit on this tensor's decoded size, or a ``TensorBudget`` shared with the
    other tensors of the request, charged with this one's size; ``None`` for no limit.
    """
    budget = TensorBudget.of(max_bytes)
    content = proto.tensor_content
    if content:
        # The common case of a request, first and cheaply: raw bytes that exactly fill a
        # well-formed shape are a read-only view of them. Anything else takes the checks below.
        np_dtype = RAW_CONTENT_DTYPES.get(proto.dtype)
        if np_dtype is not None:
            shape = tuple([d.size for d in proto.tensor_shape.dim])
            if (
                len(shape) <= MAX_DIMS
                and (not shape or min(shape) >= 0)
                and math.prod(shape) * np_dtype.itemsize == len(content)
            ):
                if budget is not None:
                    budget.charge(len(content), shape, proto.dtype)
                return np.frombuffer(content, np_dtype).reshape(shape)
    dt = _dtype_of(proto)
    shape = proto_shape(proto)
    np_dtype = dtypes.to_numpy(dt)
    n = math.prod(shape)
    if content and n:  # TensorFlow ignores the content of a tensor with no elements
        _check_content(dt, np_dtype, content, shape, n)
    if budget is not None:
        budget.charge(_decoded_nbytes(proto, dt, np_dtype, n), shape, dt)
    _check_addressable(shape, n, dt, np_dtype)
    try:
        if n == 0:
            return _empty(np_dtype, shape)
        if content:
            return _from_content(dt, np_dtype, content, shape, n)
        return _from_fields(proto, dt, np_dtype, n).reshape(shape)
    except MemoryError as err:
        raise from_memory_error(err, _tensor_text(shape, dt)) from err


def _tensor_text(shape: Sequence[int], dt: DataType) -> str:
    return f"tensor with shape{shape_text(shape)} and type {dtypes.short_name(dt)}"


def _check_addressable(
    shape: tuple[int, ...], n: int, dt: DataType, np_dtype: np.dtype
) -> None:
    """Refuse what numpy cannot even try to allocate (it raises ValueError, not MemoryError).

    numpy multiplies the nonzero dimensions, so a shape with no elements can still be refused.
    """
    span = math.prod(d for d in shape if d) * np_dtype.itemsize
    if span <= sys.maxsize:
        return
    if n == 0:
        raise InvalidArgumentError(
            f"TensorProto shape {list(shape)} of type {dtypes.short_name(dt)} cannot be "
            f"represented: its nonzero dimensions span {span} bytes"
        )
    raise ResourceExhaustedError(f"OOM when allocating {_tensor_text(shape, dt)}")


def _decoded_nbytes(proto: TensorProto, dt: DataType, np_dtype: np.dtype, n: int) -> int:
    if dt != DataType.DT_STRING or n == 0:
        return n * np_dtype.itemsize
    if proto.tensor_content:
        payload = len(proto.tensor_content)
    else:
        # Values the fill rule repeats share the last one's bytes.
        payload = sum(map(len, itertools.islice(proto.string_val, n)))
    return payload + n * STRING_ELEMENT_BYTES


def _check_content(
    dt: DataType, np_dtype: np.dtype, content: bytes, shape: tuple[int, ...], n: int
) -> None:
    """The size checks on ``tensor_content`` that need no decoding."""
    if dt == DataType.DT_STRING:
        if n > len(content):  # every element takes at least a one-byte length
            raise _string_list_error(n, len(content))
        return
    expected = n * np_dtype.itemsize
    if len(content) != expected:
        raise InvalidArgumentError(
            f"TensorProto tensor_content for {dt.name} shape {list(shape)} has {len(content)} "
            f"bytes; expected {expected}"
        )


def _empty(np_dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if np_dtype == object:
        out = np.empty(shape, dtype=object)
        out.fill(b"")
        return out
    return np.zeros(shape, dtype=np_dtype)


def _from_content(
    dt: DataType, np_dtype: np.dtype, content: bytes, shape: tuple[int, ...], n: int
) -> np.ndarray:
    """``content`` has passed ``_check_content``."""
    if dt == DataType.DT_STRING:
        return decode_string_list(content, n).reshape(shape)
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
    out = np.empty(n, dtype=values.dtype)  # one allocation of the final size
    out[:k] = values
    out[k:] = values[-1]
    return out


def _from_fields(proto: TensorProto, dt: DataType, np_dtype: np.dtype, n: int) -> np.ndarray:
    if dt == DataType.DT_STRING:
        strings = list(proto.string_val[:n])
        out = np.empty(n, dtype=object)
        out[: len(strings)] = strings
        out[len(strings) :].fill(strings[-1] if strings else b"")
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
    size = len(content)
    if n > size:  # every element takes at least a one-byte length
        raise _string_list_error(n, size)
    lengths = []
    pos = 0
    for _ in range(n):
        value = shift = 0
        while True:
            if pos >= size or shift > 28:
                raise _string_list_error(n, size)
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


def _string_list_error(n: int, size: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"TensorProto string tensor_content is truncated or malformed: could not read "
        f"{n} lengths from {size} bytes"
    )


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
