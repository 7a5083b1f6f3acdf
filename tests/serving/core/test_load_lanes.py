"""Per-model load workers: each model's actions in order, models side by side, a bounded number
of loads at once that a stalled load stops counting against."""

from __future__ import annotations

import threading

import pytest

from serving.core.load_lanes import LoadLanes, slot_wait

WAIT_S = 30.0  # generous: only reached when something is broken


@pytest.mark.parametrize(
    ("started", "now", "max_loads", "expected"),
    [
        ([], 0.0, 1, 0.0),
        ([0.0], 1.0, 1, 9.0),  # the running load stalls at 10
        ([0.0], 10.0, 1, 0.0),  # stalled: no longer counts
        ([0.0, 5.0], 6.0, 2, 4.0),  # the oldest of two stalls first
        ([0.0, 5.0], 6.0, 3, 0.0),
        ([0.0, 5.0, 8.0], 9.0, 2, 6.0),  # two must stall before one more fits
        ([0.0], 1.0, 0, 9.0),  # 0 means one at a time
    ],
)
def test_slot_wait(started: list[float], now: float, max_loads: int, expected: float) -> None:
    assert slot_wait(started, now, max_loads, 10.0) == expected


def test_a_models_actions_run_in_order_and_models_side_by_side() -> None:
    lanes = LoadLanes(1)
    order: list[str] = []
    gate = threading.Event()
    other_done = threading.Event()

    def hung() -> None:
        order.append("a1")
        assert gate.wait(WAIT_S)

    lanes.submit("a", hung, load=False)
    lanes.submit("a", lambda: order.append("a2"), load=False)
    lanes.submit("b", lambda: (order.append("b1"), other_done.set()), load=False)
    assert other_done.wait(WAIT_S)  # b did not wait for a's first action
    assert "a2" not in order
    gate.set()
    assert lanes.close(WAIT_S)
    assert order.index("a1") < order.index("a2")


def test_a_stalled_load_stops_holding_the_only_slot() -> None:
    now = [0.0]
    lanes = LoadLanes(1, stall_s=10.0, clock=lambda: now[0])
    gate = threading.Event()
    started, second = threading.Event(), threading.Event()

    def hung() -> None:
        started.set()
        assert gate.wait(WAIT_S)

    lanes.submit("a", hung, load=True)
    assert started.wait(WAIT_S)
    lanes.submit("b", second.set, load=True)
    assert not second.wait(0.2)  # the one slot is taken
    now[0] = 10.0  # a's load has stalled; the waiting load looks again within its wait
    assert second.wait(WAIT_S)
    gate.set()
    assert lanes.close(WAIT_S)


def test_close_gives_up_on_a_hung_action() -> None:
    lanes = LoadLanes(1)
    gate = threading.Event()
    lanes.submit("a", lambda: gate.wait(WAIT_S) and None, load=True)
    assert not lanes.close(0.1)
    ran: list[str] = []
    lanes.submit("b", lambda: ran.append("b"), load=False)  # refused once closed
    gate.set()
    assert lanes.close(WAIT_S) and ran == []
