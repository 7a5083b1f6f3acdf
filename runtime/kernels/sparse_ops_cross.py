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

Served crosses are small (a few hundred rows at most, a feature or a few per row), where numpy's
fixed cost per call dominates. So columns with one feature per row, in row order (single-valued
feature columns), skip the product; small crosses are laid out and hashed over Python ints; and
only large ones take the vectorised path. ``sparse_ops_cross_columns`` checks the inputs and
finds which features each output combines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels import fingerprint
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.sparse_ops_cross_columns import (
    SMALL_OUTPUTS,
    U64,
    Columns,
    Product,
    cross_product,
    gather_columns,
    is_string,
    validate,
)

_MUL = 0xC6A4A7935BD1E995
_CAT_MUL = U64(_MUL)
_SHIFT = U64(47)
_INT64_MAX = (1 << 63) - 1
# Up to this many FingerprintCat64 steps (distinct combinations times columns) Python ints, at
# about a microsecond a step, beat numpy's eleven calls a column.
SMALL_FOLDS = 32


def _cat_numpy(acc: np.ndarray | np.uint64, fp: np.ndarray) -> np.ndarray:
    """TensorFlow's ``FingerprintCat64(acc, fp)`` (order matters) of 1-D uint64 arrays, whose
    integer overflow numpy leaves silent, or of a scalar ``acc`` and an array; ``acc`` and ``fp``
    are left as they are."""
    mixed = fp * _CAT_MUL
    mixed ^= mixed >> _SHIFT
    mixed *= _CAT_MUL
    mixed ^= acc ^ _CAT_MUL
    mixed *= _CAT_MUL
    mixed ^= mixed >> _SHIFT
    mixed *= _CAT_MUL
    mixed ^= mixed >> _SHIFT
    return mixed


def _cat_int(fp1: int, fp2: int) -> int:
    """``FingerprintCat64`` of two Python ints."""
    mask = fingerprint.MASK
    mixed = (fp2 * _MUL) & mask
    result = (fp1 ^ _MUL) ^ (((mixed ^ (mixed >> 47)) * _MUL) & mask)
    result = (result * _MUL) & mask
    result = ((result ^ (result >> 47)) * _MUL) & mask
    return result ^ (result >> 47)


def as_strings(values: np.ndarray) -> np.ndarray:
    """String features as an object array of bytes; int64 ones in decimal."""
    flat = values.reshape(-1)
    if is_string(flat):
        return flat.astype(object)
    out: np.ndarray = flat.astype("S").astype(object)
    return out


Hashes = list[int] | np.ndarray  # a column's feature hashes: uint64 values


def hash_distinct(data: list[bytes], one: Callable[[bytes], int],
                  many: Callable[[list[bytes]], np.ndarray], small: int) -> Hashes:
    """The hash of each string of ``data``: ``one`` at a time over Python ints below ``small``
    distinct strings, else ``many`` at once. Each distinct string is hashed once: a batch's
    features repeat a few vocabulary words, and a string costs microseconds to hash."""
    if len(data) < 3:  # nothing worth sharing
        return [one(s) for s in data]
    distinct = dict.fromkeys(data)
    if len(distinct) < small:
        table = {s: one(s) for s in distinct}
    elif len(distinct) == len(data):
        return many(data)
    else:
        table = dict(zip(distinct, many(list(distinct)).tolist()))
    return list(map(table.__getitem__, data))


def _picked(values: Sequence[list[Any] | np.ndarray], product: Product) -> list[list[Any]]:
    """Per column, the values each output combines, as Python lists."""
    lists = [v if isinstance(v, list) else v.tolist() for v in values]
    if product.picks is None:
        return lists
    return [[items[p] for p in pick.tolist()] for items, pick in zip(lists, product.picks)]


def cross_strings(columns: Columns, product: Product, sep: bytes) -> tuple[np.ndarray, ...]:
    n = product.indices.shape[0]
    joined = np.empty(n, dtype=object)
    if columns.features:
        strings = [as_strings(f) for f in columns.features]
        if n <= SMALL_OUTPUTS:
            joined[:] = [sep.join(combo) for combo in zip(*_picked(strings, product))]
        else:
            if product.picks is not None:
                strings = [feats[pick] for feats, pick in zip(strings, product.picks)]
            separator = np.array(sep, dtype=object)
            joined = strings[0]
            for feats in strings[1:]:
                joined = joined + separator + feats
    return product.indices, joined, product.shape(columns.batch)


