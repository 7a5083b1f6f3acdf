"""Reader for the sorted string tables TensorFlow writes (its fork of LevelDB's table format).

A checkpoint's ``.index`` file is one such table. Layout (``tsl/lib/io/table_builder.cc``,
``format.cc``, ``block.cc``)::

    data block 0 | trailer | data block 1 | trailer | ... | metaindex block | trailer |
    index block | trailer | footer (48 bytes)

* footer: metaindex handle and index handle (each a varint64 offset and a varint64 size), zero
  padding to 40 bytes, then the magic number as a little-endian fixed64.
* trailer (5 bytes): a compression-type byte (0 = none, 1 = snappy) and the masked CRC32C of the
  block contents (as stored, compressed or not) plus that type byte. TensorFlow's table builder
  compresses each block (data, metaindex and index alike) with snappy unless told not to, and
  keeps a block raw when snappy saves less than 1/8; ``BundleWriter`` turns compression off, but
  checkpoints from other writers (TensorFlow Serving's test models among them) have snappy
  blocks, so both kinds are read (see ``snappy``).
* block: entries ``varint32 shared | varint32 non_shared | varint32 value_len | key suffix |
  value``, where a key shares its first ``shared`` bytes with the previous key; then the
  restart offsets (fixed32 each, where ``shared`` is 0) and their count (fixed32).
* the index block maps, for each data block, a key >= every key in that block (and < every key in
  the next) to the data block's handle.

The whole file is read into memory at open: index files hold only metadata and stay small.
Blocks are checksummed and decoded on first use and then cached. A ``Table`` is safe to share
between threads.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from dataclasses import dataclass

from runtime.checkpoint import checksum, snappy
from runtime.checkpoint.coding import CodingError, fixed32, fixed64, varint
from runtime.errors import DataLossError, NotFoundError

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # two handles padded to 2 * 20 bytes, then the 8-byte magic number
TRAILER_SIZE = 5
NO_COMPRESSION = 0
SNAPPY_COMPRESSION = 1


@dataclass(frozen=True)
class BlockHandle:
    offset: int
    size: int


@dataclass(frozen=True)
class _Block:
    keys: list[bytes]
    values: list[bytes]


class Table:
    """An immutable sorted table of byte keys to byte values."""

    def __init__(self, data: bytes, filename: str = "<memory>") -> None:
        self._data = data
        self.filename = filename
        self._blocks: dict[int, _Block] = {}
        if len(data) < FOOTER_SIZE:
            raise self._corrupt(
                f"file is too short to be an sstable: {len(data)} bytes, a footer needs "
                f"{FOOTER_SIZE}"
            )
        footer = len(data) - FOOTER_SIZE
        magic = fixed64(data, len(data) - 8)
        if magic != MAGIC:
            raise self._corrupt(
                f"not an sstable (bad magic number): found {magic:#018x}, expected {MAGIC:#018x}"
            )
        try:
            self.metaindex_handle, pos = _decode_handle(data, footer, len(data) - 8)
            self.index_handle, _ = _decode_handle(data, pos, len(data) - 8)
        except CodingError as err:
            raise self._corrupt(f"bad block handle in footer: {err}") from err
        index = self._read_block(self.index_handle, "index block")
        self._index_keys = index.keys
        self._index_handles: list[BlockHandle] = []
        for key, value in zip(index.keys, index.values):
            try:
                # Extra bytes after the handle are allowed, as in TensorFlow.
                handle, _ = _decode_handle(value, 0, len(value))
            except CodingError as err:
                raise self._corrupt(f"bad block handle in index entry {key!r}: {err}") from err
            self._index_handles.append(handle)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Table:
        """Read a table file; a missing file raises NotFoundError naming it."""
        filename = os.fspath(path)
        try:
            with open(filename, "rb") as f:
                data = f.read()
        except FileNotFoundError as err:
            raise NotFoundError(f"{filename}; No such file or directory") from err
        except IsADirectoryError as err:
            raise NotFoundError(f"{filename} is a directory, not a table file") from err
        return cls(data, filename)

    @property
    def num_data_blocks(self) -> int:
        return len(self._index_handles)

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) pair, in key order."""
        for i in range(len(self._index_handles)):
            block = self._data_block(i)
            yield from zip(block.keys, block.values)

    def seek(self, target: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The (key, value) pairs with key >= ``target``, in key order."""
        i = bisect.bisect_left(self._index_keys, target)
        first = True
        for b in range(i, len(self._index_handles)):
            block = self._data_block(b)
            start = bisect.bisect_left(block.keys, target) if first else 0
            first = False
            yield from zip(block.keys[start:], block.values[start:])

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or None."""
        i = bisect.bisect_left(self._index_keys, key)
        if i == len(self._index_keys):
            return None
        block = self._data_block(i)
        j = bisect.bisect_left(block.keys, key)
        if j < len(block.keys) and block.keys[j] == key:
            return block.values[j]
        return None

    def _data_block(self, i: int) -> _Block:
        handle = self._index_handles[i]
        block = self._blocks.get(handle.offset)
        if block is None:
            block = self._read_block(handle, f"data block {i}")
            self._blocks[handle.offset] = block
        return block

    def _read_block(self, handle: BlockHandle, what: str) -> _Block:
        end = handle.offset + handle.size
        if end + TRAILER_SIZE > len(self._data):
            raise self._corrupt(
                f"truncated block read: {what} at offset {handle.offset} needs "
                f"{handle.size + TRAILER_SIZE} bytes, the file has {len(self._data)}"
            )
        contents = self._data[handle.offset : end]
        kind = self._data[end]
        stored = checksum.unmask(fixed32(self._data, end + 1))
        actual = checksum.extend(checksum.value(contents), self._data[end : end + 1])
        if stored != actual:
            raise self._corrupt(
                f"block checksum mismatch in {what} at offset {handle.offset}: stored "
                f"{stored:#010x}, computed {actual:#010x}"
            )
        if kind == SNAPPY_COMPRESSION:
            try:
                contents = snappy.decompress(contents)
            except snappy.SnappyError as err:
                raise self._corrupt(
                    f"corrupted compressed block contents in {what} at offset {handle.offset}: "
                    f"{err}"
                ) from err
        elif kind != NO_COMPRESSION:
            raise self._corrupt(f"bad block type {kind} in {what} at offset {handle.offset}")
        try:
            return _decode_block(contents)
        except CodingError as err:
            raise self._corrupt(f"bad entry in {what} at offset {handle.offset}: {err}") from err

    def _corrupt(self, detail: str) -> DataLossError:
        return DataLossError(f"Unable to read table file {self.filename}: {detail}")


def _decode_handle(buf: bytes, pos: int, limit: int) -> tuple[BlockHandle, int]:
    offset, pos = varint(buf, pos, limit)
    size, pos = varint(buf, pos, limit)
    return BlockHandle(offset, size), pos


def _decode_block(data: bytes) -> _Block:
    if len(data) < 4:
        raise CodingError(f"block of {len(data)} bytes cannot hold its restart count")
    num_restarts = fixed32(data, len(data) - 4)
    if num_restarts > (len(data) - 4) // 4:
        raise CodingError(f"restart count {num_restarts} does not fit in {len(data)} bytes")
    limit = len(data) - (1 + num_restarts) * 4
    keys: list[bytes] = []
    values: list[bytes] = []
    if num_restarts == 0:
        return _Block(keys, values)
    restarts = {fixed32(data, limit + 4 * i) for i in range(num_restarts)}
    pos = 0
    key = b""
    while pos < limit:
        entry_start = pos
        shared, pos = varint(data, pos, limit, bits=32)
        non_shared, pos = varint(data, pos, limit, bits=32)
        value_len, pos = varint(data, pos, limit, bits=32)
        if shared > len(key) or (entry_start in restarts and shared != 0):
            raise CodingError(
                f"entry at {entry_start} shares {shared} bytes of a {len(key)}-byte key"
            )
        if limit - pos < non_shared + value_len:
            raise CodingError(f"entry at {entry_start} runs past the end of the block")
        key = key[:shared] + data[pos : pos + non_shared]
        pos += non_shared
        keys.append(key)
        values.append(data[pos : pos + value_len])
        pos += value_len
    return _Block(keys, values)
