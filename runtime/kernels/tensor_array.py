"""The storage behind a TensorArray handle, with TensorFlow's rules and messages
(``tensorflow/core/kernels/tensor_array.h``).

``TensorArrayV3`` makes a new ``TensorArray`` each time it runs, and its handle output *is* that
object: the array belongs to one run (TensorFlow keeps it in the step's resource container), so
two requests running the same plan never share one. Within a run the graph's flow edges order
the accesses, and a run executes one kernel at a time, so no lock is needed.

Elements follow TensorFlow's life cycle: written once, then read (with ``clear_after_read`` only
once). Reading an element never written gives zeros when the element shape is fully known, and
is an error otherwise. Stored arrays are shared, never copied: kernels never write into arrays.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.tensor_list import (
    PartialShape,
    compatible,
    fully_defined,
    merge,
    shape_str,
)

# TensorFlow numbers every TensorArray it makes in the process, and its messages name the array
# as ``<tensor_array_name or node name>_<number>``.
_COUNTER = itertools.count()


def unique_name(name: str) -> str:
    return f"{name}_{next(_COUNTER)}"


class _Element:
    __slots__ = ("cleared", "read", "shape", "value", "written")

    def __init__(self) -> None:
        self.value: np.ndarray | None = None  # None once cleared, or zeros not yet made
        self.shape: tuple[int, ...] = ()
        self.written = False
        self.read = False
        self.cleared = False


class TensorArray:
    __slots__ = (
        "clear_after_read", "closed", "dtype", "dynamic_size", "element_shape", "elements",
        "identical_element_shapes", "name",
    )

    def __init__(
        self,
        name: str,
        dtype: DataType,
        size: int,
        element_shape: PartialShape,
        identical_element_shapes: bool,
        dynamic_size: bool,
        clear_after_read: bool,
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.elements = [_Element() for _ in range(size)]
        self.element_shape = element_shape
        self.identical_element_shapes = identical_element_shapes
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.closed = False

    def __repr__(self) -> str:
        return f"TensorArray({self.name}, {len(self.elements)} x {dtypes.short_name(self.dtype)})"

    def _check_open(self) -> None:
        if self.closed:
            raise InvalidArgumentError(f"TensorArray {self.name} has already been closed.")

    def size(self) -> int:
        self._check_open()
        return len(self.elements)

    def set_element_shape(self, candidate: PartialShape) -> None:
        self.element_shape = merge(self.element_shape, candidate)

    def close(self) -> None:
        self.elements = []
        self.closed = True

    def write(self, index: int, value: np.ndarray) -> None:
        self._check_open()
        size = len(self.elements)
        if index < 0 or (not self.dynamic_size and index >= size):
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Tried to write to index {index} but array is not "
                f"resizeable and size is: {size}"
            )
        if index >= size:  # a dynamic array grows to fit, before the checks below (as in TF)
            self.elements.extend(_Element() for _ in range(index + 1 - size))
        element = self.elements[index]
        where = f"TensorArray {self.name}: Could not write to TensorArray index {index}"
        value_dtype = dtype_of(value)
        if value_dtype != self.dtype:
            raise InvalidArgumentError(
                f"{where} because the value dtype is {type_name(value_dtype)} but TensorArray "
                f"dtype is {type_name(self.dtype)}."
            )
        if not compatible(self.element_shape, value.shape):
            raise InvalidArgumentError(
                f"{where} because the value shape is {shape_str(value.shape)} which is "
                "incompatible with the TensorArray's inferred element shape: "
                f"{shape_str(self.element_shape)} (consider setting infer_shape=False)."
            )
        if self.identical_element_shapes and not fully_defined(self.element_shape):
            self.element_shape = tuple(value.shape)
        if element.read:
            raise InvalidArgumentError(f"{where} because it has already been read.")
        if element.written:
            raise InvalidArgumentError(f"{where} because it has already been written to.")
        element.value = value
        element.shape = tuple(value.shape)
        element.written = True

    def read(self, index: int) -> np.ndarray:
        self._check_open()
        size = len(self.elements)
        if index < 0 or index >= size:
            raise InvalidArgumentError(
                f"Tried to read from index {index} but array size is: {size}"
            )
        element = self.elements[index]
        if not element.written:
            if not fully_defined(self.element_shape):
                raise InvalidArgumentError(
                    f"TensorArray {self.name}: Could not read from TensorArray index {index}.  "
                    "Furthermore, the element shape is not fully defined: "
                    f"{shape_str(self.element_shape)}.  It is possible you are working with a "
                    "resizeable TensorArray and stop_gradients is not allowing the gradients to "
                    "be written.  If you set the full element_shape property on the forward "
                    "TensorArray, the proper all-zeros tensor will be returned instead of "
                    "incurring this error."
                )
            assert self.element_shape is not None
            element.shape = self.element_shape
            element.written = True
        if element.cleared:
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not read index {index} twice because it was "
                "cleared after a previous read (perhaps try setting clear_after_read = false?)."
            )
        value = element.value
        if value is None:  # written as "zeros of this shape" only
            value = zeros(element.shape, self.dtype)
            element.value = value
        if self.clear_after_read:
            element.value = None
            element.cleared = True
        element.read = True
        return value

    def read_many(self, indices: Sequence[int]) -> list[np.ndarray]:
        return [self.read(index) for index in indices]

    def write_many(self, indices: Sequence[int], values: Sequence[np.ndarray]) -> None:
        for index, value in zip(indices, values):
            self.write(index, value)


def zeros(shape: Sequence[int], dtype: DataType) -> np.ndarray:
    """TensorFlow's zero element; it has zeros only for number types."""
    np_dtype = dtypes.to_numpy(dtype)
    if int(np.prod(shape)) > 0 and (np_dtype == object or np_dtype == np.bool_):
        raise InvalidArgumentError(
            f"tensor_array::TensorSetZero type not supported: {type_name(dtype)}"
        )
    return np.zeros(tuple(shape), np_dtype)


def as_tensor_array(handle: Any) -> TensorArray:
    if isinstance(handle, np.ndarray) and handle.dtype == object and handle.shape == ():
        handle = handle.item()
    if not isinstance(handle, TensorArray):
        raise InvalidArgumentError(
            f"Expected a TensorArray handle, got {type(handle).__name__}"
        )
    return handle


def dtype_of(value: np.ndarray) -> DataType | None:
    """The DataType of a kernel input (None if its numpy dtype has none)."""
    try:
        return dtypes.from_numpy(value.dtype)
    except ValueError:
        return None


def type_name(dtype: DataType | None) -> str:
    """TensorFlow's ``DataTypeString``: ``float``, ``int32``."""
    return "unknown" if dtype is None else dtypes.short_name(dtype)
