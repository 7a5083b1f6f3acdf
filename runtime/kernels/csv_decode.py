"""CPU kernel: DecodeCSV, the op behind CSV serving input receivers (``decode_csv_op.cc``).

Fields are split with TensorFlow's rules, which are not RFC 4180's: a field that starts with a
quote (``use_quote_delim``) runs to a quote followed by the delimiter or the end, with ``""``
standing for a quote inside it; an unquoted field may hold neither quotes nor CR/LF; CR and LF
are skipped where a field starts; a record ending in the delimiter has an empty last field. An
empty field or one equal to ``na_value`` takes its column's default, and a column without one
(an empty default tensor) is required. Numbers are parsed as absl's SimpleAtoi/SimpleAtof do:
ASCII whitespace around them, an optional sign, hex for floats only, floats rounded once to
their type.

TensorFlow reports the first error it meets, record by record and field by field; so do we.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import pairwise
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.errors import InvalidArgumentError
from runtime.kernels.registry import KernelError, NodeContext, kernel
from runtime.kernels.string_common import attr_bytes, flat_strings, reject_when_run

_QUOTE = ord('"')
_CR, _LF = ord("\r"), ord("\n")
_SPACE = b" \t\n\v\f\r"
_INT_RE = re.compile(rb"[+-]?[0-9]+")
# What absl::from_chars accepts, after SimpleAtof has dropped one leading '+': decimal and
# 0x-prefixed hex floats, inf/infinity, and nan with an optional payload.
# Digits match one way only (not as `[0-9]+\.?[0-9]*`, which splits a run of digits n ways), so
# a failing match of a long run stays linear rather than quadratic.
_FLOAT_RE = re.compile(
    rb"-?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?i:inf|infinity)|(?i:nan)(?:\([0-9A-Za-z_]*\))?)"
)
_INT_RANGE = {np.dtype(np.int32): (-(2**31), 2**31 - 1), np.dtype(np.int64): (-(2**63), 2**63 - 1)}
_TYPE_NAME = {
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}

Fields = list[bytes]


def _text(field: bytes) -> str:
    return field.decode("utf-8", "replace")


def _parse_int(field: bytes, dtype: np.dtype) -> int | None:
    text = field.strip(_SPACE)
    if not _INT_RE.fullmatch(text):
        return None
    value = int(text)
    low, high = _INT_RANGE[dtype]
    return value if low <= value <= high else None


def _float_text(field: bytes) -> str | None:
    text = field.strip(_SPACE)
    if text.startswith(b"+"):
        text = text[1:]
        if text.startswith(b"-"):
            return None
    if not _FLOAT_RE.fullmatch(text):
        return None
    return text.split(b"(", 1)[0].decode()  # a NaN's payload does not matter


def _is_hex(text: str) -> bool:
    return text.lstrip("-")[:2] in ("0x", "0X")


def _to_double(text: str) -> float:
    """The double nearest to ``text`` (a string ``_float_text`` returned)."""
    if not _is_hex(text):
        return float(text)
    negative, body = text.startswith("-"), text.lstrip("-")
    try:
        value = float.fromhex(body)
    except OverflowError:  # from_chars reports it out of range and SimpleAtof makes it inf
        value = math.inf
    return -value if negative else value


def _exact(text: str) -> Fraction:
    """The exact value of a finite number's text."""
    if not _is_hex(text):
        return Fraction(text)
    negative, body = text.startswith("-"), text.lstrip("-")
    digits, _, exponent = body[2:].lower().partition("p")
    whole, _, fraction = digits.partition(".")
    value = Fraction(int(whole + fraction or "0", 16), 16 ** len(fraction))
    value *= Fraction(2) ** int(exponent or "0")
    return -value if negative else value


