"""The snappy decompressor, with a real compressor (cramjam, Google's algorithm in Rust) as the
oracle, and hand-built element streams for the corners a compressor rarely produces."""

from __future__ import annotations

import os
import random

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.checkpoint.coding import CodingError
from runtime.checkpoint.snappy import SnappyError, decompress, uncompressed_length
from runtime.tensor_codec import encode_varint


def compress(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def literal(data: bytes) -> bytes:
    """A literal element, in the shortest tag form for its length."""
    n = len(data) - 1
    if n < 60:
        return bytes([n << 2]) + data
    width = (n.bit_length() + 7) // 8
    return bytes([(59 + width) << 2]) + n.to_bytes(width, "little") + data


def copy1(length: int, offset: int) -> bytes:
    assert 4 <= length <= 11 and offset < 2048
    return bytes([1 | ((length - 4) << 2) | ((offset >> 8) << 5), offset & 0xFF])


def copy2(length: int, offset: int) -> bytes:
    return bytes([2 | ((length - 1) << 2)]) + offset.to_bytes(2, "little")


def copy4(length: int, offset: int) -> bytes:
    return bytes([3 | ((length - 1) << 2)]) + offset.to_bytes(4, "little")


FAR_BLOCK = os.urandom(1000)


def stream(total: int, *elements: bytes) -> bytes:
    return encode_varint(total) + b"".join(elements)


# Data a compressor turns into many copies, short and long, overlapping and not: runs, repeated
# words, and pieces of earlier output.
repetitive = st.lists(
    st.one_of(
        st.binary(max_size=80),
        st.tuples(st.binary(min_size=1, max_size=8), st.integers(1, 300)).map(
            lambda t: t[0] * t[1]
        ),
        st.sampled_from([b"kernel/.ATTRIBUTES/VARIABLE_VALUE", b"\x00" * 70, b"ab" * 40]),
    ),
    max_size=60,
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=5000), repetitive))
def test_decodes_what_a_real_compressor_writes(data: bytes) -> None:
    compressed = compress(data)
    assert uncompressed_length(compressed) == len(data)
    assert decompress(compressed) == data


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"a",
        os.urandom(70_000),  # incompressible: long literals (2-byte lengths)
        bytes(300_000),  # one long run: overlapping copies
        b"0123456789abcdef" * 20_000,  # copies reaching 16 bytes back, again and again
        # A repeat farther back than the compressor looks (it works in 64 KiB fragments, so it
        # never writes copy-4 elements; test_every_element_form builds one by hand).
        FAR_BLOCK + os.urandom(70_000) + FAR_BLOCK,
    ],
    ids=["empty", "one-byte", "random", "zeros", "period-16", "far-repeat"],
)
def test_decodes_large_and_edge_inputs(data: bytes) -> None:
    assert decompress(compress(data)) == data


def test_accepts_bytearray_and_memoryview() -> None:
    data = b"graphserve " * 100
    compressed = compress(data)
    assert decompress(bytearray(compressed)) == data
    assert decompress(memoryview(compressed)) == data


def test_every_element_form() -> None:
    body = b"abcdefgh"
    data = stream(
        8 + 4 + 7 + 2 + 64 + 3 + 300,
        literal(body),
        copy1(4, 8),  # "abcd"
        copy1(7, 3),  # overlapping: repeats "bcd"
        copy2(2, 1),  # a run of the last byte
        copy2(64, 20),  # the longest copy
        copy4(3, 80),
        literal(bytes(range(256)) + b"x" * 44),  # a literal with a 2-byte length
    )
    out = decompress(data)
    expected = bytearray(body)
    for length, offset in [(4, 8), (7, 3), (2, 1), (64, 20), (3, 80)]:
        for _ in range(length):
            expected.append(expected[-offset])
    expected += bytes(range(256)) + b"x" * 44
    assert out == bytes(expected)


def test_literal_length_forms_up_to_four_bytes() -> None:
    for size in (1, 60, 61, 256, 257, 65_536, 65_537, 16_777_217):
        payload = b"\x5a" * size
        assert decompress(stream(size, literal(payload))) == payload


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "uncompressed-length varint"),
        (b"\x80\x80", "uncompressed-length varint"),
        (b"\xff\xff\xff\xff\xff\x01", "uncompressed-length varint"),
        (b"\xff\xff\xff\xff\x7f", "does not fit in 32 bits"),
        (stream(5, literal(b"abc")), "decoded 3 bytes; the header declares 5"),
        (stream(2, literal(b"abc")), "decoded 3 bytes; the header declares 2"),
        (stream(3, literal(b"abc"))[:-1], "runs past the end of the input"),
        (stream(20, bytes([0xF0])), "runs past the end"),  # 1-byte length missing
        (stream(100, bytes([0xFC, 1, 2])), "runs past the end"),  # 4-byte length cut short
        (stream(8, literal(b"abcd"), copy1(4, 5)), "reaches 5 bytes back, but only 4"),
        (stream(8, literal(b"abcd"), copy2(4, 0)), "reaches 0 bytes back"),
        (stream(4, copy2(4, 1)), "reaches 1 bytes back, but only 0"),
        (stream(8, literal(b"abcd"), copy1(4, 1)[:1]), "runs past the end"),
        (stream(8, literal(b"abcd"), copy2(4, 1)[:2]), "runs past the end"),
        (stream(8, literal(b"abcd"), copy4(4, 1)[:4]), "runs past the end"),
        (stream(10_000, literal(b"ab")), "impossible for 3 bytes"),
        (stream(0xFFFFFFFF, literal(b"ab")), "impossible"),
    ],
)
def test_corrupt_input_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(SnappyError, match=message):
        decompress(data)


def test_snappy_errors_are_coding_errors() -> None:
    # The table reader turns CodingError into a DataLossError naming the file.
    assert issubclass(SnappyError, CodingError)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=400), st.data())
def test_damaged_streams_decode_or_raise_snappy_error(original: bytes, data: st.DataObject) -> None:
    """Flip, cut or splice any compressed stream: the result is either some bytes of exactly the
    declared length or a SnappyError, never another exception or a hang."""
    compressed = bytearray(compress(original * 3))
    action = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
    pos = data.draw(st.integers(0, len(compressed) - 1))
    if action == "flip":
        compressed[pos] ^= data.draw(st.integers(1, 255))
    elif action == "truncate":
        del compressed[pos:]
    else:
        compressed[pos:pos] = data.draw(st.binary(min_size=1, max_size=6))
    try:
        out = decompress(bytes(compressed))
    except SnappyError:
        return
    assert len(out) == uncompressed_length(bytes(compressed))


def test_random_garbage_never_escapes_as_another_error() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        blob = rng.randbytes(rng.randint(0, 64))
        try:
            out = decompress(blob)
        except SnappyError:
            continue
        assert len(out) == uncompressed_length(blob)
