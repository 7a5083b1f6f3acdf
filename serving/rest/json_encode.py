"""TensorFlow Serving's JSON tensor formats for :predict, response side.

Row requests answer ``{"predictions": [...]}`` (one entry per batch row; an object per row when
there are several outputs), columnar requests ``{"outputs": ...}`` (the tensor itself, or an
object of tensors). The text is byte-for-byte what TensorFlow Serving's rapidjson PrettyWriter
produces, including its layout quirks (rows on one line, a newline before the closing bracket),
so the numbers come from ``json_numbers`` and the layout is assembled here with joins instead of
one writer call per element.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from serving.rest.json_codec import RequestFormat
from serving.rest.json_numbers import (
    SMALL_ARRAY,
    _small_float_tokens,
    bool_tokens,
    float_tokens,
    int_tokens,
)
from serving.rest.json_text import quote, quote_bytes

_INT_TYPES = {
    DataType.DT_INT8,
    DataType.DT_INT16,
    DataType.DT_INT32,
    DataType.DT_UINT8,
    DataType.DT_INT64,
    DataType.DT_UINT32,
    DataType.DT_UINT64,
}


_SMALL_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _indent(depth: int) -> str:
    return "\n" + "    " * depth


def _dtype_of(array: np.ndarray) -> DataType:
    try:
        return dtypes.from_numpy(array.dtype)
    except ValueError:
        return DataType.DT_INVALID


def _string_tokens(array: np.ndarray, as_b64: bool, depth: int) -> list[str]:
    """Strings as JSON literals; ``_bytes`` outputs as ``{"b64": ...}`` objects. Leaves sit at
    ``depth`` open containers, which fixes the object's indentation (objects never go onto one
    line in rapidjson)."""
    flat = array.reshape(-1).tolist()
    items = [v if isinstance(v, bytes) else str(v).encode() for v in flat]
    if not as_b64:
        return [quote_bytes(v) for v in items]
    head, tail = "{" + _indent(depth + 1) + '"b64": ', _indent(depth) + "}"
    return [head + quote(base64.b64encode(v).decode("ascii")) + tail for v in items]


def tensor_tokens(name: str, array: np.ndarray, leaf_depth: int) -> list[str]:
    """Every element of ``array`` as JSON text, row-major; raises for unwritable dtypes."""
    dtype = _dtype_of(array)
    if array.size == 0:
        return []
    if dtype in (DataType.DT_FLOAT, DataType.DT_DOUBLE):
        return float_tokens(array)
    if dtype in _INT_TYPES:
        return int_tokens(array)
    if dtype == DataType.DT_BOOL:
        return bool_tokens(array)
    if dtype == DataType.DT_STRING:
        return _string_tokens(array, name.endswith("_bytes"), leaf_depth)
    type_name = dtypes.short_name(dtype) if dtype != DataType.DT_INVALID else str(array.dtype)
    raise InvalidArgumentError(f"Failed to write JSON value for tensor type: {type_name}")


def _wrap(items: Sequence[str], depth: int, single_line: bool) -> str:
    """One JSON array of already-made ``items``; the array itself sits at ``depth``."""
    if not items:
        return "[]"
    if single_line:
        return "[" + ", ".join(items) + "]"
    inner = _indent(depth + 1)
    return "[" + inner + ("," + inner).join(items) + _indent(depth) + "]"


def nested_items(
    tokens: list[str], shape: Sequence[int], depth: int, single_line: bool
) -> list[str]:
    """Texts of the elements along the first axis of a tensor of ``shape`` whose outermost array
    sits at ``depth`` (for rank 0: the one token)."""
    if not shape:
        return tokens
    groups = tokens
    for axis in range(len(shape) - 1, 0, -1):
        size = shape[axis]
        outer = math.prod(shape[:axis])
        if size == 0:
            groups = ["[]"] * outer
            continue
        groups = [
            _wrap(groups[i * size : (i + 1) * size], depth + axis, single_line)
            for i in range(outer)
        ]
    return groups


def tensor_text(name: str, array: np.ndarray, depth: int, single_line: bool) -> str:
    """A whole tensor as the JSON value TensorFlow Serving writes at ``depth``."""
    tokens = tensor_tokens(name, array, depth + array.ndim)
    items = nested_items(tokens, array.shape, depth, single_line)
    return items[0] if array.ndim == 0 else _wrap(items, depth, single_line)


def _row_body(outputs: Mapping[str, np.ndarray]) -> str:
    batch = -1
    for name, array in outputs.items():
        if array.ndim == 0:
            raise InvalidArgumentError(f"Tensor name: {name} has no shape information ")
        if batch >= 0 and array.shape[0] != batch:
            raise InvalidArgumentError(
                f"Tensor name: {name} has inconsistent batch size: {array.shape[0]} "
                f"expecting: {batch}"
            )
        batch = array.shape[0]
    if len(outputs) == 1:
        ((name, array),) = outputs.items()
        rows = _rows(name, array, depth=2)
        return "[" + ", ".join(rows) + (_indent(1) + "]" if rows else "]")
    per_output = {name: _rows(name, array, depth=3) for name, array in outputs.items()}
    objects = []
    for row in range(batch):
        members = (
            _indent(3) + quote(name) + ": " + rows[row] for name, rows in per_output.items()
        )
        objects.append(_indent(2) + "{" + ",".join(members) + _indent(2) + "}")
    return "[" + ",".join(objects) + (_indent(1) + "]" if objects else "]")


def _rows(name: str, array: np.ndarray, depth: int) -> list[str]:
    """Per batch row, the row's value written on one line at ``depth``."""
    tokens = tensor_tokens(name, array, depth + array.ndim - 1)
    row_shape = array.shape[1:]
    if not row_shape:
        return tokens
    if array.shape[0] == 0:
        return []
    per_row = len(tokens) // array.shape[0]
    if len(row_shape) == 1 and per_row:  # the common case, joined directly
        return [
            "[" + ", ".join(tokens[start : start + per_row]) + "]"
            for start in range(0, len(tokens), per_row)
        ]
    return [
        _wrap(nested_items(tokens[r * per_row : (r + 1) * per_row], row_shape, depth, True),
              depth, True)
        for r in range(array.shape[0])
    ]


