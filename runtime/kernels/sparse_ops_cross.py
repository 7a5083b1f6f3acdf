"""CPU kernels: feature crosses — SparseCross (``crossed_column``) and SparseCrossV2 (string
crosses with a chosen separator); SparseCrossHashed (``sparse_ops_cross_hashed``) shares the
machinery here.

Inputs are ``N`` sparse ``[batch, ?]`` tensors followed by dense ``[batch, width]`` ones, each a
column of features. For each batch row the output holds every combination of one feature from
each column — the product of the row's feature counts, none if a column has no feature there —
in odometer order (the last column varies fastest). A sparse column's row ``b`` is the run of
entries whose ``indices[:, 0]`` is ``b``, read in input order; the second index is ignored.

A combination becomes a string (the features joined by the separator, int64 features in decimal)
or a hash: each feature's 64-bit hash (farmhash ``Fingerprint64`` of a string, an int64's own
value) folded left to right with ``FingerprintCat64``, starting from ``hash_key``, then taken
modulo ``num_buckets`` (or modulo 2^63-1 when there are no buckets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels import fingerprint
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.sparse_ops_common import dims_text

U64 = np.uint64
_CAT_MUL = U64(0xC6A4A7935BD1E995)
_INT64_MAX = U64((1 << 63) - 1)


def fingerprint_cat64(fp1: np.ndarray, fp2: np.ndarray) -> np.ndarray:
    """TensorFlow's ``FingerprintCat64``: combine two fingerprints (order matters)."""
    with np.errstate(over="ignore"):
        mixed = fp2 * _CAT_MUL
        result = (fp1 ^ _CAT_MUL) ^ ((mixed ^ (mixed >> U64(47))) * _CAT_MUL)
        result = result * _CAT_MUL
        result = (result ^ (result >> U64(47))) * _CAT_MUL
        out: np.ndarray = result ^ (result >> U64(47))
    return out


def is_string(x: np.ndarray) -> bool:
    return x.dtype == object or x.dtype.kind in "SU"


@dataclass(frozen=True)
class Columns:
    """The crossed columns: each one's feature values (flat) and, per batch row, where the row's
    features start among them and how many there are."""

    batch: int
    features: tuple[np.ndarray, ...]
    starts: np.ndarray  # [columns, batch]
    counts: np.ndarray  # [columns, batch]
    sparse: int  # the first ``sparse`` columns come from sparse inputs


def validate(indices: Sequence[np.ndarray], values: Sequence[np.ndarray],
             shapes: Sequence[np.ndarray], dense: Sequence[np.ndarray],
             internal_string: bool = False) -> int:
    """TensorFlow's input checks for a cross (``ValidateInput``); returns the batch size."""
    for i, ind in enumerate(indices):
        if ind.ndim != 2:
            raise InvalidArgumentError(
                f"Input indices should be a matrix but received shape {dims_text(ind.shape)} "
                f"at position {i}"
            )
        if ind.shape[1] != 2:
            raise InvalidArgumentError(
                f"Expected D2 of index to be 2 got {ind.shape[1]} at position {i}"
            )
    for i, (ind, val) in enumerate(zip(indices, values)):
        if internal_string and not is_string(val):
            raise InvalidArgumentError(
                f"Input values should be of internal type {int(DataType.DT_STRING)} but "
                f"received {int(DataType.DT_INT64)}"
            )
        if val.ndim != 1:
            raise InvalidArgumentError(
                f"Input values should be a vector but received shape {dims_text(val.shape)} "
                f"at position {i}"
            )
        if ind.shape[0] != val.shape[0]:
            raise InvalidArgumentError(
                f"Expected size of values to be {ind.shape[0]} got {val.shape[0]} at position {i}"
            )
    for i, shape in enumerate(shapes):
        if shape.ndim != 1:
            raise InvalidArgumentError(
                f"Input shapes should be a vector but received shape {dims_text(shape.shape)} "
                f"at position {i}"
            )
        if shape.size != 2:
            raise InvalidArgumentError(
                f"shape should imply a 2D tensor, but got {dims_text(shape.shape)} at position {i}"
            )
    for i, d in enumerate(dense):
        if internal_string and not is_string(d):
            raise InvalidArgumentError(
                f"Dense inputs should be of internal type {int(DataType.DT_STRING)} but "
                f"received {int(DataType.DT_INT64)}"
            )
        if d.ndim != 2:
            raise InvalidArgumentError(
                f"Dense inputs should be a matrix but received shape {dims_text(d.shape)} at "
                f"position {i}"
            )
    batch = int(shapes[0][0]) if shapes else (dense[0].shape[0] if dense else 0)
    for i, shape in enumerate(shapes):
        if int(shape[0]) != batch:
            raise InvalidArgumentError(
                f"Expected batch size {batch} got {int(shape[0])} at position {i}"
            )
    for i, d in enumerate(dense):
        if d.shape[0] != batch:
            raise InvalidArgumentError(
                f"Expected batch size {batch} got {d.shape[0]} at dense tensor {i}"
            )
    return batch


