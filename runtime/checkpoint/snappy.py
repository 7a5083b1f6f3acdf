"""Decompressor for raw snappy, the block compression of TensorFlow's (and LevelDB's) tables.

Format (google/snappy ``format_description.txt``): the uncompressed length as a varint (at most
32 bits), then elements, each starting with a tag byte whose low two bits give its kind:

* ``00`` literal: the length minus one is ``tag >> 2`` when below 60; 60..63 mean it follows in
  the next 1..4 bytes, little-endian. The literal bytes come next.
* ``01`` copy, 1-byte offset: length ``4 + ((tag >> 2) & 7)``, offset ``(tag >> 5) << 8`` plus
  the next byte.
* ``10`` copy, 2-byte offset: length ``1 + (tag >> 2)``, offset a little-endian uint16.
* ``11`` copy, 4-byte offset: length ``1 + (tag >> 2)``, offset a little-endian uint32.

A copy repeats ``length`` bytes starting ``offset`` bytes back in the output; when the offset is
smaller than the length the copy overlaps what it writes, so the last ``offset`` bytes repeat.

Only decompression is here: the runtime reads tables, it never writes compressed ones. Pure
Python, so the loop is kept lean (a per-tag lookup table, appends to one bytearray, slices for
every copy); a 256 KiB block, TensorFlow's default block size, decodes in about 10 ms.
"""

from __future__ import annotations

from runtime.checkpoint.coding import CodingError

# The densest element is a 3-byte copy producing 64 bytes, so no valid input decodes to more than
# 64/3 of its size: a larger declared length is refused before any work is done.
_MAX_EXPANSION = 22
_LITERAL, _COPY1, _COPY2, _COPY4 = 0, 1, 2, 3


def _tag_table() -> tuple[tuple[int, int, int], ...]:
    """For each tag byte: (element kind, length or literal length code, high offset bits)."""
    table = []
    for tag in range(256):
        kind = tag & 3
        if kind == _COPY1:
            table.append((kind, ((tag >> 2) & 7) + 4, (tag >> 5) << 8))
        else:  # literal (lengths 61..64 mean "1..4 length bytes follow") and copy-2/copy-4
            table.append((kind, (tag >> 2) + 1, 0))
    return tuple(table)


_TAGS = _tag_table()


class SnappyError(CodingError):
    """Corrupt or truncated snappy data (callers turn it into a DataLossError naming the file)."""


def uncompressed_length(data: bytes | bytearray | memoryview) -> int:
    """The length the compressed ``data`` declares (its leading varint32)."""
    return _header(bytes(data))[0]


def decompress(data: bytes | bytearray | memoryview) -> bytes:
    """Decode raw (unframed) snappy ``data``; raises SnappyError when it is corrupt.

    Every input either decodes to exactly the declared length or raises: offsets pointing
    before the start of the output, elements cut off by the end of the input and a total that
    differs from the header are all refused. Work and memory stay within a constant factor of
    the input's size.
    """
    src = bytes(data)
    n, ip = _header(src)
    end = len(src)
    if n > _MAX_EXPANSION * (end - ip) + 64:
        raise SnappyError(
            f"declared uncompressed length {n} is impossible for {end - ip} bytes of elements"
        )
    tags = _TAGS
    out = bytearray()
    op = 0  # len(out), kept in a local because it is cheaper than calling len()
    element = ip
    try:
        while ip < end:
            element = ip
            kind, length, offset = tags[src[ip]]
            if kind == _COPY1:
                offset |= src[ip + 1]
                ip += 2
            elif kind == _COPY2:
                offset = src[ip + 1] | (src[ip + 2] << 8)
                ip += 3
            elif kind == _LITERAL:
                ip += 1
                if length > 60:
                    extra = length - 60
                    length = int.from_bytes(src[ip : ip + extra], "little") + 1
                    ip += extra
                # A slice cut short by the end of the input leaves ip past the end: caught below.
                out += src[ip : ip + length]
                ip += length
                op += length
                continue
            else:
                offset = int.from_bytes(src[ip + 1 : ip + 5], "little")
                ip += 5
            if offset == 0 or offset > op:
                raise SnappyError(
                    f"copy at input offset {element} reaches {offset} bytes back, but only {op} "
                    "bytes are decoded so far"
                )
            start = op - offset
            if offset >= length:
                out += out[start : start + length]
            else:
                # Overlapping: the last ``offset`` bytes repeat to fill ``length``.
                out += (out[start:] * (length // offset + 1))[:length]
            op += length
    except IndexError:
        ip = end + 1  # a copy's offset bytes are missing
    if ip != end:
        raise SnappyError(
            f"element at input offset {element} runs past the end of the input ({end} bytes)"
        )
    if op != n:
        raise SnappyError(f"decoded {op} bytes; the header declares {n}")
    return bytes(out)


def _header(src: bytes) -> tuple[int, int]:
    result = shift = 0
    for ip in range(min(len(src), 5)):
        byte = src[ip]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result > 0xFFFFFFFF:
                raise SnappyError(f"uncompressed length {result} does not fit in 32 bits")
            return result, ip + 1
        shift += 7
    raise SnappyError("bad uncompressed-length varint at the start of the input")
