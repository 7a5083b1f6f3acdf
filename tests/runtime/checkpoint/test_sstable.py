"""The table reader: TensorFlow's multi-block index, and generated tables of every block layout."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.checkpoint import Table, checksum, index_filename
from runtime.checkpoint.sstable import NO_COMPRESSION, SNAPPY_COMPRESSION
from runtime.errors import DataLossError
from tests.runtime.checkpoint.fixtures import copy_bundle
from tests.runtime.checkpoint.table_writer import write_table


@pytest.fixture(scope="module")
def many_keys(tmp_path_factory: pytest.TempPathFactory) -> Table:
    prefix = copy_bundle("many_keys", tmp_path_factory.mktemp("many_keys"))
    return Table.open(index_filename(prefix))


def test_iterates_tensorflow_index_in_order(many_keys: Table) -> None:
    items = list(many_keys)
    keys = [k for k, _ in items]
    assert many_keys.num_data_blocks >= 2
    assert len(keys) == 5001 and keys[0] == b""
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_get_and_seek_agree_with_iteration(many_keys: Table) -> None:
    items = list(many_keys)
    for key, value in items[::97] + items[-3:]:
        assert many_keys.get(key) == value
        assert next(many_keys.seek(key)) == (key, value)
    for i in (0, 1000, 2999, 3000, 5000):
        key = items[i][0]
        assert many_keys.get(key + b"\x00") is None
        following = list(many_keys.seek(key + b"\x00"))
        assert following == items[i + 1 :]
    assert many_keys.get(b"\xff") is None
    assert list(many_keys.seek(b"\xff")) == []


items_strategy = st.dictionaries(st.binary(max_size=40), st.binary(max_size=60), max_size=300).map(
    lambda d: sorted(d.items())
)


@settings(max_examples=60, deadline=None)
@given(items_strategy, st.integers(1, 600), st.integers(1, 20))
def test_round_trips_any_block_layout(
    items: list[tuple[bytes, bytes]], block_size: int, restart_interval: int
) -> None:
    table = Table(write_table(items, block_size, restart_interval))
    assert list(table) == items
    for key, value in items:
        assert table.get(key) == value
    for key, _ in items[:5]:
        assert list(table.seek(key)) == items[items.index((key, table.get(key))) :]


def test_empty_table() -> None:
    table = Table(write_table([]))
    assert list(table) == [] and table.get(b"") is None


def test_too_short_and_not_a_table(tmp_path: Path) -> None:
    with pytest.raises(DataLossError, match="too short"):
        Table(b"\x00" * 47, "x.index")
    with pytest.raises(DataLossError, match="bad magic"):
        Table(b"\x00" * 100, "x.index")


def test_handle_past_end_of_file() -> None:
    data = bytearray(write_table([(b"a", b"b")]))
    # Point the index handle (second handle in the footer) far beyond the file.
    footer = len(data) - 48
    data[footer : footer + 40] = bytes([0, 0, 0x80, 0x80, 0x04, 0x05]).ljust(40, b"\0")
    with pytest.raises(DataLossError, match="truncated block read"):
        Table(bytes(data), "x.index")


def test_masking_matches_tensorflow_constants() -> None:
    # TensorFlow's crc32c::Mask of crc32c("") == 0 and of a known value.
    assert checksum.mask(0) == 0xA282EAD8
    for crc in (0, 1, 0x12345678, 0xFFFFFFFF, checksum.value(b"hello")):
        assert checksum.unmask(checksum.mask(crc)) == crc
    assert checksum.mask(checksum.mask(5)) != checksum.mask(5)


# --- snappy-compressed blocks (TensorFlow's table builder default; BundleWriter turns it off) --


@settings(max_examples=60, deadline=None)
@given(
    items_strategy,
    st.integers(1, 600),
    st.integers(1, 20),
    st.sampled_from(["always", "when_smaller"]),
)
def test_round_trips_snappy_compressed_blocks(
    items: list[tuple[bytes, bytes]], block_size: int, restart_interval: int, compression: str
) -> None:
    table = Table(write_table(items, block_size, restart_interval, compression))  # type: ignore[arg-type]
    assert list(table) == items
    for key, value in items:
        assert table.get(key) == value
    if items:
        assert list(table.seek(items[len(items) // 2][0])) == items[len(items) // 2 :]


def _block_kinds(data: bytes, table: Table) -> list[int]:
    """The compression byte of each data block, then of the index block."""
    handles = [*table._index_handles, table.index_handle]
    return [data[h.offset + h.size] for h in handles]


def test_mixed_compressed_and_raw_blocks() -> None:
    """TensorFlow keeps a block raw when snappy saves less than 1/8: a table can mix both."""
    rng = random.Random(3)
    items = []
    for i in range(400):
        # Runs of compressible values, then incompressible ones.
        value = b"v" * 200 if (i // 50) % 2 == 0 else rng.randbytes(200)
        items.append((b"key%05d" % i, value))
    data = write_table(items, block_size=4096, compression="when_smaller")
    table = Table(data)
    kinds = _block_kinds(data, table)
    assert SNAPPY_COMPRESSION in kinds and NO_COMPRESSION in kinds[:-1], kinds
    assert list(table) == items


def test_large_compressed_block() -> None:
    """One data block of TensorFlow's default size (256 KiB) holding many entries."""
    items = [(b"layer_%04d/kernel/.ATTRIBUTES/VARIABLE_VALUE" % i, b"\x08\x01\x12\x04" * 8)
             for i in range(3000)]
    data = write_table(items, block_size=262_144, compression="always")
    table = Table(data)
    assert table.num_data_blocks == 1
    assert _block_kinds(data, table) == [SNAPPY_COMPRESSION, SNAPPY_COMPRESSION]
    assert len(data) < 262_144 // 4  # it really is compressed
    assert list(table) == items


def _reseal(data: bytearray, offset: int, size: int) -> None:
    """Recompute a block's checksum after editing it, so only the decoder can notice."""
    crc = checksum.value(bytes(data[offset : offset + size + 1]))
    data[offset + size + 1 : offset + size + 5] = struct.pack("<I", checksum.mask(crc))


def test_corrupt_compressed_block_is_data_loss() -> None:
    items = [(b"k%03d" % i, b"value" * 10) for i in range(50)]
    data = bytearray(write_table(items, compression="always"))
    handle = Table(bytes(data))._index_handles[0]
    # Change the uncompressed length the stream declares (its leading varint's low bits).
    data[handle.offset] ^= 0x01
    _reseal(data, handle.offset, handle.size)
    table = Table(bytes(data), "x.index")
    with pytest.raises(DataLossError) as info:
        list(table)
    message = str(info.value)
    assert "x.index" in message and "corrupted compressed block contents in data block 0" in message


def test_corrupt_compressed_index_block_fails_at_open() -> None:
    data = bytearray(write_table([(b"a", b"1" * 100)], compression="always"))
    table = Table(bytes(data))
    handle = table.index_handle
    data[handle.offset + handle.size - 1] ^= 0xFF  # the last byte of the compressed stream
    _reseal(data, handle.offset, handle.size)
    with pytest.raises(DataLossError, match="index block"):
        Table(bytes(data), "x.index")


def test_unknown_block_type_is_data_loss() -> None:
    data = bytearray(write_table([(b"a", b"1")]))
    handle = Table(bytes(data))._index_handles[0]
    data[handle.offset + handle.size] = 2  # zstd in newer LevelDB; TensorFlow has only 0 and 1
    _reseal(data, handle.offset, handle.size)
    with pytest.raises(DataLossError, match="bad block type 2 in data block 0"):
        list(Table(bytes(data), "x.index"))
