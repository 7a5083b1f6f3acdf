"""A minimal writer of TensorFlow's table format, for tests that need tables TensorFlow would not
write (tiny blocks, many restart intervals, damaged headers, snappy-compressed blocks). The format
itself is pinned by the TensorFlow-written fixtures; this writer only varies the parameters.

Compression uses a real snappy compressor (cramjam) so the reader's own decompressor is checked
against an independent implementation."""

from __future__ import annotations

import struct
from typing import Literal

import cramjam

from runtime.checkpoint import checksum
from runtime.checkpoint.sstable import MAGIC, NO_COMPRESSION, SNAPPY_COMPRESSION
from runtime.tensor_codec import encode_varint

# "never": every block raw (BundleWriter's choice). "always": every block snappy-compressed,
# even when that makes it larger. "when_smaller": TensorFlow's table builder default, which keeps
# a block raw unless snappy saves at least 1/8 of it, so a table mixes both kinds.
Compression = Literal["never", "always", "when_smaller"]


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


def snappy_compress(raw: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(raw))


def _append_block(out: bytearray, raw: bytes, compression: Compression = "never") -> bytes:
    contents, kind = raw, NO_COMPRESSION
    if compression != "never":
        compressed = snappy_compress(raw)
        if compression == "always" or len(compressed) < len(raw) - len(raw) // 8:
            contents, kind = compressed, SNAPPY_COMPRESSION
    handle = encode_varint(len(out)) + encode_varint(len(contents))
    crc = checksum.extend(checksum.value(contents), bytes([kind]))
    out += contents + bytes([kind]) + struct.pack("<I", checksum.mask(crc))
    return handle


def write_table(
    items: list[tuple[bytes, bytes]],
    block_size: int = 4096,
    restart_interval: int = 16,
    compression: Compression = "never",
) -> bytes:
    """Serialize sorted (key, value) pairs, starting a new data block past ``block_size``.
    ``compression`` applies to every block, the metaindex and index included, as in TensorFlow's
    table builder."""
    out = bytearray()
    index: list[tuple[bytes, bytes]] = []
    pending: list[tuple[bytes, bytes]] = []
    size = 0

    def flush(last_key: bytes) -> None:
        raw = encode_block(pending, restart_interval)
        index.append((last_key, _append_block(out, raw, compression)))

    for key, value in items:
        pending.append((key, value))
        size += len(key) + len(value) + 3
        if size >= block_size:
            flush(key)
            pending, size = [], 0
    if pending:
        flush(pending[-1][0])
    metaindex = _append_block(out, encode_block([], restart_interval), compression)
    index_handle = _append_block(out, encode_block(index, 1), compression)
    footer = (metaindex + index_handle).ljust(40, b"\0") + struct.pack("<Q", MAGIC)
    return bytes(out + footer)
