"""TF1 graphs that carry DecodeCSV, DecodeRaw, LRN, Reverse, MatrixBandPart, NonMaxSuppression and
CropAndResize as production exports do, run plain and optimized against TensorFlow's results
(``fixtures/graph_cases/tf1_serving_ops.py``)."""

from __future__ import annotations

import pytest

from tests.runtime.kernels.graph_cases import GraphCase, case_params, check_case, load_cases

CASES = load_cases("tf1_serving_ops")


@pytest.mark.parametrize(("case", "optimize"), case_params(CASES))
def test_graph_matches_tensorflow(case: GraphCase, optimize: bool) -> None:
    check_case(case, optimize)
