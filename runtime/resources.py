"""Per-session resources: resource variables and lookup tables, each keyed by
(container, shared_name) as in TensorFlow.

A ``Variable`` holds its current value as a numpy array. Reads return that array itself, and
writes replace it with a fresh array instead of writing into it, so a value already handed to a
request is never changed underneath it.

Tables (``runtime.lookup_tables``) live as long as the model: the load-time session that runs the
init op and the serving session share one manager, so a table filled at load serves every request.

The manager also carries the model's ``ReadableFiles``: the kernels that open a file (a table's text
file, the checkpoint) reach it here, through ``readable_files``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from runtime.errors import FailedPreconditionError, InvalidArgumentError
from runtime.readable_files import UNRESTRICTED, ReadableFiles

if TYPE_CHECKING:
    from runtime.lookup_tables import LookupTable


@dataclass(eq=False)
class Variable:
    container: str
    name: str
    dtype: np.dtype
    shape: tuple[int, ...] | None
    value: np.ndarray | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read(self) -> np.ndarray:
        value = self.value
        if value is None:
            raise FailedPreconditionError(
                f"Could not find variable {self.name}. This could mean that the variable has "
                "been deleted or was never initialized (restored)."
            )
        return value

    def assign(self, value: Any) -> None:
        array = np.array(value, dtype=self.dtype, copy=True)
        if self.shape is not None and not _compatible(self.shape, array.shape):
            raise InvalidArgumentError(
                f"Trying to assign to variable {self.name} a value of shape {list(array.shape)}; "
                f"the variable has shape {list(self.shape)}"
            )
        array.flags.writeable = False
        self.value = array


@dataclass(frozen=True, eq=False)
class ResourceHandle:
    """What a DT_RESOURCE tensor carries here: the resource itself (a ``Variable`` or a
    ``LookupTable``)."""

    resource: Any

    def __repr__(self) -> str:
        return f"ResourceHandle({self.resource.container}/{self.resource.name})"


def _compatible(declared: tuple[int, ...], actual: tuple[int, ...]) -> bool:
    return len(declared) == len(actual) and all(d in (-1, a) for d, a in zip(declared, actual))


class ResourceManager:
    """Variables and tables of one loaded model. Thread-safe creation; values swap atomically.
    ``readable``: the files its kernels may open (see ``runtime.readable_files``)."""

    def __init__(self, readable: ReadableFiles = UNRESTRICTED) -> None:
        self.readable = readable
        self._variables: dict[tuple[str, str], Variable] = {}
        self._tables: dict[tuple[str, str], LookupTable] = {}
        self._lock = threading.Lock()

    def variable(
        self, container: str, name: str, dtype: np.dtype, shape: tuple[int, ...] | None
    ) -> Variable:
        key = (container, name)
        with self._lock:
            var = self._variables.get(key)
            if var is None:
                var = Variable(container, name, np.dtype(dtype), shape)
                self._variables[key] = var
            return var

    def find(self, container: str, name: str) -> Variable | None:
        return self._variables.get((container, name))

    def variables(self) -> list[Variable]:
        return list(self._variables.values())

    def drop_variables(self, keep: Callable[[Variable], bool]) -> int:
        """Forget the variables ``keep`` rejects; how many went."""
        with self._lock:
            dropped = [key for key, var in self._variables.items() if not keep(var)]
            for key in dropped:
                del self._variables[key]
        return len(dropped)

    def table(
        self, container: str, name: str, create: Callable[[], LookupTable]
    ) -> LookupTable:
        """The table named (container, name), made by ``create`` if there is none yet. An existing
        table must be of the same kind and dtypes as the one ``create`` would make."""
        key = (container, name)
        with self._lock:
            table = self._tables.get(key)
            if table is None:
                table = create()
                self._tables[key] = table
                return table
        wanted = create()
        if type(wanted) is not type(table) or (
            (wanted.key_dtype, wanted.value_dtype, wanted.value_shape)
            != (table.key_dtype, table.value_dtype, table.value_shape)
        ):
            from runtime.dtypes import short_name

            raise InvalidArgumentError(
                f"Conflicting key/value dtypes {short_name(wanted.key_dtype)}->"
                f"{short_name(wanted.value_dtype)} with {short_name(table.key_dtype)}-"
                f"{short_name(table.value_dtype)} for table {name}"
            )
        return table

    def find_table(self, container: str, name: str) -> LookupTable | None:
        return self._tables.get((container, name))

    def tables(self) -> list[LookupTable]:
        return list(self._tables.values())

    def clear(self) -> None:
        with self._lock:
            self._variables.clear()
            self._tables.clear()


def readable_files(resources: ResourceManager | None) -> ReadableFiles:
    """The files a kernel of the session owning ``resources`` may open; a kernel built outside a
    session (constant folding, tests) has no model directory to keep to."""
    return resources.readable if resources is not None else UNRESTRICTED
