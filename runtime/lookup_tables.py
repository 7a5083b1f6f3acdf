"""Lookup tables: the session resources behind ``HashTableV2``, ``MutableHashTableV2`` and
``MutableHashTableOfTensorsV2``, with TensorFlow's semantics and messages.

A ``HashTable`` is filled once, by an initializer (``InitializeTableV2``, a text file, or an import)
and read-only afterwards; finding in it before that fails with "Table not initialized.". Mutable
tables accept inserts, removals and imports at any time.

Finds are vectorized: the entries are compiled on first use into a value array and a key -> row
index (``searchsorted`` over sorted keys for integer keys, one dict probe per element for string
keys), rebuilt only after a write. Table values are never handed out: a find returns a new array.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import repeat
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    UnimplementedError,
)

Rows = Callable[[np.ndarray], np.ndarray]  # flat keys -> row per key, -1 where absent


def shape_text(shape: tuple[int, ...]) -> str:
    """``TensorShape::DebugString``: ``[2,3]``, ``[]``."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def value_text(value: Any) -> str:
    """A key or value as TensorFlow streams it into a message."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


class _Compiled:
    """The entries of a table at one moment, laid out for vectorized finds."""

    def __init__(self, keys: list[Any], values: np.ndarray, key_dtype: np.dtype) -> None:
        self.values = values
        self.size = len(keys)
        self.rows: Rows
        if key_dtype == object:
            index = {key: row for row, key in enumerate(keys)}
            get = index.get

            def by_dict(flat: np.ndarray) -> np.ndarray:
                return np.fromiter(
                    map(get, flat.tolist(), repeat(-1)), dtype=np.intp, count=flat.size
                )

            self.rows = by_dict
        elif keys and int(max(keys)) - int(min(keys)) < 4 * len(keys) + 64:
            # Compact integer keys (line numbers, class ids): a direct row array.
            low = int(min(keys))
            span = int(max(keys)) - low + 1
            direct = np.full(span, -1, dtype=np.intp)
            direct[np.array(keys, dtype=np.int64) - low] = np.arange(len(keys))

            def by_offset(flat: np.ndarray) -> np.ndarray:
                offsets = flat.astype(np.int64) - low
                inside = (offsets >= 0) & (offsets < span)
                return np.where(inside, direct[np.where(inside, offsets, 0)], -1)

            self.rows = by_offset
        else:
            array = np.array(keys, dtype=key_dtype)
            order = np.argsort(array, kind="stable")
            ordered = array[order]
            last = len(keys) - 1

            def by_search(flat: np.ndarray) -> np.ndarray:
                if last < 0:
                    return np.full(flat.shape, -1, dtype=np.intp)
                pos = np.searchsorted(ordered, flat)
                np.minimum(pos, last, out=pos)
                return np.where(ordered[pos] == flat, order[pos], -1)

            self.rows = by_search


class LookupTable:
    """What every table shares: dtypes, the value shape, entries and the find machinery."""

    kind = "LookupTable"

    def __init__(
        self,
        container: str,
        name: str,
        key_dtype: DataType,
        value_dtype: DataType,
        value_shape: tuple[int, ...] = (),
    ) -> None:
        self.container = container
        self.name = name
        self.key_dtype = DataType.of(key_dtype)
        self.value_dtype = DataType.of(value_dtype)
        self.value_shape = tuple(value_shape)
        self._key_np = dtypes.to_numpy(self.key_dtype)
        self._value_np = dtypes.to_numpy(self.value_dtype)
        self._entries: dict[Any, Any] = {}  # key -> value (a scalar, or a tuple for vectors)
        self._compiled: _Compiled | None = None
        # numpy dtypes that passed the key or value type check (it depends on the dtype alone):
        # a find then skips the DataType conversion.
        self._key_dtypes_ok: set[np.dtype] = set()
        self._value_dtypes_ok: set[np.dtype] = set()
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{self.kind}({self.container}/{self.name})"

    # -- reading ---------------------------------------------------------------------------------

    def size(self) -> int:
        return len(self._entries)

    def find(self, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        keys = self._check_keys(keys)
        default = np.asarray(default)
        full_shape = keys.shape + self.value_shape
        if default.shape != self.value_shape and default.shape != full_shape:
            raise InvalidArgumentError(
                f"Expected shape {shape_text(self.value_shape)} or {shape_text(full_shape)} "
                f"for default value, got {shape_text(default.shape)}"
            )
        return self._find(keys, self._check_values(default, "Value"), full_shape)

    def _find(
        self, keys: np.ndarray, default: np.ndarray, full_shape: tuple[int, ...]
    ) -> np.ndarray:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile()
        flat = keys.reshape(-1)
        rows = compiled.rows(flat)
        out: np.ndarray
        if compiled.size:
            out = compiled.values[rows]
        else:
            out = np.empty((flat.size, *self.value_shape), dtype=self._value_np)
        missing = rows < 0
        if np.count_nonzero(missing):  # a fraction of any()'s cost on short arrays
            if default.shape == full_shape and default.shape != self.value_shape:
                out[missing] = default.reshape(out.shape)[missing]
            else:
                out[missing] = default
        return out.reshape(full_shape)

    def export(self) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            keys = list(self._entries)
            values = list(self._entries.values())
        return self._key_array(keys), self._value_array(values)

    # -- writing ---------------------------------------------------------------------------------

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        raise UnimplementedError(f"Insert not supported by {self.kind} implementations")

    def remove(self, keys: np.ndarray) -> None:
        raise UnimplementedError(f"Remove not supported by {self.kind} implementations")

    def import_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        raise UnimplementedError(f"Import not supported by {self.kind} implementations")

    # -- helpers ---------------------------------------------------------------------------------

    def _compile(self) -> _Compiled:
        with self.lock:
            compiled = self._compiled
            if compiled is None:
                keys = list(self._entries)
                compiled = _Compiled(
                    keys, self._value_array(list(self._entries.values())), self._key_np
                )
                self._compiled = compiled
        return compiled

    def _changed(self) -> None:
        self._compiled = None

    def _key_array(self, keys: list[Any]) -> np.ndarray:
        if self._key_np == object:
            array = np.empty(len(keys), dtype=object)
            array[:] = keys
            return array
        return np.array(keys, dtype=self._key_np).reshape(len(keys))

    def _value_array(self, values: list[Any]) -> np.ndarray:
        shape = (len(values), *self.value_shape)
        if self._value_np == object:
            array = np.empty(shape, dtype=object)
            if values:
                array[...] = np.array(values, dtype=object).reshape(shape)
            return array
        return np.array(values, dtype=self._value_np).reshape(shape)

    def _check_keys(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys)
        if keys.dtype in self._key_dtypes_ok:
            return keys
        if _dtype_of(keys) != self.key_dtype:
            raise InvalidArgumentError(
                f"Key must be type {dtypes.short_name(self.key_dtype)} but got "
                f"{_type_name(keys)}"
            )
        _remember(self._key_dtypes_ok, keys.dtype)
        return keys

    def _check_values(self, values: np.ndarray, what: str) -> np.ndarray:
        values = np.asarray(values)
        if values.dtype in self._value_dtypes_ok:
            return values
        if _dtype_of(values) != self.value_dtype:
            raise InvalidArgumentError(
                f"{what} must be type {dtypes.short_name(self.value_dtype)} but got "
                f"{_type_name(values)}"
            )
        _remember(self._value_dtypes_ok, values.dtype)
        return values

    def _pairs(self, keys: np.ndarray, values: np.ndarray) -> tuple[list[Any], list[Any]]:
        """Keys and values as Python objects, after TensorFlow's insert/import checks."""
        keys = self._check_keys(keys)
        values = self._check_values(values, "Value")
        expected = keys.shape + self.value_shape
        if values.shape != expected:
            raise InvalidArgumentError(
                f"Expected shape {shape_text(expected)} for value, got {shape_text(values.shape)}"
            )
        key_list = keys.reshape(-1).tolist()
        if self.value_shape:
            value_list = [tuple(row) for row in values.reshape(len(key_list), -1).tolist()]
        else:
            value_list = values.reshape(-1).tolist()
        return key_list, value_list


