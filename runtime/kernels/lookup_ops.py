"""CPU kernels: lookup tables (hash tables and their initializers).

A table op's kernel looks its table up in the session's resource manager once, when the plan is
compiled, and returns the same handle on every call; tables are keyed by (container, shared_name),
or by the node name when the shared name is empty (TensorFlow then keeps the table private to the
node's kernel, which lives as long as the session). The load-time session and the serving session
share the manager, so the table the init op fills is the one requests find in.

A table's text file is read only where the session's ``ReadableFiles`` allows (the version's
``assets/``): the file name may come from a request.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import FailedPreconditionError, InvalidArgumentError
from runtime.kernels.registry import KernelError, NodeContext, kernel
from runtime.lookup_tables import HashTable, LookupTable, MutableHashTable, shape_text
from runtime.lookup_text_file import TextFileSpec, check_dtypes, read_entries
from runtime.readable_files import FileUse
from runtime.resources import ResourceHandle, ResourceManager, readable_files

_anonymous_ids = itertools.count()


def _resources(node: NodeContext) -> ResourceManager:
    if node.resources is None:
        raise KernelError(node, "needs a session resource manager")
    resources: ResourceManager = node.resources
    return resources


def _value_shape(node: NodeContext) -> tuple[int, ...]:
    shape = node.attr("value_shape", ())
    if shape is None or len(shape) != 1 or shape[0] < 0:
        raise InvalidArgumentError(
            f"Default value must be a vector, got shape {shape_text(tuple(shape or ()))}"
        )
    return tuple(shape)


def _table_kernel(
    make: Callable[[str, str, DataType, DataType, tuple[int, ...]], LookupTable],
    vector_values: bool = False,
) -> Callable[[NodeContext], Callable[..., Any]]:
    def factory(node: NodeContext) -> Callable[..., Any]:
        resources = _resources(node)
        container = node.attr("container", "")
        name = node.attr("shared_name", "") or node.name
        key_dtype = DataType.of(node.attr("key_dtype"))
        value_dtype = DataType.of(node.attr("value_dtype"))
        value_shape = _value_shape(node) if vector_values else ()
        table = resources.table(
            container, name, lambda: make(container, name, key_dtype, value_dtype, value_shape)
        )
        handle = ResourceHandle(table)
        return lambda: handle

    return factory


def _anonymous_kernel(
    make: Callable[[str, str, DataType, DataType, tuple[int, ...]], LookupTable],
    vector_values: bool = False,
) -> Callable[[NodeContext], Callable[..., Any]]:
    def factory(node: NodeContext) -> Callable[..., Any]:
        key_dtype = DataType.of(node.attr("key_dtype"))
        value_dtype = DataType.of(node.attr("value_dtype"))
        value_shape = _value_shape(node) if vector_values else ()

        def create() -> ResourceHandle:
            # Every run makes a fresh table, owned by whoever holds the handle.
            name = f"{node.name}/{next(_anonymous_ids)}"
            return ResourceHandle(make("Anonymous", name, key_dtype, value_dtype, value_shape))

        return create

    return factory


kernel("HashTable", "HashTableV2")(_table_kernel(HashTable))
kernel("MutableHashTable", "MutableHashTableV2")(_table_kernel(MutableHashTable))
kernel("MutableHashTableOfTensors", "MutableHashTableOfTensorsV2")(
    _table_kernel(MutableHashTable, vector_values=True)
)
kernel("AnonymousHashTable")(_anonymous_kernel(HashTable))
kernel("AnonymousMutableHashTable")(_anonymous_kernel(MutableHashTable))
kernel("AnonymousMutableHashTableOfTensors")(
    _anonymous_kernel(MutableHashTable, vector_values=True)
)


@kernel("LookupTableFind", "LookupTableFindV2")
def lookup_table_find(node: NodeContext) -> Callable[..., Any]:
    def find(handle: ResourceHandle, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        out: np.ndarray = handle.resource.find(keys, default)
        return out

    return find


@kernel("LookupTableSize", "LookupTableSizeV2")
def lookup_table_size(node: NodeContext) -> Callable[..., Any]:
    return lambda handle: np.array(handle.resource.size(), dtype=np.int64)


@kernel("LookupTableInsert", "LookupTableInsertV2")
def lookup_table_insert(node: NodeContext) -> Callable[..., Any]:
    def insert(handle: ResourceHandle, keys: np.ndarray, values: np.ndarray) -> None:
        handle.resource.insert(keys, values)

    return insert


@kernel("LookupTableImport", "LookupTableImportV2")
def lookup_table_import(node: NodeContext) -> Callable[..., Any]:
    def import_values(handle: ResourceHandle, keys: np.ndarray, values: np.ndarray) -> None:
        handle.resource.import_values(keys, values)

    return import_values


@kernel("LookupTableRemoveV2")
def lookup_table_remove(node: NodeContext) -> Callable[..., Any]:
    def remove(handle: ResourceHandle, keys: np.ndarray) -> None:
        handle.resource.remove(keys)

    return remove


@kernel("LookupTableExport", "LookupTableExportV2")
def lookup_table_export(node: NodeContext) -> Callable[..., Any]:
    return lambda handle: handle.resource.export()


def _initializable(handle: ResourceHandle) -> HashTable:
    table = handle.resource
    if not isinstance(table, HashTable):
        raise InvalidArgumentError(f"Table {table.container} {table.name} is not initializable")
    return table


@kernel("InitializeTable", "InitializeTableV2")
def initialize_table(node: NodeContext) -> Callable[..., Any]:
    def initialize(handle: ResourceHandle, keys: np.ndarray, values: np.ndarray) -> None:
        table = _initializable(handle)
        if keys.ndim != 1:
            raise InvalidArgumentError(
                f"Keys must be a vector, but received shape{shape_text(keys.shape)}"
            )
        if values.ndim != 1:
            raise InvalidArgumentError(
                f"Values must be a vector, but received shape{shape_text(values.shape)}"
            )
        if keys.size != values.size:
            raise InvalidArgumentError(
                f"Keys and values must have the same size {keys.size} vs {values.size}"
            )
        table.import_values(keys, values)

    return initialize


@kernel("InitializeTableFromTextFile", "InitializeTableFromTextFileV2")
def initialize_table_from_text_file(node: NodeContext) -> Callable[..., Any]:
    spec = TextFileSpec(
        key_index=node.attr("key_index"),
        value_index=node.attr("value_index"),
        vocab_size=node.attr("vocab_size", -1),
        delimiter=node.attr("delimiter", "\t"),
        offset=node.attr("offset", 0),
    )
    readable = readable_files(node.resources)

    def initialize(handle: ResourceHandle, filename: np.ndarray) -> None:
        table = _initializable(handle)
        if filename.ndim != 0:
            raise InvalidArgumentError(
                f"filename should be a single string, but got {shape_text(filename.shape)}"
            )
        path = filename.item()
        path = os.fsdecode(path) if isinstance(path, bytes) else str(path)
        if not path:
            raise InvalidArgumentError("filename cannot be empty.")
        # Before anything else, even on an initialized table: a refused path is refused always.
        readable.check(path, FileUse.ASSET, node.op)
        check_dtypes(spec, table.key_dtype, table.value_dtype)
        if table.initialized:
            # TensorFlow lets a table initialized from a file be initialized again (the shared
            # name names the file), keeping what it holds.
            return
        keys, values = read_entries(path, spec, table.key_dtype, table.value_dtype)
        try:
            table.initialize(keys, values)
        except FailedPreconditionError:
            if not table.initialized:
                raise

    return initialize
