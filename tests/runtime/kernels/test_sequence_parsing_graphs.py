"""tf.SequenceExample input receivers (``fixtures/graph_cases/sequence_parsing.py``) run plain
and optimized against TensorFlow's recorded results: keys and defaults arrive as graph constants,
so the kernels bake their features in."""

from __future__ import annotations

import pytest

from tests.runtime.kernels.graph_cases import GraphCase, case_params, check_case, load_cases

CASES = load_cases("sequence_parsing")


@pytest.mark.parametrize(("case", "optimize"), case_params(CASES))
def test_graph_matches_tensorflow(case: GraphCase, optimize: bool) -> None:
    check_case(case, optimize)


def test_the_missing_list_is_refused() -> None:
    assert [c.name for c in CASES if c.error is not None] == ["missing_sequence"]
