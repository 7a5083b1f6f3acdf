"""The string hash functions: both code paths of Fingerprint64 agree, and agree with TensorFlow.

TensorFlow's own values are in the ``string_ops`` recording (StringToHashBucketFast with
``num_buckets = 2**63 - 1`` keeps 63 bits of each hash, and the Fingerprint op keeps all 64).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.kernels import fingerprint, string_hash_ops
from runtime.kernels.registry import instantiate
from tests.runtime.kernels.cases_string_ops import HASH_INPUT, LENGTHS
from tests.runtime.kernels.check import load_recording

RECORDING = load_recording("string_ops")
# Padding a batch past every small-batch threshold forces the vectorised code.
PAD = max(fingerprint.SMALL_BATCH, fingerprint.SMALL_BATCH_SIPHASH, fingerprint.SMALL_BATCH_LEGACY)


def _vectorised(strings: list[bytes]) -> np.ndarray:
    words = list(strings) + [b""] * PAD
    return fingerprint.fingerprint64(words)[: len(strings)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=40))
def test_vectorised_and_scalar_paths_agree(strings: list[bytes]) -> None:
    expected = np.array([fingerprint.fingerprint64_one(s) for s in strings], dtype=np.uint64)
    np.testing.assert_array_equal(_vectorised(strings), expected)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.binary(max_size=80), min_size=1, max_size=20),
    st.integers(-(2**63), 2**64 - 1),
    st.integers(-(2**63), 2**64 - 1),
)
def test_keyed_and_legacy_hashes_agree_on_both_paths(
    strings: list[bytes], key0: int, key1: int
) -> None:
    padded = strings + [b""] * PAD
    sip = fingerprint.siphash(padded, key0, key1)[: len(strings)]
    mask = 2**64 - 1
    expected = [fingerprint.siphash_one(s, key0 & mask, key1 & mask) for s in strings]
    np.testing.assert_array_equal(sip, np.array(expected, dtype=np.uint64))
    legacy = fingerprint.legacy_hash64(padded)[: len(strings)]
    expected = [fingerprint.legacy_hash64_one(s) for s in strings]
    np.testing.assert_array_equal(legacy, np.array(expected, dtype=np.uint64))


def test_every_length_class_on_both_paths() -> None:
    strings = LENGTHS.tolist()
    scalar = np.array([fingerprint.fingerprint64_one(s) for s in strings], dtype=np.uint64)
    np.testing.assert_array_equal(_vectorised(strings), scalar)
    recorded = RECORDING["fast_lengths_9223372036854775807/out0"].astype(np.uint64)
    np.testing.assert_array_equal(scalar % np.uint64(2**63 - 1), recorded)


def test_fingerprint_op_keeps_all_64_bits() -> None:
    # A 1-D string tensor: each row's fingerprint is the string's own, little-endian.
    words = [b"the", b"quick", b"", "café".encode()]
    data = np.empty(4, dtype=object)
    data[:] = words
    fn = instantiate("Fingerprint", {"T": 7})
    out = fn(data, np.array(b"farmhash64", dtype=object))
    assert out.shape == (4, 8) and out.dtype == np.uint8
    ours = out.view("<u8")[:, 0]
    np.testing.assert_array_equal(ours, [fingerprint.fingerprint64_one(w) for w in words])
    # farmhash's value for the empty string is its constant k2.
    assert int(ours[2]) == fingerprint.K2


def test_recorded_random_batch_through_the_kernel() -> None:
    fn = instantiate("StringToHashBucketFast", {"num_buckets": 2**63 - 1})
    np.testing.assert_array_equal(fn(HASH_INPUT), RECORDING["fast_random_9223372036854775807/out0"])


def test_strong_hash_of_empty_batch_and_key_wraparound() -> None:
    assert fingerprint.siphash([], 1, 2).shape == (0,)
    # Negative key words are their two's-complement uint64s, as TensorFlow reads the attr.
    a = fingerprint.siphash([b"abc"], -1, 5)
    b = fingerprint.siphash([b"abc"], 2**64 - 1, 5)
    np.testing.assert_array_equal(a, b)


def test_bucket_kernels_reuse_buckets_and_forget_past_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One kernel instance over calls: misses, hits, a batch with one new string, and a memory
    # dropped when it would grow past its limit all give the recorded buckets.
    monkeypatch.setattr(string_hash_ops, "CACHE_LIMIT", 4)
    strings = HASH_INPUT.reshape(-1)[:6]
    expected = RECORDING["fast_random_1000003/out0"].reshape(-1)[:6]
    fast = instantiate("StringToHashBucketFast", {"num_buckets": 1000003})
    for batch in ([0, 1, 0], [1, 0, 1, 1], [2, 0], [3, 4, 5], [0, 1, 2, 3, 4, 5], [5, 5]):
        np.testing.assert_array_equal(fast(strings[batch]), expected[batch])
    for op, key in (
        ("StringToHashBucket", "legacy_random"),
        ("StringToHashBucketStrong", "strong_random"),
    ):
        attrs = {"num_buckets": 2**63 - 1, "key": [0xDECAFCAFFE, -17]}
        kernel = instantiate(op, attrs)
        for batch in ([0, 1], [1, 0, 2], [0]):
            np.testing.assert_array_equal(
                kernel(strings[batch]), RECORDING[f"{key}/out0"].reshape(-1)[batch]
            )
