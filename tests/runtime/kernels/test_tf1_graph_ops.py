"""LRN, Reverse (v1) and MatrixBandPart against TensorFlow's recorded results."""

from __future__ import annotations

import pytest

from tests.runtime.kernels.cases_tf1_graph_ops import CASES
from tests.runtime.kernels.check import check_case, check_rejection, load_recording

RECORDING = load_recording("tf1_graph_ops")
REJECTED = [c for c in CASES if f"{c.name}/error" in RECORDING]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case) -> None:  # type: ignore[no-untyped-def]
    check_case(case, RECORDING)


@pytest.mark.parametrize("case", REJECTED, ids=[c.name for c in REJECTED])
def test_rejections_say_what_tensorflow_says(case) -> None:  # type: ignore[no-untyped-def]
    check_rejection(case, RECORDING)


def test_every_case_expecting_an_error_got_one() -> None:
    assert [c.name for c in CASES if c.expect_error] == [c.name for c in REJECTED]
