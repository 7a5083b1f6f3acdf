"""DynamicPartition, DynamicStitch and ParallelDynamicStitch against TensorFlow's recorded
results and error messages."""

from __future__ import annotations

import pytest

from tests.runtime.kernels.cases_partition_ops import CASES
from tests.runtime.kernels.check import (
    check_case,
    check_output_count,
    check_rejection,
    load_recording,
)

RECORDING = load_recording("partition_ops")
REJECTED = [c for c in CASES if f"{c.name}/error" in RECORDING]
ACCEPTED = [c for c in CASES if c not in REJECTED]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case) -> None:  # type: ignore[no-untyped-def]
    check_case(case, RECORDING)


@pytest.mark.parametrize("case", REJECTED, ids=[c.name for c in REJECTED])
def test_rejections_say_what_tensorflow_says(case) -> None:  # type: ignore[no-untyped-def]
    check_rejection(case, RECORDING, exact=True)


def test_every_case_expecting_an_error_got_one() -> None:
    assert [c.name for c in CASES if c.expect_error] == [c.name for c in REJECTED]


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_op_definition_counts_the_outputs(case) -> None:  # type: ignore[no-untyped-def]
    check_output_count(case, RECORDING)
