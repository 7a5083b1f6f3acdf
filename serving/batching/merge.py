"""Merge tasks' inputs into one batch and split the batch's outputs back, as BatchingSession does.

Pure functions over ``name -> numpy array`` mappings; the batch thread calls them. A task is one
request's inputs, all with the same dim 0 (its rows). Merging concatenates each input along dim 0,
optionally pads dims 1..n of each task's tensor up to the batch's largest (each tensor with its
own first element), and fills the rows up to the batch size with copies of the last task's first
row, a row known to be valid input. Splitting hands each task its rows and drops the padding rows.

Arrays are never mutated. Results may be views of their inputs (or the inputs themselves when
nothing needs copying), so callers must not mutate them either.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import accumulate, pairwise

import numpy as np

from runtime import dtypes
from runtime.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
)

Tensors = Mapping[str, np.ndarray]

# Upstream pads with Eigen kernels instantiated for ranks 1..6 only, and with padding on it
# sends every tensor through them, so a higher rank fails even when it needs no padding.
_MAX_PAD_RANK = 6


def task_size(inputs: Tensors) -> int:
    """Rows of one task: the dim 0 its inputs share. InvalidArgumentError otherwise."""
    if not inputs:
        raise InvalidArgumentError("Batching Run() must have at least one input tensor")
    size = -1
    for array in inputs.values():
        if array.ndim == 0:
            raise InvalidArgumentError(
                "Batching Run() input tensors must have at least one dimension"
            )
        if size < 0:
            size = int(array.shape[0])
        elif array.shape[0] != size:
            raise InvalidArgumentError(
                "Batching Run() input tensors must have equal 0th-dimension size"
            )
    return size


def round_up_to_allowed(size: int, allowed_sizes: Sequence[int]) -> int:
    """The smallest allowed size >= ``size``; ``size`` itself when none is (or none are set).

    ``allowed_sizes`` must be increasing (BatchingParams checks it).
    """
    index = bisect_left(allowed_sizes, size)
    return allowed_sizes[index] if index < len(allowed_sizes) else size


def merge_inputs(
    tasks: Sequence[Tensors], batch_size: int, pad_variable_length: bool
) -> dict[str, np.ndarray]:
    """One batch of ``batch_size`` rows from the tasks' inputs, in task order.

    Differing dims 1..n fail the batch with FailedPreconditionError unless
    ``pad_variable_length``. A lone task that needs no padding comes back as its own arrays.
    """
    if not tasks:
        raise InternalError("Batch size expected to be positive; was 0")
    if not pad_variable_length and batch_size == sum(_rows(task) for task in tasks):
        fast = _concatenated(tasks)
        if fast is not None:
            return fast
    names = tasks[0].keys()
    if any(task.keys() != names for task in tasks[1:]):
        raise InternalError("One or more tasks does not conform to batch signature")
    return {
        name: _merge_tensor(name, [task[name] for task in tasks], batch_size, pad_variable_length)
        for name in names
    }


def split_outputs(
    outputs: Tensors, sizes: Sequence[int], batch_size: int
) -> list[dict[str, np.ndarray]]:
    """Each task's rows of a batch's outputs (views), padding rows dropped.

    Every output must have ``batch_size`` rows, else FailedPreconditionError.
    """
    if not sizes:
        raise InternalError("Batch size expected to be positive; was 0")
    rows = sum(sizes)
    if rows > batch_size:
        raise InternalError(f"Tasks of {rows} rows cannot come from a batch of {batch_size}")
    for array in outputs.values():
        if array.ndim == 0:
            raise FailedPreconditionError("Batched output tensor has 0 dimensions")
        if array.shape[0] != batch_size:
            raise FailedPreconditionError(
                "Batched output tensor's 0th dimension does not equal the sum of the 0th "
                "dimension sizes of the input tensors"
            )
    if len(sizes) == 1 and rows == batch_size:
        return [dict(outputs)]
    if rows == batch_size and sizes.count(sizes[0]) == len(sizes):
        pieces = _equal_pieces(outputs, len(sizes), rows)
        if pieces is not None:
            return pieces
    bounds = list(pairwise(accumulate(sizes, initial=0)))
    return [{name: array[start:stop] for name, array in outputs.items()} for start, stop in bounds]


def split_inputs(inputs: Tensors, sizes: Sequence[int]) -> list[dict[str, np.ndarray]]:
    """A task cut along dim 0 into pieces of ``sizes`` rows (views), for large-batch splitting."""
    rows = task_size(inputs)
    if sum(sizes) != rows:
        raise InternalError(f"Split sizes {list(sizes)} do not add up to the task's {rows} rows")
    if len(sizes) == 1:
        return [dict(inputs)]
    bounds = list(pairwise(accumulate(sizes, initial=0)))
    return [{name: array[start:stop] for name, array in inputs.items()} for start, stop in bounds]


def concat_outputs(pieces: Sequence[Tensors]) -> dict[str, np.ndarray]:
    """A split task's outputs put back together along dim 0, in piece order."""
    if not pieces:
        raise InternalError("Cannot concatenate zero tensors")
    if len(pieces) == 1:
        return dict(pieces[0])
    names = pieces[0].keys()
    if any(piece.keys() != names for piece in pieces[1:]):
        raise InternalError("Pieces of a split task have different outputs")
    merged: dict[str, np.ndarray] = {}
    for name in names:
        arrays = [piece[name] for piece in pieces]
        if any(array.ndim == 0 for array in arrays):
            raise InvalidArgumentError("Cannot concatenate a zero-dimensional tensor")
        dtype = _common_dtype(arrays, wrap=False)
        inner = arrays[0].shape[1:]
        for array in arrays[1:]:
            if array.shape[1:] != inner:
                # Can happen when pieces of one task were padded to different lengths in
                # different batches; upstream has no answer for it either.
                raise FailedPreconditionError(
                    f"Outputs named '{name}' of the pieces of a split task have different "
                    f"shapes: {_shape(arrays[0])} and {_shape(array)}"
                )
        merged[name] = np.concatenate(arrays, axis=0, dtype=dtype)
    return merged