class HashTable(LookupTable):
    """An initializable, then read-only, table (``HashTableV2``)."""

    kind = "InitializableLookupTable"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialized = False

    def size(self) -> int:
        return len(self._entries) if self.initialized else 0

    def find(self, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        if not self.initialized:
            raise FailedPreconditionError("Table not initialized.")
        keys = self._check_keys(keys)
        default = self._check_values(np.asarray(default), "Value")
        full_shape = keys.shape + self.value_shape
        if default.shape != self.value_shape and default.shape != full_shape:
            raise InvalidArgumentError(
                f"Expected shape {shape_text(self.value_shape)} or {shape_text(full_shape)} "
                f"for default value, got {shape_text(default.shape)}"
            )
        # A static table uses the first default element for every missing key (with no keys, a
        # full-size default can be empty: nothing is missing then).
        first = default.reshape(-1)[:1]
        return self._find(keys, first.reshape(()) if first.size else first, full_shape)

    def import_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        key_list, value_list = self._pairs(keys, values)
        self.initialize(key_list, value_list)

    def initialize(self, keys: list[Any], values: list[Any]) -> None:
        """Fill the table once. Initializing again with as many entries is a no-op, with a
        different count an error (TensorFlow compares sizes only)."""
        with self.lock:
            if self.initialized:
                if len(keys) == len(self._entries):
                    return
                raise FailedPreconditionError("Table was already initialized with different data.")
            entries: dict[Any, Any] = {}
            for key, value in zip(keys, values):
                previous = entries.setdefault(key, value)
                if previous != value:
                    raise FailedPreconditionError(
                        "HashTable has different value for same key. Key "
                        f"{value_text(key)} has {value_text(previous)} and trying to add value "
                        f"{value_text(value)}"
                    )
            self._entries = entries
            self._changed()
            self.initialized = True


class MutableHashTable(LookupTable):
    """``MutableHashTableV2`` (scalar values) and ``MutableHashTableOfTensorsV2`` (vectors)."""

    kind = "MutableHashTable"

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        key_list, value_list = self._pairs(keys, values)
        with self.lock:
            entries = dict(self._entries)  # readers keep the old dict while this one is built
            entries.update(zip(key_list, value_list))
            self._entries = entries
            self._changed()

    def import_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        key_list, value_list = self._pairs(keys, values)
        with self.lock:
            self._entries = dict(zip(key_list, value_list))
            self._changed()

    def remove(self, keys: np.ndarray) -> None:
        key_list = self._check_keys(keys).reshape(-1).tolist()
        with self.lock:
            entries = dict(self._entries)
            for key in key_list:
                entries.pop(key, None)
            self._entries = entries
            self._changed()


def _remember(accepted: set[np.dtype], dtype: np.dtype) -> None:
    # Fixed-width strings come in every width: only the bounded rest is remembered.
    if dtype.kind not in "SU":
        accepted.add(dtype)


def _dtype_of(array: np.ndarray) -> DataType | None:
    try:
        return dtypes.from_numpy(array.dtype)
    except ValueError:
        return None


def _type_name(array: np.ndarray) -> str:
    dtype = _dtype_of(array)
    return dtypes.short_name(dtype) if dtype is not None else str(array.dtype)
