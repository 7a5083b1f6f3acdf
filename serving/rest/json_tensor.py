"""One JSON value -> one tensor of a given dtype, by TensorFlow Serving's rules.

Regular numeric data takes a fast path (``np.asarray`` over the parsed lists, then a dtype and
range check); anything it cannot vouch for (strings, b64 objects, ragged lists, mixed types, a
JSON ``true``/``false`` anywhere in a numeric request) goes through the careful decoder, which
follows TensorFlow Serving's value-by-value rules and produces its exact error messages.

Bounds: a value nested deeper than a tensor can have dimensions (``MAX_DIMS``, counting the
``instances`` list in the row format) is INVALID_ARGUMENT before the careful decoder recurses
into it (numpy's own conversion on the fast path stops at the same 64), and every decoded tensor
is charged to the request's ``TensorBudget`` (if it has one) before its array is built, or right
after numpy built it from lists no bigger than the body.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.tensor_codec import STRING_ELEMENT_BYTES, TensorBudget, array_nbytes, check_rank
from serving.rest.json_text import debug_string, json_type_name

_INT32 = (-(2**31), 2**31)
_INT64 = (-(2**63), 2**63)
_UINT32 = (0, 2**32)
_UINT64 = (0, 2**64)
# dtype -> accepted JSON integer range (TensorFlow Serving stores the narrow ones in int_val).
_INT_RANGES = {
    DataType.DT_INT32: _INT32,
    DataType.DT_INT16: _INT32,
    DataType.DT_INT8: _INT32,
    DataType.DT_UINT8: _INT32,
    DataType.DT_INT64: _INT64,
    DataType.DT_UINT32: _UINT32,
    DataType.DT_UINT64: _UINT64,
}
_FLOATS = (DataType.DT_FLOAT, DataType.DT_DOUBLE)


def is_b64_object(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def b64_decode(value: Any) -> bytes:
    if not is_b64_object(value):
        raise InvalidArgumentError(
            f"JSON Value: {debug_string(value)} not formatted correctly for base64 data"
        )
    text = value["b64"]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError("Unable to base64 decode") from None


def _type_error(value: Any, dtype: DataType) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"JSON Value: {debug_string(value)} Type: {json_type_name(value)} "
        f"is not of expected type: {dtypes.short_name(dtype)}"
    )


def _scalar(value: Any, dtype: DataType) -> Any:
    """One JSON leaf as the Python value the tensor will hold."""
    if dtype in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(value, dtype)
        return float(value)
    bounds = _INT_RANGES.get(dtype)
    if bounds is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(value, dtype)
        if not bounds[0] <= value < bounds[1]:
            raise _type_error(value, dtype)
        return value
    if dtype == DataType.DT_STRING:
        if not isinstance(value, str):
            raise _type_error(value, dtype)
        return value.encode("utf-8", "surrogateescape")
    if dtype == DataType.DT_BOOL:
        if not isinstance(value, bool):
            raise _type_error(value, dtype)
        return value
    raise UnimplementedError(
        f"Conversion of JSON Value: {debug_string(value)} to type: {dtypes.short_name(dtype)}"
    )


def dense_shape(value: Any, outer_dims: int = 0) -> list[int]:
    """Dimensions read from the first element at each depth (TensorFlow Serving's rule).

    A value whose nesting, plus ``outer_dims`` dimensions around it (1 for a row of the
    ``instances`` list), is more than a tensor's dimensions is INVALID_ARGUMENT; this walk is
    a loop, and it bounds how deep ``fill`` recurses.
    """
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    check_rank(len(shape) + outer_dims)
    return shape


def fill(value: Any, level: int, shape: list[int], dtype: DataType, out: list[Any]) -> None:
    rank = len(shape)
    if not isinstance(value, list):
        if level != rank:
            raise InvalidArgumentError(
                f"JSON Value: {debug_string(value)} found at incorrect level: {level + 1} "
                f"in the JSON DOM. Expected at level: {rank}"
            )
        if isinstance(value, dict):
            if dtype != DataType.DT_STRING:
                raise _type_error(value, dtype)
            out.append(b64_decode(value))
        else:
            out.append(_scalar(value, dtype))
        return
    if level >= rank:
        raise InvalidArgumentError(
            f"Encountered list at unexpected level: {level} expected < {rank}"
        )
    if len(value) != shape[level]:
        raise InvalidArgumentError(
            f"Encountered list at unexpected size: {len(value)} at level: {level} "
            f"expected size: {shape[level]}"
        )
    for item in value:
        fill(item, level + 1, shape, dtype, out)


def to_array(
    values: list[Any], shape: list[int], dtype: DataType, budget: TensorBudget | None = None
) -> np.ndarray:
    """The tensor of ``values`` (flat, as ``fill`` made them); charged to ``budget`` first."""
    np_dtype = dtypes.to_numpy(dtype)
    if budget is not None:
        if dtype == DataType.DT_STRING:
            nbytes = sum(map(len, values)) + len(values) * STRING_ELEMENT_BYTES
        else:
            nbytes = len(values) * np_dtype.itemsize
        budget.charge(nbytes, shape, dtype)
    if dtype == DataType.DT_STRING:
        array = np.empty(len(values), dtype=object)
        array[:] = values
    elif dtype in _INT_RANGES and dtype != DataType.DT_UINT64:
        # Narrow types wrap like TensorFlow's int_val -> int8 cast (300 -> 44 for uint8).
        array = np.array(values, dtype=np.int64).astype(np_dtype)
    elif dtype in _FLOATS:
        array = np.array(values, dtype=np.float64).astype(np_dtype)
    else:
        array = np.array(values, dtype=np_dtype)
    return array.reshape(shape)


def _careful_tensor(value: Any, dtype: DataType, budget: TensorBudget | None) -> np.ndarray:
    shape = dense_shape(value)
    values: list[Any] = []
    fill(value, 0, shape, dtype, values)
    return to_array(values, shape, dtype, budget)


def fast_tensor(value: Any, dtype: DataType, has_bool_tokens: bool) -> np.ndarray | None:
    """The tensor if numpy alone can prove TensorFlow Serving would accept it; else None."""
    if dtype == DataType.DT_BOOL:
        kinds = "b"
    elif dtype in _FLOATS and not has_bool_tokens:
        kinds = "if"
    elif dtype in _INT_RANGES and not has_bool_tokens:
        kinds = "iu"
    else:
        return None
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        return None  # ragged or mixed: let the careful path name the problem
    if array.dtype.kind not in kinds or array.size == 0:
        return None
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        if int(array.min()) < low or int(array.max()) >= high:
            return None
        array = array.astype(np.int64 if array.dtype.kind == "i" else np.uint64)
    return array.astype(dtypes.to_numpy(dtype), copy=False)


def decode_tensor(
    value: Any, dtype: DataType, has_bool_tokens: bool, budget: TensorBudget | None = None
) -> np.ndarray:
    """One JSON value as a tensor of ``dtype``, charged to ``budget`` when there is one."""
    fast = fast_tensor(value, dtype, has_bool_tokens)
    if fast is None:
        return _careful_tensor(value, dtype, budget)
    if budget is not None:
        # numpy built it from the parsed lists, which the body's size already bounds.
        budget.charge(array_nbytes(fast), fast.shape, dtype)
    return fast
