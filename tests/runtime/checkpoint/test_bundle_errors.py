"""Damaged and missing checkpoint files give errors that name the file, the key and the problem."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from protos.tensorflow.core.protobuf import tensor_bundle_pb2
from runtime.checkpoint import BundleReader, Table, checksum, data_filename, index_filename
from runtime.checkpoint.sstable import MAGIC
from runtime.dtypes import DataType
from runtime.errors import (
    DataLossError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)
from tests.runtime.checkpoint.fixtures import copy_bundle
from tests.runtime.checkpoint.table_writer import write_table

F32 = "f32/.ATTRIBUTES/VARIABLE_VALUE"
STR = "str/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture
def prefix(tmp_path: Path) -> str:
    return copy_bundle("dtypes", tmp_path)


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def _data_file(prefix: str) -> str:
    return data_filename(prefix, 0, 1)


def test_missing_index(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="nothing.index"):
        BundleReader(tmp_path / "nothing")


def test_missing_data_shard(prefix: str) -> None:
    os.remove(_data_file(prefix))
    reader = BundleReader(prefix)  # the index alone opens
    with pytest.raises(NotFoundError, match=r"ckpt\.data-00000-of-00001"):
        reader.read(F32)


def test_missing_shard_of_many(tmp_path: Path) -> None:
    prefix = copy_bundle("sharded", tmp_path)
    os.remove(data_filename(prefix, 2, 4))
    reader = BundleReader(prefix)
    with pytest.raises(NotFoundError, match=r"data-00002-of-00004"):
        reader.read("big/.ATTRIBUTES/VARIABLE_VALUE")


def test_truncated_data_shard(prefix: str) -> None:
    reader = BundleReader(prefix)
    entry = reader.entry(F32)
    os.truncate(_data_file(prefix), entry.offset + 3)
    with pytest.raises(DataLossError) as info:
        reader.read(F32)
    message = str(info.value)
    assert "truncated" in message and F32 in message and _data_file(prefix) in message
    assert f"[{entry.offset}, {entry.offset + entry.size})" in message


def test_flipped_data_byte_fails_the_checksum(prefix: str) -> None:
    reader = BundleReader(prefix)
    entry = reader.entry(F32)
    _flip(_data_file(prefix), entry.offset + entry.size - 1)
    with pytest.raises(DataLossError, match=f"Checksum does not match for key {F32}"):
        reader.read(F32)


def test_flipped_string_byte_fails_the_checksum(prefix: str) -> None:
    reader = BundleReader(prefix)
    entry = reader.entry(STR)
    _flip(_data_file(prefix), entry.offset + entry.size - 1)
    with pytest.raises(DataLossError, match="Checksum does not match"):
        reader.read(STR)


def test_flipped_string_length_fails_the_length_checksum(prefix: str) -> None:
    reader = BundleReader(prefix)
    entry = reader.entry(STR)
    _flip(_data_file(prefix), entry.offset + 1)  # the second element's length
    with pytest.raises(DataLossError, match="length checksum does not match"):
        reader.read(STR)


def test_any_flipped_index_byte_is_caught(tmp_path: Path) -> None:
    """Flip each byte of the index in turn: opening or reading must fail, never mis-read."""
    prefix = copy_bundle("saved_model", tmp_path)
    index = index_filename(prefix)
    size = os.path.getsize(index)
    original = Path(index).read_bytes()
    meta = Table.open(index).metaindex_handle
    silent = []
    for offset in range(size):
        _flip(index, offset)
        try:
            reader = BundleReader(prefix)
            names = reader.keys()
            for key in names:
                reader.read(key)
        except (DataLossError, NotFoundError):
            pass
        else:
            silent.append(offset)
        Path(index).write_bytes(original)
    # Like TensorFlow, the reader never looks at the (empty) metaindex block; and the footer's
    # zero padding is not checked.
    unread = range(meta.offset, meta.offset + meta.size + 5)
    padding = range(size - 48, size - 8)
    assert silent and all(o in unread or o in padding for o in silent), silent


def test_bad_magic(prefix: str) -> None:
    _flip(index_filename(prefix), os.path.getsize(index_filename(prefix)) - 1)
    with pytest.raises(DataLossError, match=r"ckpt\.index.*bad magic number"):
        BundleReader(prefix)


def test_corrupt_block(prefix: str) -> None:
    _flip(index_filename(prefix), 10)
    with pytest.raises(DataLossError, match=r"ckpt\.index.*block checksum mismatch"):
        BundleReader(prefix)


@pytest.mark.parametrize("keep", [0, 20, 47, 100])
def test_truncated_index(prefix: str, keep: int) -> None:
    os.truncate(index_filename(prefix), keep)
    with pytest.raises(DataLossError, match=r"ckpt\.index"):
        BundleReader(prefix)


def test_missing_key(prefix: str) -> None:
    with pytest.raises(NotFoundError, match="Key nope not found in checkpoint"):
        BundleReader(prefix).read("nope")


def test_dtype_mismatch(prefix: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        BundleReader(prefix).read(F32, DataType.DT_INT32)
    assert str(info.value) == (
        f"tensor_name = {F32}; expected dtype int32 does not equal original dtype float"
    )


def _rewrite_index(prefix: str, edit) -> None:
    """Rewrite the index through ``edit(key, value) -> value`` (checksums stay valid)."""
    table = Table.open(index_filename(prefix))
    items = [(k, edit(k, v)) for k, v in table]
    Path(index_filename(prefix)).write_bytes(write_table(items))


def test_wrong_entry_size(prefix: str) -> None:
    def edit(key: bytes, value: bytes) -> bytes:
        if key != F32.encode():
            return value
        entry = tensor_bundle_pb2.BundleEntryProto.FromString(value)
        entry.size += 4
        return entry.SerializeToString()

    _rewrite_index(prefix, edit)
    with pytest.raises(
        DataLossError, match=r"Invalid size in bundle entry: key f32.*stored size 28"
    ):
        BundleReader(prefix).read(F32)


def test_shard_out_of_range(prefix: str) -> None:
    def edit(key: bytes, value: bytes) -> bytes:
        if key != F32.encode():
            return value
        entry = tensor_bundle_pb2.BundleEntryProto.FromString(value)
        entry.shard_id = 3
        return entry.SerializeToString()

    _rewrite_index(prefix, edit)
    with pytest.raises(DataLossError, match="names shard 3; the checkpoint .* has 1 shards"):
        BundleReader(prefix).read(F32)


def test_unparseable_entry(prefix: str) -> None:
    _rewrite_index(prefix, lambda k, v: b"\xff\xff" if k == F32.encode() else v)
    with pytest.raises(DataLossError, match=f"Entry for key {F32}.*not parseable"):
        BundleReader(prefix).read(F32)


def test_big_endian_bundles_are_refused(prefix: str) -> None:
    def edit(key: bytes, value: bytes) -> bytes:
        if key:
            return value
        header = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
        header.endianness = tensor_bundle_pb2.BundleHeaderProto.BIG
        return header.SerializeToString()

    _rewrite_index(prefix, edit)
    with pytest.raises(UnimplementedError, match="big-endian"):
        BundleReader(prefix)


def test_newer_format_is_refused(prefix: str) -> None:
    def edit(key: bytes, value: bytes) -> bytes:
        if key:
            return value
        header = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
        header.version.min_consumer = 2
        return header.SerializeToString()

    _rewrite_index(prefix, edit)
    with pytest.raises(InvalidArgumentError, match="min consumer version 2"):
        BundleReader(prefix)


def test_index_without_header(prefix: str) -> None:
    table = Table.open(index_filename(prefix))
    Path(index_filename(prefix)).write_bytes(write_table([(k, v) for k, v in table if k]))
    with pytest.raises(DataLossError, match="header"):
        BundleReader(prefix)


def test_snappy_compressed_index_reads_the_same(prefix: str) -> None:
    """An index whose blocks are snappy-compressed (TensorFlow's table default, and what
    TensorFlow Serving's test models carry) gives the same entries and tensors."""
    plain = BundleReader(prefix)
    names = plain.keys()  # a sorted list: BundleReader is not iterable
    expected = {key: plain.read(key) for key in names}
    plain.close()
    table = Table.open(index_filename(prefix))
    items = list(table)
    Path(index_filename(prefix)).write_bytes(write_table(items, compression="always"))
    compressed = Table.open(index_filename(prefix))
    assert compressed._data[compressed.index_handle.offset + compressed.index_handle.size] == 1
    assert list(compressed) == items
    with BundleReader(prefix) as reader:
        assert reader.keys() == sorted(expected)
        for key, value in expected.items():
            got = reader.read(key)
            assert got.dtype == value.dtype and got.shape == value.shape
            assert got.tolist() == value.tolist(), key


def test_corrupt_snappy_block_is_data_loss(tmp_path: Path) -> None:
    data = bytearray(write_table([(b"", b""), (b"a", b"1" * 40)], compression="always"))
    table = Table(bytes(data))
    handle = table._index_handles[0]
    end = handle.offset + handle.size
    # The stream's declared length, so the decoder must notice; the checksum is resealed below.
    data[handle.offset] ^= 0x01
    crc = checksum.mask(checksum.value(bytes(data[handle.offset : end + 1])))
    data[end + 1 : end + 5] = struct.pack("<I", crc)
    assert struct.unpack("<Q", data[-8:])[0] == MAGIC
    path = tmp_path / "t.index"
    path.write_bytes(bytes(data))
    with pytest.raises(DataLossError, match=r"t\.index.*corrupted compressed block contents"):
        list(Table.open(path))