def _columnar_body(outputs: Mapping[str, np.ndarray]) -> str:
    if len(outputs) == 1:
        ((name, array),) = outputs.items()
        return tensor_text(name, array, depth=1, single_line=False)
    members = (
        _indent(2) + quote(name) + ": " + tensor_text(name, array, depth=2, single_line=False)
        for name, array in outputs.items()
    )
    return "{" + ",".join(members) + _indent(1) + "}"


_BODIES: dict[RequestFormat, tuple[str, Callable[[Mapping[str, np.ndarray]], str]]] = {
    RequestFormat.ROW: ("predictions", _row_body),
    RequestFormat.COLUMNAR: ("outputs", _columnar_body),
}


def _small_float_rows(array: np.ndarray) -> bytes:
    """``_row_body``'s answer for one small 2-D float output (most models' answer to a small
    request), without the general path's per-call steps."""
    tokens = _small_float_tokens(array.ravel().tolist(), array.dtype == np.float32)
    width = array.shape[1]
    rows = ", ".join(
        ["[" + ", ".join(tokens[start : start + width]) + "]"
         for start in range(0, len(tokens), width)]
    )
    return ('{\n    "predictions": [' + rows + "\n    ]\n}").encode()


def encode_predict_response(outputs: Mapping[str, np.ndarray], fmt: RequestFormat) -> bytes:
    """The response body for ``outputs`` (by alias) answering a request in format ``fmt``."""
    if len(outputs) == 1 and fmt is RequestFormat.ROW:
        (array,) = outputs.values()
        if (
            type(array) is np.ndarray
            and array.ndim == 2
            and array.dtype in _SMALL_FLOATS
            and 0 < array.size <= SMALL_ARRAY
        ):
            return _small_float_rows(array)
    if not outputs:
        raise InvalidArgumentError("Cannot convert empty tensor map to JSON")
    ordered = {name: np.asarray(outputs[name]) for name in sorted(outputs)}
    key, body = _BODIES[fmt]
    text = "{" + _indent(1) + quote(key) + ": " + body(ordered) + "\n}"
    return text.encode("utf-8", "surrogateescape")