def _fold_distinct(product: Product, hashes: Sequence[Hashes], start: int | None,
                   modulus: int) -> np.ndarray | None:
    """The hashed crosses over Python ints, each distinct combination folded once (rows of a
    batch repeat a few cities times a few age buckets); None when that takes too many steps."""
    combos = list(zip(*_picked(hashes, product)))
    folded = dict.fromkeys(combos, 0)
    if len(folded) * len(hashes) > SMALL_FOLDS:
        return None
    for combo in folded:
        acc, rest = (combo[0], combo[1:]) if start is None else (start, combo)
        for fp in rest:
            acc = _cat_int(acc, fp)
        folded[combo] = acc % modulus
    return np.fromiter(map(folded.__getitem__, combos), np.int64, len(combos))


def _fold_numpy(product: Product, hashes: Sequence[Hashes], start: int | None,
                modulus: int) -> np.ndarray:
    arrays = [np.asarray(h, dtype=U64) for h in hashes]
    if product.picks is not None:
        arrays = [h[p] for h, p in zip(arrays, product.picks)]
    acc: np.ndarray | np.uint64 = arrays.pop(0) if start is None else U64(start)
    for feats in arrays:
        acc = _cat_numpy(acc, feats)
    # Below 2^63 after the modulo: the int64 view reads the same numbers.
    out: np.ndarray = np.remainder(acc, U64(modulus)).view(np.int64)
    return out


def cross_hashes(columns: Columns, product: Product, hashes: Sequence[Hashes],
                 num_buckets: int, hash_key: int | None) -> tuple[np.ndarray, ...]:
    """Hashed crosses of per-column feature ``hashes`` (uint64); ``hash_key`` None starts the
    fold from the first feature (SparseCrossHashed) rather than from the key."""
    shape = product.shape(columns.batch)
    if not hashes:
        return product.indices, np.zeros(0, np.int64), shape
    start = None if hash_key is None else hash_key & fingerprint.MASK
    modulus = num_buckets if num_buckets > 0 else _INT64_MAX
    values = None
    if product.indices.shape[0] <= SMALL_OUTPUTS:
        values = _fold_distinct(product, hashes, start, modulus)
    if values is None:
        values = _fold_numpy(product, hashes, start, modulus)
    return product.indices, values, shape


def feature_hashes(features: np.ndarray) -> Hashes:
    """SparseCross's hash of each feature: Fingerprint64 of a string, an int64's own bits."""
    if is_string(features):
        # tolist() gives what as_strings(features).tolist() would, without the object copy.
        return hash_distinct(features.reshape(-1).tolist(), fingerprint.fingerprint64_one,
                             fingerprint.fingerprint64, fingerprint.SMALL_BATCH)
    return features.astype(np.int64, copy=False).view(U64)


def input_splitter(node: NodeContext) -> Callable[[Sequence[np.ndarray]], tuple[
        Sequence[np.ndarray], ...]]:
    """Splits the flat kernel inputs as (indices, values, shapes, dense, the rest)."""
    n = int(node.attr("N"))
    pos = 3 * n + len(node.attr("dense_types", []))

    def split(args: Sequence[np.ndarray]) -> tuple[Sequence[np.ndarray], ...]:
        return args[:n], args[n:2 * n], args[2 * n:3 * n], args[3 * n:pos], args[pos:]

    return split


@kernel("SparseCross")
def sparse_cross(node: NodeContext) -> Callable[..., Any]:
    hashed = bool(node.attr("hashed_output"))
    num_buckets = int(node.attr("num_buckets"))
    hash_key = int(node.attr("hash_key"))
    internal_string = int(node.attr("internal_type")) == DataType.DT_STRING
    split = input_splitter(node)

    def cross(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        indices, values, shapes, dense, _ = split(args)
        batch = validate(indices, values, shapes, dense, internal_string)
        columns = gather_columns(indices, values, dense, batch)
        product = cross_product(columns)
        if not hashed:
            return cross_strings(columns, product, b"_X_")
        hashes = [feature_hashes(f) for f in columns.features]
        return cross_hashes(columns, product, hashes, num_buckets, hash_key)

    return cross


def _debug_string(x: np.ndarray) -> str:
    """A small string tensor as ``Tensor::DebugString`` prints it (up to three values)."""
    flat = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in x.reshape(-1)[:3].tolist()]
    more = "..." if x.size > 3 else ""
    return f"Tensor<type: string shape: {shape_str(x.shape)} values: {' '.join(flat)}{more}>"


@kernel("SparseCrossV2")
def sparse_cross_v2(node: NodeContext) -> Callable[..., Any]:
    split = input_splitter(node)

    def cross(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        indices, values, shapes, dense, (sep,) = split(args)
        batch = validate(indices, values, shapes, dense)
        if sep.ndim != 0:
            raise InvalidArgumentError(
                f"Input separator should be a scalar. Received: {_debug_string(sep)}"
            )
        separator = sep.item()
        if not isinstance(separator, bytes):
            separator = str(separator).encode()
        columns = gather_columns(indices, values, dense, batch)
        return cross_strings(columns, cross_product(columns), separator)

    return cross
