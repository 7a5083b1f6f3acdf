"""A minimal writer of TensorFlow's table format, for tests that need tables TensorFlow would not
write (tiny blocks, many restart intervals, damaged headers). The format itself is pinned by the
TensorFlow-written fixtures; this writer only varies the parameters."""

from __future__ import annotations

import struct

from runtime.checkpoint import checksum
from runtime.checkpoint.sstable import MAGIC
from runtime.tensor_codec import encode_varint


def encode_block(items: list[tuple[bytes, bytes]], restart_interval: int) -> bytes:
    out = bytearray()
    restarts = []
    previous = b""
    for i, (key, value) in enumerate(items):
        if i % restart_interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = 0
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        out += encode_varint(shared) + encode_varint(len(key) - shared) + encode_varint(len(value))
        out += key[shared:] + value
        previous = key
    for r in restarts:
        out += struct.pack("<I", r)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def _append_block(out: bytearray, contents: bytes, kind: int = 0) -> bytes:
    handle = encode_varint(len(out)) + encode_varint(len(contents))
    crc = checksum.extend(checksum.value(contents), bytes([kind]))
    out += contents + bytes([kind]) + struct.pack("<I", checksum.mask(crc))
    return handle


def write_table(
    items: list[tuple[bytes, bytes]], block_size: int = 4096, restart_interval: int = 16
) -> bytes:
    """Serialize sorted (key, value) pairs, starting a new data block past ``block_size``."""
    out = bytearray()
    index: list[tuple[bytes, bytes]] = []
    pending: list[tuple[bytes, bytes]] = []
    size = 0
    for key, value in items:
        pending.append((key, value))
        size += len(key) + len(value) + 3
        if size >= block_size:
            index.append((key, _append_block(out, encode_block(pending, restart_interval))))
            pending, size = [], 0
    if pending:
        index.append((pending[-1][0], _append_block(out, encode_block(pending, restart_interval))))
    metaindex = _append_block(out, encode_block([], restart_interval))
    index_handle = _append_block(out, encode_block(index, 1))
    footer = (metaindex + index_handle).ljust(40, b"\0") + struct.pack("<Q", MAGIC)
    return bytes(out + footer)
