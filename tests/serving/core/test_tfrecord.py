from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import DataLossError, FailedPreconditionError, NotFoundError
from serving.core.tfrecord import (
    RecordReader,
    encode_record,
    masked_crc32c,
    read_records,
    write_records,
)
from tests.serving.support import REPO

WARMUP = REPO / "tests" / "fixtures" / "warmup"
# What fixtures/make_warmup.py wrote into plain.tfrecord with tf.io.TFRecordWriter.
PLAIN_PAYLOADS = [b"", b"warmup", bytes(range(256)) * 4]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, payloads: list[bytes]) -> None:
    path = tmp_path_factory.mktemp("rt") / "records"
    assert write_records(path, payloads) == len(payloads)
    assert list(read_records(path)) == payloads
    assert path.stat().st_size == sum(16 + len(p) for p in payloads)


def test_reads_tensorflow_written_file() -> None:
    assert list(read_records(WARMUP / "plain.tfrecord")) == PLAIN_PAYLOADS


@pytest.mark.parametrize("name", ["plain", "predict", "examples", "bad_input"])
def test_writes_what_tensorflow_writes(name: str) -> None:
    """Re-encoding TensorFlow's records gives TensorFlow's bytes: framing and masked CRCs."""
    data = (WARMUP / f"{name}.tfrecord").read_bytes()
    payloads = list(read_records(WARMUP / f"{name}.tfrecord"))
    assert payloads
    assert b"".join(encode_record(p) for p in payloads) == data


def test_masked_crc_of_empty_payload() -> None:
    # The empty first record of TensorFlow's file ends with the masked CRC of b"".
    data = (WARMUP / "plain.tfrecord").read_bytes()
    assert struct.unpack("<I", data[12:16]) == (masked_crc32c(b""),)


def test_empty_file_has_no_records(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert list(read_records(path)) == []


def _file(tmp_path: Path, data: bytes | bytearray) -> Path:
    path = tmp_path / "records"
    path.write_bytes(bytes(data))
    return path


def _three() -> tuple[bytearray, list[int]]:
    """Three records and the byte offset at which each starts."""
    payloads = [b"first", b"second record", b"third"]
    encoded = [encode_record(p) for p in payloads]
    starts = [0, len(encoded[0]), len(encoded[0]) + len(encoded[1])]
    return bytearray(b"".join(encoded)), starts


def test_corrupted_length_checksum(tmp_path: Path) -> None:
    data, starts = _three()
    data[starts[1] + 8] ^= 0x01  # the length's CRC
    reader = RecordReader(_file(tmp_path, data))
    with reader:
        assert reader.read_record() == b"first"  # records before the damage are readable
        with pytest.raises(DataLossError) as err:
            reader.read_record()
    assert err.value.message == (
        f"corrupted record (length checksum mismatch) at {starts[1]} in {reader.path}"
    )


def test_corrupted_length_at_start_hints_at_file_type(tmp_path: Path) -> None:
    path = _file(tmp_path, b"this is not a TFRecord file at all")
    with pytest.raises(DataLossError, match=r"at 0 \(Is this even a TFRecord file\?\)"):
        list(read_records(path))


def test_corrupted_length_value(tmp_path: Path) -> None:
    data, starts = _three()
    data[starts[2]] ^= 0x04  # the length itself: no longer matches its CRC
    with pytest.raises(DataLossError, match=f"length checksum mismatch\\) at {starts[2]} "):
        list(read_records(_file(tmp_path, data)))


def test_corrupted_data_checksum(tmp_path: Path) -> None:
    data, starts = _three()
    data[starts[1] + 12 + 3] ^= 0x20  # a payload byte
    path = _file(tmp_path, data)
    records = read_records(path)
    assert next(records) == b"first"
    with pytest.raises(DataLossError) as err:
        next(records)
    # As TensorFlow reports it: the offset of the payload, past the 12-byte header.
    assert err.value.message == (
        f"corrupted record (data checksum mismatch) at {starts[1] + 12} in {path}"
    )


def test_corrupted_footer(tmp_path: Path) -> None:
    data, _ = _three()
    data[-1] ^= 0xFF
    path = _file(tmp_path, data)
    with pytest.raises(DataLossError, match="data checksum mismatch"):
        list(read_records(path))


@pytest.mark.parametrize("cut", [1, 4, 11, 12, 15, 17, 20])
def test_truncated_file(tmp_path: Path, cut: int) -> None:
    """Cut inside the last record's header (1..11 bytes kept), its payload or its footer."""
    data, starts = _three()
    path = _file(tmp_path, data[: starts[2] + cut])
    reader = RecordReader(path)
    with reader, pytest.raises(DataLossError) as err:
        list(reader)
    assert err.value.message.startswith("truncated record")
    assert f" at {starts[2]} in {path}" in err.value.message


def test_huge_length_is_truncation(tmp_path: Path) -> None:
    """A length that passes its checksum but points past the end is not read."""
    length = struct.pack("<Q", 1 << 60)
    path = _file(tmp_path, length + struct.pack("<I", masked_crc32c(length)) + b"abc")
    with pytest.raises(DataLossError, match=f"payload of {1 << 60} bytes\\) at 0"):
        list(read_records(path))


def test_reading_is_lazy(tmp_path: Path) -> None:
    path = _file(tmp_path, encode_record(b"a") + encode_record(b"b"))
    reader = RecordReader(path)
    with reader:
        assert reader.offset == 0
        assert reader.read_record() == b"a"
        assert reader.offset == 17
        assert reader.read_record() == b"b"
        assert reader.read_record() is None
        assert reader.offset == 34


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="missing"):
        RecordReader(tmp_path / "missing")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(FailedPreconditionError):
        RecordReader(tmp_path)