def _concatenated(payloads: Sequence[Tensors]) -> dict[str, np.ndarray] | None:
    """The common batch (several tasks, equal inputs but for dim 0, nothing to pad) with one
    ``np.concatenate`` per input; None for anything else, which the general merge handles (and
    words the errors of)."""
    if len(payloads) < 2:
        return None
    names = payloads[0].keys()
    # Every task has every name, and no more names: the same keys.
    if sum(map(len, payloads)) != len(names) * len(payloads):
        return None
    merged: dict[str, np.ndarray] = {}
    for name in names:
        try:
            arrays = [payload[name] for payload in payloads]
        except KeyError:
            return None
        if arrays[0].dtype.kind in "SU":  # the general way makes these object arrays
            return None
        try:
            # Refuses rank 0, unequal dims 1..n and (casting "no") any dtype mix.
            merged[name] = np.concatenate(arrays, dtype=arrays[0].dtype, casting="no")
        except (ValueError, TypeError):
            return None
    return merged


def _equal_pieces(outputs: Tensors, tasks: int, rows: int) -> list[dict[str, np.ndarray]] | None:
    """The outputs cut into ``tasks`` equal runs of rows (views), for tasks of equal sizes
    (batch-1 requests above all); None when an output lacks the batch's rows."""
    if not outputs or rows % tasks:
        return None
    per_task = rows // tasks
    columns = []
    for array in outputs.values():
        if array.ndim == 0 or array.shape[0] != rows:
            return None
        columns.append(list(array.reshape(tasks, per_task, *array.shape[1:])))
    names = list(outputs)
    if len(names) == 1:
        (name,) = names
        return [{name: piece} for piece in columns[0]]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _rows(task: Tensors) -> int:
    """A task's dim 0 as its first input says (0 for none or a scalar: the general way decides)."""
    for array in task.values():
        return int(array.shape[0]) if array.ndim else 0
    return 0


