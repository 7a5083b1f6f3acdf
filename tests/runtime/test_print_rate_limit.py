"""Print's rate limit: the pure window rule (exhaustively over generated print times), the
limiter on a fake clock, and the kernels holding back a flood."""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.kernels.registry import instantiate
from runtime.print_rate_limit import LINES_PER_WINDOW, Budget, LineLimiter, decide


def test_a_window_writes_up_to_the_limit_then_counts() -> None:
    budget = None
    written = []
    for i in range(5):
        decision = decide(budget, 10.0 + i * 0.1, 3, 1.0)
        budget = decision.budget
        written.append((decision.write, decision.report_suppressed))
    assert written == [(True, 0), (True, 0), (True, 0), (False, 0), (False, 0)]
    assert budget == Budget(10.0, 3, 2)
    # The first line of the next window is written, after a report of the two held back.
    resumed = decide(budget, 11.0, 3, 1.0)
    assert (resumed.write, resumed.report_suppressed, resumed.budget) == (
        True, 2, Budget(11.0, 1, 0)
    )


def test_a_clock_that_goes_back_opens_a_window() -> None:
    decision = decide(Budget(10.0, 3, 4), 9.0, 3, 1.0)
    assert (decision.write, decision.report_suppressed) == (True, 4)


@given(
    st.lists(st.floats(min_value=0, max_value=5, allow_nan=False), max_size=200),
    st.integers(min_value=1, max_value=5),
    st.sampled_from([0.25, 1.0, 2.0]),
)
def test_every_line_is_written_or_reported_and_windows_hold_the_limit(
    gaps: list[float], limit: int, window_s: float
) -> None:
    now = 0.0
    budget = None
    windows: dict[float, list[float]] = {}  # window opened at -> times of the lines written
    reported = 0
    for gap in gaps:
        now += gap
        decision = decide(budget, now, limit, window_s)
        budget = decision.budget
        reported += decision.report_suppressed
        if decision.write:
            windows.setdefault(budget.opened, []).append(now)
    pending = budget.suppressed if budget is not None else 0
    written = sum(len(times) for times in windows.values())
    assert written + reported + pending == len(gaps)
    for opened, times in windows.items():
        assert len(times) <= limit
        assert all(opened <= t < opened + window_s for t in times)
    # Lines a full window apart are all written.
    if all(gap >= window_s for gap in gaps[1:]):
        assert written == len(gaps)


def test_the_limiter_on_a_fake_clock() -> None:
    now = [0.0]
    limiter = LineLimiter(2, 1.0, clock=lambda: now[0])
    assert [limiter.admit() for _ in range(4)] == [(True, 0), (True, 0), (False, 0), (False, 0)]
    now[0] = 1.5
    assert limiter.admit() == (True, 2)
    with pytest.raises(ValueError):
        LineLimiter(0)


@pytest.mark.parametrize(
    ("op", "attrs", "args"),
    [
        ("Print", {"message": "m: ", "T": [], "U": []}, (np.float32(1.0),)),
        ("PrintV2", {"output_stream": "log(info)"}, (np.array(b"line", dtype=object),)),
    ],
)
def test_a_model_printing_on_every_request_is_held_back(
    caplog: pytest.LogCaptureFixture, op: str, attrs: dict[str, object], args: tuple[object, ...]
) -> None:
    show = instantiate(op, attrs, name="talkative")
    with caplog.at_level(logging.INFO, logger="graphserve.print"):
        started = time.monotonic()
        for _ in range(500):
            show(*args)
        elapsed = time.monotonic() - started
    records = [r for r in caplog.records if r.name == "graphserve.print"]
    lines = [r for r in records if r.levelno == logging.INFO]
    # One window's worth, and one more per window the loop may have crossed.
    assert LINES_PER_WINDOW <= len(lines) <= LINES_PER_WINDOW * (math.ceil(elapsed) + 1)
    for report in (r for r in records if r.levelno == logging.WARNING):
        assert f"{op} node 'talkative': " in report.getMessage()
        assert "not printed (more than 10 a second)" in report.getMessage()
