"""NonMaxSuppression V1-V5 and CropAndResize against TensorFlow's recorded results."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.kernels import image_ops_nms as nms
from tests.runtime.kernels.cases_detection_ops import CASES
from tests.runtime.kernels.check import check_case, check_rejection, load_recording

RECORDING = load_recording("detection_ops")
REJECTED = [c for c in CASES if f"{c.name}/error" in RECORDING]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case) -> None:  # type: ignore[no-untyped-def]
    check_case(case, RECORDING)


@pytest.mark.parametrize("case", REJECTED, ids=[c.name for c in REJECTED])
def test_rejections_say_what_tensorflow_says(case) -> None:  # type: ignore[no-untyped-def]
    check_rejection(case, RECORDING)


def test_every_case_expecting_an_error_got_one() -> None:
    assert [c.name for c in CASES if c.expect_error] == [c.name for c in REJECTED]


# The hard-suppression fast path decides blocks of candidates at once; TensorFlow's loop, which
# the kernel keeps for soft-NMS and non-finite boxes, is the oracle for it.
@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(0, 700),
    max_output=st.integers(0, 400),
    iou_threshold=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
    half=st.booleans(),
)
def test_hard_suppression_fast_path_is_the_kernel_loop(
    seed: int, count: int, max_output: int, iou_threshold: float, half: bool
) -> None:
    r = np.random.default_rng(seed)
    centres = r.uniform(0, 1, (count, 2))
    sizes = r.uniform(0, 0.2, (count, 2)) * (r.random((count, 1)) < 0.95)  # a few without area
    boxes = np.concatenate([centres - sizes, centres + sizes], axis=1).astype(np.float32)
    flip = r.random(count) < 0.3
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    dtype = np.dtype(np.float16 if half else np.float32)
    scores = np.round(r.random(count), 2).astype(dtype)  # rounding makes ties common
    order = np.argsort(-scores, kind="stable")
    params = nms._Params(max_output, dtype.type(iou_threshold), np.finfo(dtype).min, dtype.type(0))
    corners = nms._Corners.of(boxes)
    with np.errstate(all="ignore"):
        fast = nms._hard_nms(corners, order, params, dtype)
        loop, _ = nms._general_nms(corners, scores, order, params, dtype)
    assert fast == loop
