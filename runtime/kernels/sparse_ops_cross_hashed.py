"""CPU kernel: SparseCrossHashed, the keyed hashed cross behind the Keras ``HashedCrossing``
layer (see ``sparse_ops_cross`` for what a cross is).

Its features hash differently from SparseCross's: the fold starts from the first feature's hash
rather than from a key; with ``strong_hash`` every feature is SipHashed under ``salt``; and a
sparse int64 feature is hashed as the first ``sizeof(DataType)`` = 4 bytes of its in-memory
(little-endian) value, which is what TensorFlow's kernel does, so only the low 32 bits count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import fingerprint
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.sparse_ops_cross import (
    Hashes,
    as_strings,
    cross_hashes,
    hash_distinct,
    input_splitter,
)
from runtime.kernels.sparse_ops_cross_columns import (
    U64,
    Columns,
    cross_product,
    gather_columns,
    is_string,
    validate,
)

_HASHED_INT_BYTES = 4  # sizeof(DataType), not sizeof(int64)


def _int_prefixes(values: np.ndarray) -> list[bytes]:
    """The first bytes of each int64 as stored (little-endian), as the kernel hashes them."""
    raw = values.reshape(-1).astype("<i8").view(np.uint8).reshape(-1, 8)
    data = np.ascontiguousarray(raw[:, :_HASHED_INT_BYTES]).tobytes()
    return [data[i:i + _HASHED_INT_BYTES] for i in range(0, len(data), _HASHED_INT_BYTES)]


def _feature_hashes(columns: Columns, strong: bool, key: tuple[int, int]) -> list[Hashes]:
    k0, k1 = key[0] & fingerprint.MASK, key[1] & fingerprint.MASK

    def siphash_one(data: bytes) -> int:
        return fingerprint.siphash_one(data, k0, k1)

    def siphash(data: list[bytes]) -> np.ndarray:
        return fingerprint.siphash(data, *key)

    hashes: list[Hashes] = []
    for i, feats in enumerate(columns.features):
        if is_string(feats):
            data = as_strings(feats).tolist()
        elif strong or i < columns.sparse:
            data = _int_prefixes(feats)
        else:  # a dense int64 feature hashed weakly is its own value
            hashes.append(feats.astype(np.int64).reshape(-1).view(U64))
            continue
        if strong:
            hashes.append(hash_distinct(data, siphash_one, siphash,
                                        fingerprint.SMALL_BATCH_SIPHASH))
        else:
            hashes.append(hash_distinct(data, fingerprint.fingerprint64_one,
                                        fingerprint.fingerprint64, fingerprint.SMALL_BATCH))
    return hashes


@kernel("SparseCrossHashed")
def sparse_cross_hashed(node: NodeContext) -> Callable[..., Any]:
    split = input_splitter(node)

    def cross(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        indices, values, shapes, dense, rest = split(args)
        num_buckets, strong_hash, salt = rest
        batch = validate(indices, values, shapes, dense)
        if salt.size != 2:
            raise InvalidArgumentError(
                f'Input "salt" must have length 2 but has length {salt.size}'
            )
        key = (int(salt.reshape(-1)[0]), int(salt.reshape(-1)[1]))
        columns = gather_columns(indices, values, dense, batch)
        hashes = _feature_hashes(columns, bool(strong_hash), key)
        return cross_hashes(columns, cross_product(columns), hashes, int(num_buckets), None)

    return cross
