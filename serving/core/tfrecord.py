"""TFRecord files: the record container TensorFlow writes with ``tf.io.TFRecordWriter``.

Each record is framed as

    uint64  length            little-endian
    uint32  masked_crc(length bytes)
    bytes   payload           ``length`` bytes
    uint32  masked_crc(payload)

where ``masked_crc`` is CRC-32C rotated right by 15 bits plus a constant (TensorFlow masks the
checksum so that a CRC computed over data that itself contains CRCs stays well distributed).
Only uncompressed files are supported, which is what warmup files are.

Reading is lazy (one record in memory at a time). Any framing problem raises
``DataLossError`` naming the file and the byte offset, as TensorFlow's reader does
("corrupted record at N", "truncated record at N"); an OS error while opening or reading becomes
the matching ``OpError``.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Self

import google_crc32c

from runtime.errors import (
    DataLossError,
    FailedPreconditionError,
    NotFoundError,
    OpError,
    PermissionDeniedError,
    UnknownError,
)

_MASK_DELTA = 0xA282EAD8
_HEADER = 12  # length (8) + its checksum (4)
_FOOTER = 4  # payload checksum


def masked_crc32c(data: bytes) -> int:
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def encode_record(payload: bytes) -> bytes:
    """One framed record."""
    length = struct.pack("<Q", len(payload))
    return b"".join(
        (
            length,
            struct.pack("<I", masked_crc32c(length)),
            payload,
            struct.pack("<I", masked_crc32c(payload)),
        )
    )


def write_records(path: str | os.PathLike[str], payloads: Iterable[bytes]) -> int:
    """Write ``payloads`` as a TFRecord file (replacing it); returns the number written."""
    count = 0
    with open(path, "wb") as f:
        for payload in payloads:
            f.write(encode_record(payload))
            count += 1
    return count


def _os_error(err: OSError, path: Path) -> OpError:
    message = f"{path}: {err.strerror or err}"
    if isinstance(err, FileNotFoundError):
        return NotFoundError(message)
    if isinstance(err, PermissionError):
        return PermissionDeniedError(message)
    if err.errno in (errno.EISDIR, errno.ENOTDIR):
        return FailedPreconditionError(message)
    return UnknownError(message)


class RecordReader:
    """Iterates over the payloads of one TFRecord file, reading lazily.

    Use as a context manager (or call ``close``); iteration stops cleanly at the end of the
    file and raises ``DataLossError`` on a corrupted or truncated record. ``offset`` is the
    byte offset of the next record to read.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.offset = 0
        try:
            self._file: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as err:
            raise _os_error(err, self.path) from err
        try:
            # A corrupted length could ask for far more bytes than exist; knowing the size lets
            # that be reported as truncation instead of attempting a huge read.
            self._size = os.fstat(self._file.fileno()).st_size
        except OSError as err:
            self._file.close()
            raise _os_error(err, self.path) from err

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[bytes]:
        while (payload := self.read_record()) is not None:
            yield payload

    def _read(self, n: int) -> bytes:
        try:
            return self._file.read(n)
        except OSError as err:
            raise _os_error(err, self.path) from err

    def _error(self, what: str, offset: int) -> DataLossError:
        # TensorFlow adds this hint at offset 0: a TFRecord file has no magic number, so a
        # wrong file type only shows up as a bad first checksum.
        hint = " (Is this even a TFRecord file?)" if offset == 0 else ""
        return DataLossError(f"{what} at {offset}{hint} in {self.path}")

    def read_record(self) -> bytes | None:
        """The next payload, or None at the end of the file."""
        start = self.offset
        header = self._read(_HEADER)
        if not header:
            return None
        if len(header) < _HEADER:
            raise self._error("truncated record", start)
        length_bytes, (length_crc,) = header[:8], struct.unpack("<I", header[8:])
        if masked_crc32c(length_bytes) != length_crc:
            raise self._error("corrupted record (length checksum mismatch)", start)
        (length,) = struct.unpack("<Q", length_bytes)
        body_at = start + _HEADER
        if length + _FOOTER > self._size - body_at:
            raise self._error(f"truncated record (payload of {length} bytes)", start)
        body = self._read(length + _FOOTER)
        if len(body) < length + _FOOTER:  # the file shrank while being read
            raise self._error(f"truncated record (payload of {length} bytes)", start)
        payload, (payload_crc,) = body[:length], struct.unpack("<I", body[length:])
        if masked_crc32c(payload) != payload_crc:
            raise self._error("corrupted record (data checksum mismatch)", body_at)
        self.offset = body_at + length + _FOOTER
        return payload


def read_records(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Every payload of the file at ``path``, lazily; the file closes when the iterator ends
    or is closed."""
    with RecordReader(path) as reader:
        yield from reader
