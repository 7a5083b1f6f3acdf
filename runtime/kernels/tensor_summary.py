"""Tensors as TensorFlow's ``Tensor::SummarizeValue`` prints them, for Assert, Print and
StringFormat.

Two layouts: the first one (``print_v2=False``: Assert and Print messages) shows the first
``max_entries`` elements in row-major order, nesting rows as ``[0 1][2 3]`` and marking a cut with
``...``; the second (``print_v2=True``: StringFormat, so ``tf.print``) shows ``max_entries``
elements at each end of every dimension, one row per line, strings quoted. A negative
``max_entries`` shows everything.

Elements print as TensorFlow's ``StrCat`` does: floats in the shortest of ``%.6g`` / ``%.9g``
(``%.15g`` / ``%.17g`` for doubles) that reads back exactly, bools as ``1``/``0``, strings
C-escaped (bytes from 0x80 up kept as they are), and types it has no printer for (complex) as
``?``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

_ESCAPES = {
    ord("\n"): b"\\n",
    ord("\r"): b"\\r",
    ord("\t"): b"\\t",
    ord('"'): b'\\"',
    ord("'"): b"\\'",
    ord("\\"): b"\\\\",
}


def _escape(value: bytes) -> bytes:
    out = bytearray()
    for byte in value:
        escaped = _ESCAPES.get(byte)
        if escaped is not None:
            out += escaped
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out)


def _float_text(value: float, digits: int, more_digits: int, exact: Callable[[float], float]
                ) -> bytes:
    if math.isnan(value):
        return b"-nan" if math.copysign(1.0, value) < 0 else b"nan"
    text = f"{value:.{digits}g}"
    if exact(float(text)) != value:
        text = f"{value:.{more_digits}g}"
    return text.encode()


def _f32(value: float) -> float:
    return float(np.float32(value))


def _element_printer(dtype: np.dtype, print_v2: bool) -> Callable[[Any], bytes] | None:
    """How one element prints; None for types TensorFlow has no printer for."""
    if dtype == object:
        if print_v2:
            return lambda v: b'"' + _escape(_as_bytes(v)) + b'"'
        return lambda v: _escape(_as_bytes(v))
    if dtype == np.bool_:
        return lambda v: b"1" if v else b"0"
    if dtype.kind in "iu":
        return lambda v: str(int(v)).encode()
    if dtype == np.float64:
        return lambda v: _float_text(float(v), 15, 17, float)
    if dtype.kind == "f" or dtype.name == "bfloat16":  # half and bfloat16 print as floats
        return lambda v: _float_text(_f32(v), 6, 9, _f32)
    return None


def _as_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def summarize(value: np.ndarray, max_entries: int, print_v2: bool) -> bytes:
    """``value`` as TensorFlow's ``SummarizeValue(max_entries, print_v2)`` prints it."""
    value = np.asarray(value)
    count = value.size
    if max_entries < 0:
        max_entries = count
    limit = min(max_entries, count)
    flat = value.reshape(-1)
    printer = _element_printer(value.dtype, print_v2)
    if printer is None:
        return _unprintable(value, limit, max_entries, print_v2)
    if value.dtype == np.bool_ and limit == 0:
        return b""  # TensorFlow prints nothing at all for a bool tensor with nothing shown
    out: list[bytes] = []
    if value.ndim == 0:
        out += [b" ".join(printer(flat[i]) for i in range(limit))]
        if count > limit:
            out.append(b"...")
    elif print_v2:
        _rows_v2(0, value.shape, limit, flat, printer, 0, out)
    else:
        _rows_v1(0, value.shape, limit, flat, printer, [0], out)
        if count > limit:
            out.append(b"...")
    return b"".join(out)


def _unprintable(value: np.ndarray, limit: int, max_entries: int, print_v2: bool) -> bytes:
    bracket = print_v2 and value.ndim > 0
    text = b" ".join([b"?"] * limit)
    if max_entries < value.size:
        text += b"..."
    return b"[" + text + b"]" if bracket else text


def _rows_v1(
    dim: int, shape: tuple[int, ...], limit: int, flat: np.ndarray,
    printer: Callable[[Any], bytes], shown: list[int], out: list[bytes],
) -> None:
    if shown[0] >= limit:
        return
    if dim == len(shape) - 1:
        for i in range(shape[dim]):
            if shown[0] >= limit:
                if dim != 0:
                    out.append(b"...")
                return
            if i > 0:
                out.append(b" ")
            out.append(printer(flat[shown[0]]))
            shown[0] += 1
        return
    for _ in range(shape[dim]):
        if shown[0] >= limit:
            break  # nothing more is printed, not even brackets
        out.append(b"[")
        _rows_v1(dim + 1, shape, limit, flat, printer, shown, out)
        out.append(b"]")


def _spacing(dim: int, ndim: int) -> bytes:
    if dim == ndim - 1:
        return b" "
    return b"\n" * (ndim - dim - 1) + b" " * (dim + 1)


def _rows_v2(
    dim: int, shape: tuple[int, ...], ends: int, flat: np.ndarray,
    printer: Callable[[Any], bytes], start: int, out: list[bytes],
) -> None:
    ndim = len(shape)
    if dim == ndim:
        out.append(printer(flat[start]))
        return
    out.append(b"[")
    count = shape[dim]
    stride = int(np.prod(shape[dim + 1:], dtype=np.int64))
    for i in range(min(ends, count)):
        if i > 0:
            out.append(_spacing(dim, ndim))
        _rows_v2(dim + 1, shape, ends, flat, printer, start + stride * i, out)
    if count > 2 * ends:
        out += [_spacing(dim, ndim), b"..."]
    for i in range(max(ends, count - ends), count):
        out.append(_spacing(dim, ndim))
        _rows_v2(dim + 1, shape, ends, flat, printer, start + stride * i, out)
    out.append(b"]")