def _sparse_rows(rows: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Each batch row's (start, count) among a sparse column's entries.

    TensorFlow walks the entries once, batch row by batch row, taking the run of entries whose
    row is the current one. A run is thus taken only while runs come in increasing row order
    within [0, batch): the first run out of that order stops the walk, and later entries are
    never read.
    """
    starts = np.zeros(batch, np.int64)
    counts = np.zeros(batch, np.int64)
    if rows.size == 0:
        return starts, counts
    run_starts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    run_rows = rows[run_starts]
    run_lengths = np.diff(np.append(run_starts, rows.size))
    ok = (run_rows >= 0) & (run_rows < batch)
    ok[1:] &= run_rows[1:] > run_rows[:-1]
    taken = np.logical_and.accumulate(ok)
    starts[run_rows[taken]] = run_starts[taken]
    counts[run_rows[taken]] = run_lengths[taken]
    return starts, counts


def gather_columns(indices: Sequence[np.ndarray], values: Sequence[np.ndarray],
                   dense: Sequence[np.ndarray], batch: int) -> Columns:
    features, starts, counts = [], [], []
    for ind, val in zip(indices, values):
        start, count = _sparse_rows(ind[:, 0], batch)
        features.append(val)
        starts.append(start)
        counts.append(count)
    for d in dense:
        width = d.shape[1]
        features.append(d.reshape(-1))
        starts.append(np.arange(batch, dtype=np.int64) * width)
        counts.append(np.full(batch, width, np.int64))
    shape = (len(features), batch)
    return Columns(batch, tuple(features), np.array(starts, np.int64).reshape(shape),
                   np.array(counts, np.int64).reshape(shape), len(indices))


def product_positions(columns: Columns) -> tuple[np.ndarray, list[np.ndarray]]:
    """The output's ``[n, 2]`` indices and, per column, which of its features each output
    combines (positions into ``columns.features[i]``)."""
    counts = columns.counts
    if counts.shape[0] == 0:
        return np.zeros((0, 2), np.int64), []
    crosses = np.prod(counts, axis=0)
    row = np.repeat(np.arange(columns.batch, dtype=np.int64), crosses)
    k = np.arange(row.size, dtype=np.int64) - np.repeat(np.cumsum(crosses) - crosses, crosses)
    # Odometer order: column i advances once every prod(counts[i+1:]) outputs.
    strides = np.ones_like(counts)
    if counts.shape[0] > 1:
        strides[:-1] = np.cumprod(counts[:0:-1], axis=0)[::-1]
    picks = [columns.starts[i][row] + (k // strides[i][row]) % counts[i][row]
             for i in range(counts.shape[0])]
    return np.stack([row, k], axis=1), picks


def output_shape(columns: Columns) -> np.ndarray:
    crosses = np.prod(columns.counts, axis=0) if columns.counts.shape[0] else np.zeros(0)
    width = int(crosses.max()) if crosses.size else 0
    return np.array([columns.batch, width], np.int64)


def as_strings(values: np.ndarray) -> np.ndarray:
    """String features as an object array of bytes; int64 ones in decimal."""
    flat = values.reshape(-1)
    if is_string(flat):
        return flat.astype(object)
    out: np.ndarray = flat.astype("S").astype(object)
    return out


def cross_strings(columns: Columns, sep: bytes) -> tuple[np.ndarray, ...]:
    out_indices, picks = product_positions(columns)
    joined = np.empty(out_indices.shape[0], dtype=object)
    if picks:
        separator = np.array(sep, dtype=object)
        joined = as_strings(columns.features[0])[picks[0]]
        for feats, pick in zip(columns.features[1:], picks[1:]):
            joined = joined + separator + as_strings(feats)[pick]
    return out_indices, joined, output_shape(columns)


def cross_hashes(columns: Columns, hashes: Sequence[np.ndarray], num_buckets: int,
                 hash_key: int | None) -> tuple[np.ndarray, ...]:
    """Hashed crosses of per-column feature ``hashes`` (uint64); ``hash_key`` None starts the
    fold from the first feature (SparseCrossHashed) rather than from the key."""
    out_indices, picks = product_positions(columns)
    n = out_indices.shape[0]
    if not picks:
        return out_indices, np.zeros(0, np.int64), output_shape(columns)
    if hash_key is None:
        acc = hashes[0][picks[0]]
        rest = zip(hashes[1:], picks[1:])
    else:
        acc = np.full(n, U64(hash_key & fingerprint.MASK), dtype=U64)
        rest = zip(hashes, picks)
    for feats, pick in rest:
        acc = fingerprint_cat64(acc, feats[pick])
    modulus = U64(num_buckets) if num_buckets > 0 else _INT64_MAX
    return out_indices, (acc % modulus).astype(np.int64), output_shape(columns)


def split_inputs(node: NodeContext, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], ...]:
    """The flat kernel inputs as (indices, values, shapes, dense, the rest)."""
    n = int(node.attr("N"))
    num_dense = len(node.attr("dense_types", []))
    pos = 3 * n + num_dense
    return (list(args[:n]), list(args[n:2 * n]), list(args[2 * n:3 * n]),
            list(args[3 * n:pos]), list(args[pos:]))


@kernel("SparseCross")
def sparse_cross(node: NodeContext) -> Callable[..., Any]:
    hashed = bool(node.attr("hashed_output"))
    num_buckets = int(node.attr("num_buckets"))
    hash_key = int(node.attr("hash_key"))
    internal_string = int(node.attr("internal_type")) == DataType.DT_STRING

    def cross(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        indices, values, shapes, dense, _ = split_inputs(node, args)
        batch = validate(indices, values, shapes, dense, internal_string)
        columns = gather_columns(indices, values, dense, batch)
        if not hashed:
            return cross_strings(columns, b"_X_")
        feature_hashes = [
            fingerprint.fingerprint64(as_strings(f).tolist()) if is_string(f)
            else f.astype(np.int64).view(U64)
            for f in columns.features
        ]
        return cross_hashes(columns, feature_hashes, num_buckets, hash_key)

    return cross


def _debug_string(x: np.ndarray) -> str:
    """A small string tensor as ``Tensor::DebugString`` prints it (up to three values)."""
    flat = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in x.reshape(-1)[:3].tolist()]
    more = "..." if x.size > 3 else ""
    return f"Tensor<type: string shape: {dims_text(x.shape)} values: {' '.join(flat)}{more}>"


@kernel("SparseCrossV2")
def sparse_cross_v2(node: NodeContext) -> Callable[..., Any]:
    def cross(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        indices, values, shapes, dense, (sep,) = split_inputs(node, args)
        batch = validate(indices, values, shapes, dense)
        if sep.ndim != 0:
            raise InvalidArgumentError(
                f"Input separator should be a scalar. Received: {_debug_string(sep)}"
            )
        separator = sep.item()
        if not isinstance(separator, bytes):
            separator = str(separator).encode()
        return cross_strings(gather_columns(indices, values, dense, batch), separator)

    return cross
