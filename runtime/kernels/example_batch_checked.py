"""Batch mode, example by example: the reference walk, and TensorFlow's messages.

``example_batch`` reads each feature across the whole batch at once and hands a batch to
``gather_checked`` whenever something needs a closer look (a record that does not parse, a
required feature missing, a type or a count that does not match, a zero-size dense row). This
walk checks each example's features in TensorFlow's order, so that the error raised is the one
TensorFlow reports first, with the example's name and index; a batch with nothing wrong comes
back as the same ``Columns`` the fast path builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from google.protobuf.message import DecodeError

from protos.tensorflow.core.example import example_pb2
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.example_parser import (
    KIND_DTYPE,
    KIND_WORD,
    Columns,
    DenseFeature,
    ListFeature,
    feature_map,
    shape_text,
    type_name,
)

_FROM_STRING = example_pb2.Example.FromString


def gather_checked(
    records: Sequence[Any],
    names: Sequence[str] | None,
    dense: Sequence[DenseFeature],
    sparse: Sequence[ListFeature],
    ragged: Sequence[ListFeature],
) -> Columns:
    """The batch's values per feature, or TensorFlow's error for its first bad example."""
    dense_buffers: list[list[Any]] = [[] for _ in dense]
    dense_counts: list[list[int]] = [[] for _ in dense]  # variable-length features only
    dense_fill = [f.default.reshape(-1).tolist() for f in dense]
    list_specs = [*sparse, *ragged]
    list_buffers: list[list[Any]] = [[] for _ in list_specs]
    list_counts: list[list[int]] = [[] for _ in list_specs]

    # One tuple per feature, so that the loop below reads locals, not attributes.
    dense_plan = [
        (d, spec.key, spec.kind, attrgetter(f"{spec.kind}.value"), spec.variable, spec.stride,
         dense_buffers[d].extend, dense_counts[d].append, dense_fill[d])
        for d, spec in enumerate(dense)
    ]
    list_plan = [
        (s, spec.key, spec.kind, attrgetter(f"{spec.kind}.value"), list_buffers[s].extend,
         list_counts[s].append)
        for s, spec in enumerate(list_specs)
    ]
    index = 0
    try:
        for index, record in enumerate(records):
            get = _FROM_STRING(record).features.feature.get
            missing: int | None = None  # a required feature that is absent
            for d, key, kind, values_of, variable, stride, extend, count, fill in dense_plan:
                feature = get(key)
                found = None if feature is None else feature.WhichOneof("kind")
                if found is None:
                    if variable:
                        count(0)
                    elif fill:
                        extend(fill)
                    elif missing is None:
                        missing = d
                    continue
                if found != kind:
                    raise _dense_type_error(names, index, dense[d], found)
                values = values_of(feature)
                if variable:
                    extend(values)
                    count(len(values))
                    if len(dense_buffers[d]) % stride:
                        raise _stride_error(names, index, dense[d], len(dense_buffers[d]))
                elif len(values) == stride:
                    extend(values)
                else:
                    raise _count_error(names, index, dense[d], len(values))
            for s, key, kind, values_of, extend, count in list_plan:
                feature = get(key)
                found = None if feature is None else feature.WhichOneof("kind")
                if found is None:
                    count(0)
                    continue
                if found != kind:
                    raise _list_type_error(names, index, list_specs[s], found)
                values = values_of(feature)
                extend(values)
                count(len(values))
            if missing is not None:
                spec = dense[missing]
                raise InvalidArgumentError(
                    f"Name: {_name(names, index)}, Feature: {spec.key} (data type: "
                    f"{type_name(spec.dtype)}) is required but could not be found."
                )
    except DecodeError:
        feature_map(records[index])  # raises TensorFlow's message for the record
        raise
    except TypeError:
        if not isinstance(records[index], str):
            raise
        encoded = [r.encode() if isinstance(r, str) else r for r in records]
        return gather_checked(encoded, names, dense, sparse, ragged)
    return Columns(dense_buffers, dense_counts, list_buffers, list_counts)


def _dense_type_error(
    names: Sequence[str] | None, index: int, spec: DenseFeature, found: str
) -> InvalidArgumentError:
    return _example_error(
        names, index, spec.key,
        f"Data types don't match. Data type: {type_name(KIND_DTYPE[found])} but expected type: "
        f"{type_name(spec.dtype)}",
    )


def _list_type_error(
    names: Sequence[str] | None, index: int, spec: ListFeature, found: str
) -> InvalidArgumentError:
    return _example_error(
        names, index, spec.key,
        f"Data types don't match. Expected type: {type_name(spec.dtype)}, Actual type: "
        f"{type_name(KIND_DTYPE[found])}",
    )


def _stride_error(
    names: Sequence[str] | None, index: int, spec: DenseFeature, total: int
) -> InvalidArgumentError:
    return _example_error(
        names, index, spec.key,
        f"Number of {KIND_WORD[spec.dtype]} values is not a multiple of stride length. Saw "
        f"{total} values but output shape is: {shape_text(spec.shape)}",
    )


def _count_error(
    names: Sequence[str] | None, index: int, spec: DenseFeature, size: int
) -> InvalidArgumentError:
    if size > spec.stride and spec.dtype == DataType.DT_STRING:
        # TensorFlow's bytes reader stops at the slot count and calls it a bad proto.
        return _example_error(names, index, spec.key, "Can't parse serialized Example.")
    return _example_error(
        names, index, spec.key,
        f"Number of {KIND_WORD[spec.dtype]} values != expected.  Values size: {size} but "
        f"output shape: {shape_text(spec.shape)}",
    )


def _name(names: Sequence[str] | None, index: int) -> str:
    return names[index] if names else "<unknown>"


def _example_error(
    names: Sequence[str] | None, index: int, key: str, suffix: str
) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Name: {_name(names, index)}, Key: {key}, Index: {index}.  {suffix}"
    )
