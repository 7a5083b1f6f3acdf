"""Sparse-tensor kernels (reshape, reorder, slice, concat, fill empty rows, sparse-dense matmul,
add, reduce sum) against TensorFlow's recorded results and error messages."""

from __future__ import annotations

import re

import pytest

from runtime.errors import OpError
from runtime.kernels.registry import instantiate
from runtime.ops import OP_REGISTRY, load_all_op_definitions
from tests.runtime.kernels.cases_sparse_ops import CASES
from tests.runtime.kernels.check import check_case, kernel_attrs, load_recording

RECORDING = load_recording("sparse_ops")
REJECTED = [c for c in CASES if f"{c.name}/error" in RECORDING]
ACCEPTED = [c for c in CASES if c not in REJECTED]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case) -> None:  # type: ignore[no-untyped-def]
    check_case(case, RECORDING)


@pytest.mark.parametrize("case", REJECTED, ids=[c.name for c in REJECTED])
def test_rejections_say_what_tensorflow_says(case) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OpError) as info:
        instantiate(case.op, kernel_attrs(case), num_outputs=3)(*case.flat_inputs())
    recorded = RECORDING[f"{case.name}/error"].item().decode()
    match = re.search(r"\}\} (.*?) \[Op:", recorded, re.DOTALL)
    assert info.value.message == (match.group(1) if match else recorded)


def test_every_case_expecting_an_error_got_one() -> None:
    assert [c.name for c in CASES if c.expect_error] == [c.name for c in REJECTED]


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_op_definition_counts_the_outputs(case) -> None:  # type: ignore[no-untyped-def]
    load_all_op_definitions()
    op_def = OP_REGISTRY.get(case.op)
    assert op_def is not None
    recorded = [key for key in RECORDING if key.startswith(f"{case.name}/out")]
    assert op_def.num_outputs({**op_def.attr_defaults, **kernel_attrs(case)}) == len(recorded)
