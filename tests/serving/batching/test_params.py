"""BatchingParameters text parsing, defaults and TensorFlow Serving's checks."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import pytest

from protos.tensorflow_serving.servables.tensorflow.session_bundle_config_pb2 import (
    BatchingParameters,
)
from runtime.errors import InvalidArgumentError, NotFoundError
from serving.batching.params import (
    BatchingParams,
    batching_params_from_proto,
    parse_batching_parameters,
    read_batching_parameters,
    task_too_large_message,
)

FULL = """
max_batch_size { value: 128 }
batch_timeout_micros { value: 5000 }
max_enqueued_batches { value: 4 }
num_batch_threads { value: 3 }
thread_pool_name { value: "pool" }
allowed_batch_sizes: 32
allowed_batch_sizes: 64
allowed_batch_sizes: 128
pad_variable_length_inputs: true
enable_large_batch_splitting { value: true }
max_execution_batch_size { value: 64 }
"""


def test_defaults_are_upstreams() -> None:
    params = parse_batching_parameters("")
    assert params == BatchingParams()
    assert params.max_batch_size == 1000
    assert params.batch_timeout_micros == 0
    assert params.max_enqueued_batches == 10
    assert params.num_batch_threads == len(os.sched_getaffinity(0))
    assert params.thread_pool_name == "batch_threads"
    assert params.allowed_batch_sizes == ()
    assert not params.pad_variable_length_inputs
    assert not params.enable_large_batch_splitting
    assert params.execution_batch_size == 1000
    assert not params.adaptive


def test_parse_every_field() -> None:
    params = parse_batching_parameters(FULL)
    assert params == BatchingParams(
        max_batch_size=128,
        batch_timeout_micros=5000,
        max_enqueued_batches=4,
        num_batch_threads=3,
        thread_pool_name="pool",
        allowed_batch_sizes=(32, 64, 128),
        pad_variable_length_inputs=True,
        enable_large_batch_splitting=True,
        max_execution_batch_size=64,
    )
    assert params.execution_batch_size == 64


def test_set_zero_differs_from_unset() -> None:
    assert parse_batching_parameters("max_enqueued_batches { value: 3 }").max_enqueued_batches == 3
    # A wrapper present with value 0 is 0, not the default 10 (and 0 reads as 1, as upstream).
    assert parse_batching_parameters("max_enqueued_batches { }").max_enqueued_batches == 1
    assert parse_batching_parameters("batch_timeout_micros { }").batch_timeout_micros == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_batch_size { value: 50 }", 50),
        ("max_batch_size { value: 50 } max_execution_batch_size { value: 10 }", 50),
        ("max_batch_size { value: 50 } enable_large_batch_splitting { value: true }", 50),
        (
            (
                "max_batch_size { value: 50 } enable_large_batch_splitting { value: true } "
                "max_execution_batch_size { value: 10 }"
            ),
            10,
        ),
    ],
)
def test_execution_batch_size(text: str, expected: int) -> None:
    assert parse_batching_parameters(text).execution_batch_size == expected


def test_negative_timeout_is_the_adaptive_window() -> None:
    params = parse_batching_parameters("batch_timeout_micros { value: -20000 }")
    assert params.adaptive
    assert params.batch_timeout_micros == -20000


def test_bad_text() -> None:
    # Text from no file fails with protobuf's parser error itself.
    with pytest.raises(InvalidArgumentError) as err:
        parse_batching_parameters("max_batch_size: {")
    assert err.value.message == (
        'Error parsing text-format tensorflow.serving.BatchingParameters: 1:17: Expected "}".'
    )
    with pytest.raises(InvalidArgumentError, match="no_such_field"):
        parse_batching_parameters("no_such_field { value: 1 }")


def test_read_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "batching.pbtxt"
    path.write_text(FULL)
    assert read_batching_parameters(path) == parse_batching_parameters(FULL)
    path.write_text("max_batch_size: oops")
    # Upstream's ParseProtoTextFile: the parser's error is logged, the status names the file.
    with caplog.at_level(logging.ERROR, "graphserve"), pytest.raises(InvalidArgumentError) as err:
        read_batching_parameters(path)
    assert err.value.message == f"Invalid protobuf file: '{path}'"
    assert ('Error parsing text-format tensorflow.serving.BatchingParameters: 1:17: Expected "{".'
            in caplog.messages)
    with pytest.raises(NotFoundError, match="missing.pbtxt"):
        read_batching_parameters(tmp_path / "missing.pbtxt")


def test_from_proto() -> None:
    proto = BatchingParameters()
    proto.max_batch_size.value = 8
    proto.allowed_batch_sizes.extend([2, 8])
    params = batching_params_from_proto(proto)
    assert (params.max_batch_size, params.allowed_batch_sizes) == (8, (2, 8))
    assert params.max_enqueued_batches == 10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "max_batch_size { value: 32 } allowed_batch_sizes: 8 allowed_batch_sizes: 16",
            (
                "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; "
                "expected 32"
            ),
        ),
        (
            # An unset max_batch_size is upstream's default, 1000.
            "allowed_batch_sizes: 8",
            (
                "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 8; "
                "expected 1000"
            ),
        ),
        (
            # The model server compares with max_batch_size even when splitting large batches.
            (
                "max_batch_size { value: 32 } enable_large_batch_splitting { value: true } "
                "max_execution_batch_size { value: 16 } allowed_batch_sizes: 8 allowed_batch_sizes: 16"
            ),
            (
                "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; "
                "expected 32"
            ),
        ),
        (
            (
                "max_batch_size { value: 32 } allowed_batch_sizes: 16 allowed_batch_sizes: 8 "
                "allowed_batch_sizes: 32"
            ),
            "allowed_batch_sizes entries must be monotonically increasing",
        ),
        (
            (
                "max_batch_size { value: 32 } allowed_batch_sizes: 8 allowed_batch_sizes: 8 "
                "allowed_batch_sizes: 32"
            ),
            "allowed_batch_sizes entries must be monotonically increasing",
        ),
        (
            "max_batch_size { value: 32 } allowed_batch_sizes: 0 allowed_batch_sizes: 32",
            "allowed_batch_sizes entries must be positive; was 0",
        ),
        ("num_batch_threads { value: 0 }", "num_batch_threads must be positive; was 0"),
        ("max_batch_size { value: 0 }", "input_batch_size_limit must be positive; was 0"),
        ("max_batch_size { value: -4 }", "input_batch_size_limit must be positive; was -4"),
        ("max_enqueued_batches { value: -1 }", "max_enqueued_batches must be positive; was -1"),
        (
            "enable_large_batch_splitting { value: true } max_enqueued_batches { value: 0 }",
            "max_enqueued_batches must be positive; was 0",
        ),
        (
            (
                "max_batch_size { value: 16 } enable_large_batch_splitting { value: true } "
                "max_execution_batch_size { value: 32 }"
            ),
            (
                "When enable_large_batch_splitting is true, input_batch_size_limit must be greater "
                "than or equal to max_execution_batch_size. (input_batch_size_limit 16, "
                "max_execution_batch_size 32)"
            ),
        ),
        (
            "enable_large_batch_splitting { value: true } max_execution_batch_size { value: -2 }",
            "max_execution_batch_size must be positive; was -2",
        ),
    ],
)
def test_invalid_values(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse_batching_parameters(text)
    assert err.value.message == message
    # Deferred checking: parsing alone succeeds and validated() gives the same answer.
    params = parse_batching_parameters(text, validate=False)
    with pytest.raises(InvalidArgumentError) as later:
        params.validated()
    assert later.value.message == message


def test_accepted_edge_values() -> None:
    # Splitting with the last allowed size equal to max_batch_size is what the model server takes.
    params = parse_batching_parameters(
        "max_batch_size { value: 32 } enable_large_batch_splitting { value: true } "
        "max_execution_batch_size { value: 16 } allowed_batch_sizes: 16 allowed_batch_sizes: 32"
    )
    assert params.allowed_batch_sizes == (16, 32)
    # Without splitting the execution size is not read, so an odd value there is harmless.
    assert parse_batching_parameters("max_execution_batch_size { value: -3 }").max_batch_size == (
        1000
    )


def test_zero_enqueued_batches_means_one_without_splitting() -> None:
    raw = BatchingParams(max_enqueued_batches=0)
    checked = raw.validated()
    assert checked.max_enqueued_batches == 1
    assert raw.max_enqueued_batches == 0
    assert dataclasses.replace(checked, max_enqueued_batches=0) == raw


def test_frozen() -> None:
    params = BatchingParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.max_batch_size = 3  # type: ignore[misc]


def test_task_too_large_message() -> None:
    assert task_too_large_message(12, 8) == "Task size 12 is larger than maximum input batch size 8"


def test_the_example_config_is_valid_and_adaptive() -> None:
    example = Path(__file__).resolve().parents[3] / "config" / "batching.config"
    params = read_batching_parameters(example)
    assert params.adaptive and params.batch_timeout_micros == -5000
    assert params.max_batch_size == 64
