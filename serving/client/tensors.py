"""Input values -> numpy arrays, and numpy arrays <-> TensorFlow Serving's JSON tensors.

Inputs: numpy arrays and scalars keep their dtype. Other Python values follow
``tf.make_tensor_proto``'s defaults, so a literal like ``[[1.0]]`` means what it means to a
TensorFlow client: floats become float32, ints int32 (int64 when they do not fit), text and bytes
a string tensor. String tensors are numpy object arrays of ``bytes`` (str is encoded as UTF-8).

JSON (REST): arrays go out as nested lists, strings always as ``{"b64": ...}`` objects so any
bytes survive. Answers come back as nested lists without dtypes; ``from_json`` gives them the
dtype the signature declares, and restores the trailing dimensions of an empty tensor (JSON
``[]`` carries only the first).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

import numpy as np

from serving.client.errors import InvalidArgumentError

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_STANDARD_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(
        f"a string tensor holds bytes or str; found an element of type {type(value).__name__}"
    )


def _strings(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=object)
    out.reshape(-1)[:] = [_as_bytes(v) for v in array.reshape(-1).tolist()]
    return out


def as_array(value: Any) -> np.ndarray:
    """An input value as the array to send (see the module docstring for the dtype rules)."""
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        return _strings(array) if array.dtype.kind in "SUO" else array
    # Leaves first, as objects: numpy's own string arrays would drop trailing NUL bytes and
    # cannot mix bytes with str.
    leaves = np.array(value, dtype=object)
    if any(isinstance(v, (list, tuple)) for v in leaves.flat):
        raise InvalidArgumentError(f"cannot make a tensor of {value!r}: the nesting is ragged")
    if any(isinstance(v, (str, bytes, bytearray, memoryview)) for v in leaves.flat):
        return _strings(leaves)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise InvalidArgumentError(f"cannot make a tensor of {value!r}: {err}") from err
    if array.dtype.kind in "SUO":
        return _strings(array)
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if array.dtype == np.int64 and (
        array.size == 0 or (_INT32_MIN <= array.min() and array.max() <= _INT32_MAX)
    ):
        return array.astype(np.int32)
    return array


# -- JSON ---------------------------------------------------------------------------------------


def to_json(array: np.ndarray) -> Any:
    """An array as a JSON-ready nested list (a bare value for rank 0)."""
    kind = array.dtype.kind
    if kind == "O":
        flat = [{"b64": base64.b64encode(v).decode("ascii")} for v in _strings(array).flat]
        return _nest(flat, array.shape)
    if kind in "biu" or array.dtype in _STANDARD_FLOATS:
        return array.tolist()
    if array.dtype.name.startswith(("bfloat16", "float8")):  # ml_dtypes' floats
        return array.astype(np.float32).tolist()
    raise InvalidArgumentError(f"the REST API cannot carry {array.dtype} tensors")


def _nest(flat: list[Any], shape: Sequence[int]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def _json_shape(value: Any) -> list[int]:
    """Dimensions of a nested list, from the first element at each depth."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _string_leaf(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except binascii.Error as err:
            raise InvalidArgumentError(f"bad base64 in a string output: {err}") from err
    raise InvalidArgumentError(f"expected a string in the answer, found {value!r}")


def _string_array(value: Any) -> np.ndarray:
    shape = _json_shape(value)
    flat: list[Any] = []

    def walk(node: Any, depth: int) -> None:
        if depth == len(shape):
            flat.append(_string_leaf(node))
            return
        if not isinstance(node, list) or len(node) != shape[depth]:
            raise InvalidArgumentError("a string output in the answer is ragged")
        for child in node:
            walk(child, depth + 1)

    walk(value, 0)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


def from_json(value: Any, dtype: np.dtype | None, shape: Sequence[int] | None = None) -> np.ndarray:
    """A JSON tensor as an array of ``dtype`` (None: as JSON gives it, strings as bytes).

    ``shape`` is the signature's shape (-1 for unknown dimensions), used only to give an empty
    answer its trailing dimensions.
    """
    leaf = value
    while isinstance(leaf, list) and leaf:
        leaf = leaf[0]
    if dtype == np.dtype(object) or (dtype is None and isinstance(leaf, (str, dict))):
        array = _string_array(value)
    else:
        try:
            array = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as err:
            raise InvalidArgumentError(f"cannot read an answer tensor as {dtype}: {err}") from err
    if array.size == 0 and shape is not None and len(shape) > array.ndim:
        rest = tuple(shape[array.ndim :])
        if all(d >= 0 for d in rest):
            array = array.reshape(array.shape + rest)
    return array