def _merge_tensor(name: str, arrays: list[np.ndarray], batch_size: int, pad: bool) -> np.ndarray:
    first = arrays[0]
    rows = sum(array.shape[0] for array in arrays)
    if rows > batch_size:
        raise InternalError(f"Tasks of {rows} rows cannot fit a batch of {batch_size}")
    if pad:
        inner = _padded_dims(name, arrays)
    else:
        inner = first.shape[1:]
        for array in arrays[1:]:
            if array.shape[1:] != inner:  # also catches differing ranks
                raise FailedPreconditionError(
                    f"Tensors with name '{name}' from different tasks have different shapes "
                    "and padding is turned off. Set pad_variable_length_inputs to true, or "
                    "ensure that all tensors with the same name have equal dimensions starting "
                    "with the first dim."
                )
    dtype = _common_dtype(arrays, wrap=True)
    if len(arrays) == 1 and rows == batch_size and first.shape[1:] == inner:
        return first
    batch = np.empty((batch_size, *inner), dtype=dtype)
    start = 0
    last_rows_at = 0  # where the last task with any rows begins
    for array in arrays:
        stop = start + array.shape[0]
        _place(batch[start:stop], array)
        if stop > start:
            last_rows_at = start
        start = stop
    if batch_size > rows:
        if rows:
            batch[rows:] = batch[last_rows_at]
        else:
            # No row to copy (only zero-row tasks): any value will do, the rows are dropped.
            batch[rows:] = b"" if dtype == np.dtype(object) else 0
    return batch


def _padded_dims(name: str, arrays: list[np.ndarray]) -> tuple[int, ...]:
    """Dims 1..n of the batch: the largest of each dim over the tasks."""
    rank = arrays[0].ndim
    for array in arrays:
        if not 1 <= array.ndim <= _MAX_PAD_RANK:
            raise InvalidArgumentError("Only tensors with rank from 1 to 6 can be padded.")
        if array.ndim != rank:
            raise FailedPreconditionError(
                f"Tensors with name '{name}' from different tasks have different ranks "
                f"({rank} and {array.ndim}); padding can only even out sizes of equal rank"
            )
    shapes = np.array([array.shape[1:] for array in arrays], dtype=np.int64).reshape(
        len(arrays), rank - 1
    )
    return tuple(int(n) for n in shapes.max(axis=0))


def _place(dst: np.ndarray, array: np.ndarray) -> None:
    """Write one task's tensor into its rows of the batch, padding the end of dims 1..n with
    the tensor's own first element."""
    if array.shape == dst.shape:
        dst[...] = array
        return
    if dst.size == 0:
        return
    if array.size == 0:
        raise InvalidArgumentError("Got empty tensor in batch of non-empty tensors.")
    dst[...] = array.flat[0]
    dst[tuple(slice(0, n) for n in array.shape)] = array


def _common_dtype(arrays: list[np.ndarray], *, wrap: bool) -> np.dtype:
    """The batch's dtype: the tasks' shared one; string tensors of any numpy kind merge into
    object arrays. Other mixes fail as upstream's concat does."""
    dtype = arrays[0].dtype
    for array in arrays[1:]:
        if array.dtype == dtype:
            continue
        if dtype.kind in "OSU" and array.dtype.kind in "OSU":
            dtype = np.dtype(object)
            continue
        message = (
            "Cannot concatenate tensors that have different data types. "
            f"Got {_dtype_name(dtype)} and {_dtype_name(array.dtype)}."
        )
        if wrap:  # the merge path reports the concat failure as internal
            raise InternalError(f"Tensor concat operation failed: INVALID_ARGUMENT: {message}")
        raise InvalidArgumentError(message)
    return dtype


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return dtypes.short_name(dtypes.from_numpy(dtype))
    except ValueError:
        return str(dtype)


def _shape(array: np.ndarray) -> str:
    return "[" + ",".join(str(n) for n in array.shape) + "]"