def _float32_column(values: list[Any]) -> np.ndarray:
    """A float32 column from parsed texts (and defaults, already float32 values), each rounded
    once to float32 as from_chars does."""
    wide = np.array([_to_double(v) if isinstance(v, str) else v for v in values], np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = wide.astype(np.float32)
        back = narrow.astype(np.float64)
        # Rounding to double first can land exactly on a float32 midpoint: settle such a tie
        # with the exact value of the text.
        inexact = np.flatnonzero((back != wide) & np.isfinite(narrow))
        if not inexact.size:
            return narrow
        toward = np.where(wide[inexact] > back[inexact], np.inf, -np.inf).astype(np.float32)
        other = np.nextafter(narrow[inexact], toward)
        midpoint = (back[inexact] + other.astype(np.float64)) / 2
    for k in np.flatnonzero(midpoint == wide[inexact]).tolist():
        position = int(inexact[k])
        exact, middle = _exact(values[position]), Fraction(float(midpoint[k]))
        if exact != middle and (exact > middle) == (other[k] > narrow[position]):
            narrow[position] = other[k]
    return narrow


class _Splitter:
    """``ExtractFields`` of decode_csv_op.cc for one delimiter, quoting rule and selection."""

    def __init__(self, delim: int, quoting: bool, select_cols: Sequence[int]) -> None:
        self.delim = delim
        self.delim_byte = bytes([delim])
        self.quoting = quoting
        self.select = list(select_cols)

    def __call__(self, record: bytes) -> Fields:
        if not record:
            return []
        if (not self.quoting or _QUOTE not in record) and _CR not in record and _LF not in record:
            parts = record.split(self.delim_byte)
            if not self.select:
                return parts
            return [parts[c] for c in self.select if c < len(parts)]
        return self._scan(record)

    def _scan(self, s: bytes) -> Fields:
        delim, select = self.delim, self.select
        size, i, parsed, selector = len(s), 0, 0, 0
        fields: Fields = []
        while i < size:
            if s[i] in (_LF, _CR):
                i += 1
                continue
            include = not select or select[selector] == parsed
            field = bytearray()
            if self.quoting and s[i] == _QUOTE:
                # The body runs to a quote followed by the delimiter, or to the last byte; a
                # quote before that must be doubled.
                i += 1
                while i < size - 1:
                    quote = s.find(b'"', i, size - 1)
                    if quote < 0:
                        field += s[i : size - 1]
                        i = size - 1
                        break
                    field += s[i:quote]
                    i = quote
                    if s[i + 1] == delim:
                        break
                    if s[i + 1] != _QUOTE:
                        raise InvalidArgumentError(
                            "Quote inside a string has to be escaped by another quote"
                        )
                    field.append(_QUOTE)
                    i += 2
                if not (i < size and s[i] == _QUOTE and (i == size - 1 or s[i + 1] == delim)):
                    raise InvalidArgumentError(
                        "Quoted field has to end with quote followed by delim or end"
                    )
                i += 2
            else:
                end = s.find(self.delim_byte, i)
                end = size if end < 0 else end
                body = s[i:end]
                if (self.quoting and _QUOTE in body) or _CR in body or _LF in body:
                    raise InvalidArgumentError("Unquoted fields cannot have quotes/CRLFs inside")
                field += body
                i = end + 1
            parsed += 1
            if include:
                fields.append(bytes(field))
                selector += 1
                if selector == len(select):
                    return fields
        if (not select or select[selector] == parsed) and s[-1] == delim:
            fields.append(b"")
        return fields


def _converter(dtype: np.dtype, column: int) -> Callable[[bytes, int], Any]:
    """Field text -> value for one column; raises TensorFlow's message for a bad number."""
    if dtype == object:
        return lambda field, record: field
    name = _TYPE_NAME[dtype]

    def invalid(field: bytes, record: int) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"Field {column} in record {record} is not a valid {name}: {_text(field)}"
        )

    if dtype.kind == "i":

        def to_int(field: bytes, record: int) -> int:
            value = _parse_int(field, dtype)
            if value is None:
                raise invalid(field, record)
            return value

        return to_int
    single = dtype == np.float32

    def to_float(field: bytes, record: int) -> Any:
        text = _float_text(field)
        if text is None:
            raise invalid(field, record)
        # float32 columns are rounded all at once, from the texts, by _float32_column.
        return text if single else _to_double(text)

    return to_float


def _defaults(record_defaults: Sequence[np.ndarray]) -> list[Any]:
    values: list[Any] = []
    for i, default in enumerate(record_defaults):
        default = np.asarray(default)
        if default.ndim > 1:
            raise InvalidArgumentError("Each record default should be at most rank 1")
        if default.size >= 2:
            raise InvalidArgumentError(
                f"There should only be 1 default per field but field {i} has {default.size}"
            )
        if default.size == 0:
            values.append(None)
            continue
        value = default.reshape(-1)[0]
        values.append(value.item() if isinstance(value, np.generic) else value)
    return values


def _attr_error(select: Sequence[int], num_outputs: int, delim: bytes) -> str | None:
    if select and len(select) != num_outputs:
        return "select_cols should match output size"
    if any(a >= b for a, b in pairwise(select)):
        return "select_cols should be strictly increasing indices"
    if select and select[0] < 0:
        return "select_cols should be non-negative indices"
    if len(delim) != 1:
        return "field_delim should be only 1 char"
    return None


@kernel("DecodeCSV")
def decode_csv(node: NodeContext) -> Callable[..., tuple[np.ndarray, ...]]:
    types = [dtypes.to_numpy(t) for t in node.attr("OUT_TYPE")]
    for column, dtype in enumerate(types):
        if dtype != object and dtype not in _TYPE_NAME:
            raise KernelError(node, f"csv: data type {dtype} not supported in field {column}")
    select = [int(c) for c in node.attr("select_cols")]
    delim = attr_bytes(node.attr("field_delim"))
    problem = _attr_error(select, len(types), delim)
    if problem is not None:
        return reject_when_run(InvalidArgumentError(problem))
    split = _Splitter(delim[0], bool(node.attr("use_quote_delim")), select)
    na_value = attr_bytes(node.attr("na_value"))
    converters = [_converter(dtype, column) for column, dtype in enumerate(types)]
    width = len(types)

    def run(records: np.ndarray, *record_defaults: np.ndarray) -> tuple[np.ndarray, ...]:
        defaults = _defaults(record_defaults)
        columns: list[list[Any]] = [[] for _ in range(width)]
        for index, record in enumerate(flat_strings(records)):
            fields = split(record)
            if len(fields) != width:
                raise InvalidArgumentError(
                    f"Expect {width} fields but have {len(fields)} in record {index}"
                )
            for column, field in enumerate(fields):
                if not field or field == na_value:
                    value = defaults[column]
                    if value is None:
                        raise InvalidArgumentError(
                            f"Field {column} is required but missing in record {index}!"
                        )
                else:
                    value = converters[column](field, index)
                columns[column].append(value)
        return tuple(_column_array(values, dtype, records.shape)
                     for values, dtype in zip(columns, types))

    return run


def _column_array(values: list[Any], dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == object:
        out = np.empty(len(values), dtype=object)
        out[:] = [v if isinstance(v, bytes) else bytes(v) for v in values]
        return out.reshape(shape)
    if dtype == np.float32:
        return _float32_column(values).reshape(shape)
    return np.array(values, dtype=dtype).reshape(shape)
