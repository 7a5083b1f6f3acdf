"""CPU kernels: the TensorArray family (V3, and the V2 names over the same kernels).

The handle a TensorArray op takes is the ``runtime.kernels.tensor_array.TensorArray`` that
``TensorArrayV3`` made in this run. Accessors follow TensorFlow's kernels
(``tensorflow/core/kernels/tensor_array_ops.cc``): the same checks in the same order, the same
messages. A write returns its ``flow_in`` unchanged, as TensorFlow's does: the flow only carries
ordering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.tensor_array import (
    TensorArray,
    as_tensor_array,
    dtype_of,
    type_name,
    unique_name,
)
from runtime.kernels.tensor_list import PartialShape, compatible, fully_defined, shape_str

_FLOW = np.zeros((), np.float32)
_FLOW.flags.writeable = False


def _scalar_index(index: Any) -> int:
    array = np.asarray(index)
    if array.ndim != 0:
        raise InvalidArgumentError(
            f"TensorArray index must be scalar, but had shape: {shape_str(array.shape)}"
        )
    return int(array)


def _vector(values: Any, what: str) -> list[int]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidArgumentError(
            f"Expected {what} to be a vector, but received shape: {shape_str(array.shape)}"
        )
    return [int(v) for v in array.tolist()]


def _check_write_dtype(array: TensorArray, value: np.ndarray) -> None:
    value_dtype = dtype_of(value)
    if value_dtype != array.dtype:
        raise InvalidArgumentError(
            f"TensorArray dtype is {type_name(array.dtype)} but Op is trying to write dtype "
            f"{type_name(value_dtype)}."
        )


def _check_read_dtype(array: TensorArray, dtype: DataType) -> None:
    if dtype != array.dtype:
        raise InvalidArgumentError(
            f"TensorArray dtype is {type_name(array.dtype)} but Op requested dtype "
            f"{type_name(dtype)}."
        )


def _empty(leading: int, shape: PartialShape, dtype: DataType) -> np.ndarray:
    assert shape is not None
    return np.zeros((leading, *shape), dtypes.to_numpy(dtype))


@kernel("TensorArrayV3", "TensorArrayV2")
def tensor_array(node: NodeContext) -> Callable[..., Any]:
    dtype = DataType.of(node.attr("dtype"))
    element_shape = node.attr("element_shape", None)
    identical = bool(node.attr("identical_element_shapes", False))
    dynamic_size = bool(node.attr("dynamic_size", False))
    clear_after_read = bool(node.attr("clear_after_read", True))
    name = node.attr("tensor_array_name", "") or node.name
    with_flow = node.num_outputs == 2

    def create(size: Any) -> Any:
        size_array = np.asarray(size)
        if size_array.ndim != 0:
            raise InvalidArgumentError(
                f"TensorArray size must be scalar, but had shape: {shape_str(size_array.shape)}"
            )
        count = int(size_array)
        if count < 0:
            raise InvalidArgumentError("Size should be >= 0.")
        array = TensorArray(
            unique_name(name), dtype, count, element_shape, identical, dynamic_size,
            clear_after_read,
        )
        return (array, _FLOW) if with_flow else array

    return create


@kernel("TensorArrayWriteV3", "TensorArrayWriteV2")
def tensor_array_write(node: NodeContext) -> Callable[..., Any]:
    def write(handle: Any, index: Any, value: Any, flow_in: Any) -> Any:
        position = _scalar_index(index)
        array = as_tensor_array(handle)
        value = np.asarray(value)
        _check_write_dtype(array, value)
        array.write(position, value)
        return flow_in

    return write


@kernel("TensorArrayReadV3", "TensorArrayReadV2")
def tensor_array_read(node: NodeContext) -> Callable[..., Any]:
    dtype = DataType.of(node.attr("dtype"))

    def read(handle: Any, index: Any, flow_in: Any) -> np.ndarray:
        position = _scalar_index(index)
        array = as_tensor_array(handle)
        _check_read_dtype(array, dtype)
        return array.read(position)

    return read


@kernel("TensorArrayGatherV3", "TensorArrayGatherV2")
def tensor_array_gather(node: NodeContext) -> Callable[..., Any]:
    dtype = DataType.of(node.attr("dtype"))
    element_shape: PartialShape = node.attr("element_shape", None)

    def gather(handle: Any, indices: Any, flow_in: Any) -> np.ndarray:
        array = as_tensor_array(handle)
        _check_read_dtype(array, dtype)
        array.set_element_shape(element_shape)
        positions = _vector(indices, "indices")
        if not positions:
            # The op's own element_shape, not the array's, as in TensorFlow.
            if not fully_defined(element_shape):
                raise UnimplementedError(
                    f"TensorArray has size zero, but element shape {shape_str(element_shape)} "
                    "is not fully defined. Currently only static shapes are supported when "
                    "packing zero-size TensorArrays."
                )
            return _empty(0, element_shape, dtype)
        values = array.read_many(positions)
        first = values[0].shape
        if not compatible(element_shape, first):
            raise InvalidArgumentError(
                f"TensorArray was passed element_shape {shape_str(element_shape)} which does "
                f"not match the Tensor at index 0: {shape_str(first)}"
            )
        for i, value in enumerate(values[1:], start=1):
            if value.shape != first:
                raise InvalidArgumentError(
                    f"TensorArray has inconsistent shapes.  Index 0 has shape: "
                    f"{shape_str(first)} but index {i} has shape: {shape_str(value.shape)}"
                )
        return np.stack(values)

    return gather


@kernel("TensorArrayScatterV3", "TensorArrayScatterV2")
def tensor_array_scatter(node: NodeContext) -> Callable[..., Any]:
    def scatter(handle: Any, indices: Any, value: Any, flow_in: Any) -> Any:
        array = as_tensor_array(handle)
        value = np.asarray(value)
        _check_write_dtype(array, value)
        if value.ndim == 0:
            raise InvalidArgumentError(
                "Input value for unpack must be at least a vector but received shape: []"
            )
        size = array.size()
        positions = _vector(indices, "indices")
        if len(positions) != value.shape[0]:
            raise InvalidArgumentError(
                f"Expected len(indices) == values.shape[0], but saw: {len(positions)} vs. "
                f"{value.shape[0]}"
            )
        max_index = max(positions, default=-1)
        if array.dynamic_size:
            size = max(size, max_index + 1)
        if max_index >= size:
            raise InvalidArgumentError(
                f"Max scatter index must be < array size ({max_index} vs. {size})"
            )
        # ``value[i, ...]`` keeps a 0-d row an array (``value[i]`` would be a numpy scalar).
        array.write_many(positions, [value[i, ...] for i in range(len(positions))])
        return flow_in

    return scatter


@kernel("TensorArrayConcatV3", "TensorArrayConcatV2")
def tensor_array_concat(node: NodeContext) -> Callable[..., Any]:
    dtype = DataType.of(node.attr("dtype"))
    except0: PartialShape = node.attr("element_shape_except0", None)

    def concat(handle: Any, flow_in: Any) -> tuple[np.ndarray, np.ndarray]:
        array = as_tensor_array(handle)
        _check_read_dtype(array, dtype)
        size = array.size()
        if size == 0:
            if not fully_defined(except0):
                raise UnimplementedError(
                    f"TensorArray has size zero, but element_shape_except0 "
                    f"{shape_str(except0)} is not fully defined. Currently only static shapes "
                    "are supported when concatenating zero-size TensorArrays."
                )
            return _empty(0, except0, dtype), np.zeros(0, np.int64)
        values = array.read_many(range(size))
        rest: tuple[int, ...] = ()
        for i, value in enumerate(values):
            if value.ndim == 0:
                raise InvalidArgumentError(
                    f"Concat saw a scalar shape at index {i} but requires at least vectors.  "
                    "Did you mean to call pack?"
                )
            if i == 0:
                rest = value.shape[1:]
                if not compatible(except0, rest):
                    raise InvalidArgumentError(
                        f"TensorArray was passed element_shape_except0 {shape_str(except0)} but "
                        f"index 0 has (excepting dimension 0) shape: {shape_str(rest)} which "
                        "does not match."
                    )
            elif value.shape[1:] != rest:
                raise InvalidArgumentError(
                    "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) "
                    f"shape: {shape_str(rest)} but index {i} has (excepting dimension 0) shape: "
                    f"{shape_str(value.shape[1:])}"
                )
        lengths = np.array([value.shape[0] for value in values], np.int64)
        return np.concatenate(values), lengths

    return concat


@kernel("TensorArraySplitV3", "TensorArraySplitV2")
def tensor_array_split(node: NodeContext) -> Callable[..., Any]:
    def split(handle: Any, value: Any, lengths: Any, flow_in: Any) -> Any:
        array = as_tensor_array(handle)
        value = np.asarray(value)
        lengths_array = np.asarray(lengths)
        if lengths_array.ndim != 1:
            raise InvalidArgumentError(
                "Expected lengths to be a vector, received shape: "
                f"{shape_str(lengths_array.shape)}"
            )
        sizes = [int(n) for n in lengths_array.tolist()]
        if value.ndim == 0:
            raise InvalidArgumentError(
                "Expected value to be at least a vector, but received shape: []"
            )
        total = sum(sizes)
        if total != value.shape[0]:
            raise InvalidArgumentError(
                "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                f"{total} and value's shape is: {shape_str(value.shape)}"
            )
        size = array.size()
        if array.dynamic_size:
            size = max(size, len(sizes))
        if size != len(sizes):
            raise InvalidArgumentError(
                f"TensorArray's size is not equal to the size of lengths ({size} vs. "
                f"{len(sizes)}), and the TensorArray is not marked as dynamically resizeable"
            )
        _check_write_dtype(array, value)
        bounds = np.cumsum([0, *sizes]).tolist()
        pieces = [value[bounds[i]:bounds[i + 1]] for i in range(len(sizes))]
        array.write_many(range(len(sizes)), pieces)
        return flow_in

    return split


@kernel("TensorArraySizeV3", "TensorArraySizeV2")
def tensor_array_size(node: NodeContext) -> Callable[..., Any]:
    def size(handle: Any, flow_in: Any) -> np.ndarray:
        return np.array(as_tensor_array(handle).size(), np.int32)

    return size


@kernel("TensorArrayCloseV3", "TensorArrayCloseV2")
def tensor_array_close(node: NodeContext) -> Callable[..., Any]:
    def close(handle: Any) -> None:
        as_tensor_array(handle).close()

    return close

