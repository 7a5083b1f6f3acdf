"""CPU kernels: hashing strings into buckets (StringToHashBucket*) and the Fingerprint op.

The hash functions themselves live in ``fingerprint``. A bucket is ``hash % num_buckets`` taken
on the unsigned 64-bit hash, then stored as int64 (always in range, as num_buckets is an int64).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import fingerprint
from runtime.kernels.registry import KernelError, NodeContext, kernel
from runtime.kernels.string_common import attr_text, flat_strings, shape_text


def _num_buckets(node: NodeContext) -> np.uint64:
    buckets = int(node.attr("num_buckets"))
    if buckets < 1:
        raise KernelError(node, f"num_buckets must be at least 1, got {buckets}")
    return np.uint64(buckets)


# Distinct strings a node remembers the bucket of. A categorical feature has few distinct values,
# so a request rarely hashes anything; past this many the memory is dropped and refilled.
CACHE_LIMIT = 4096


def _bucket_kernel(
    buckets: np.uint64, hash_all: Callable[[list[bytes]], np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    """A StringToHashBucket* kernel: ``hash_all`` gives the uint64 hashes of a list of strings,
    taken modulo ``buckets``. The buckets already computed are reused (the hash is a pure
    function of the string)."""
    known: dict[bytes, int] = {}

    def hash_new(strings: list[bytes]) -> list[int]:
        distinct = list(dict.fromkeys(strings))
        found = dict(zip(distinct, (hash_all(distinct) % buckets).tolist()))
        if len(known) + len(found) > CACHE_LIMIT:
            known.clear()
        if len(found) <= CACHE_LIMIT:
            known.update(found)
        return [found[s] for s in strings]

    def run(x: np.ndarray) -> np.ndarray:
        strings = flat_strings(x)
        try:
            values = [known[s] for s in strings]
        except KeyError:  # a string not seen yet (or the memory was dropped meanwhile)
            values = hash_new(strings)
        return np.array(values, dtype=np.int64).reshape(x.shape)

    return run


@kernel("StringToHashBucketFast")
def string_to_hash_bucket_fast(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    return _bucket_kernel(_num_buckets(node), fingerprint.fingerprint64)


@kernel("StringToHashBucketStrong")
def string_to_hash_bucket_strong(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    buckets = _num_buckets(node)
    key = [int(k) for k in node.attr("key")]
    if len(key) != 2:
        raise KernelError(node, "Key must have 2 elements")
    return _bucket_kernel(buckets, lambda strings: fingerprint.siphash(strings, key[0], key[1]))


@kernel("StringToHashBucket")
def string_to_hash_bucket(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    return _bucket_kernel(_num_buckets(node), fingerprint.legacy_hash64)


def _le_bytes(hashes: np.ndarray) -> np.ndarray:
    """Each uint64 as its 8 little-endian bytes: shape [n, 8] uint8."""
    return hashes.astype("<u8").view(np.uint8).reshape(-1, 8)


@kernel("Fingerprint")
def fingerprint_op(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def run(data: np.ndarray, method: np.ndarray) -> np.ndarray:
        if method.ndim != 0:
            raise InvalidArgumentError(
                f"`method` should be a scalar string: {shape_text(method.shape)}"
            )
        name = attr_text(method.item())
        if name != "farmhash64":
            raise InvalidArgumentError(f"Unsupported fingerprint method: {name}")
        if data.ndim < 1:
            raise InvalidArgumentError(
                f"`data` should have at least one dimension: {shape_text(data.shape)}"
            )
        rows = data.shape[0]
        per_row = data.size // rows if rows else 0
        if data.dtype == object and per_row > 0:
            hashes = fingerprint.fingerprint64(flat_strings(data))
            if per_row > 1:
                # Several strings a row: the row's fingerprint is that of its strings' ones.
                row_bytes = _le_bytes(hashes).reshape(rows, per_row * 8)
                hashes = fingerprint.fingerprint64([r.tobytes() for r in row_bytes])
        elif data.dtype == object:
            hashes = fingerprint.fingerprint64([b""] * rows)
        else:
            raw: Any = np.ascontiguousarray(data).view(np.uint8).reshape(rows, -1) if rows else []
            hashes = fingerprint.fingerprint64([bytes(r) for r in raw])
        return _le_bytes(hashes).reshape(rows, 8)

    return run
