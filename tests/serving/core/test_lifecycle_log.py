"""The lifecycle log: one line per published state, timed by a fake clock."""

from __future__ import annotations

import logging

import pytest

from runtime.errors import NotFoundError
from serving.core.lifecycle_log import LifecycleLog
from serving.core.state_monitor import ServableStateMonitor
from serving.servable import ManagerState, ServableId, ServableState

START, LOADING, AVAILABLE = ManagerState.START, ManagerState.LOADING, ManagerState.AVAILABLE
UNLOADING, END = ManagerState.UNLOADING, ManagerState.END


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def monitor(clock: FakeClock) -> ServableStateMonitor:
    monitor = ServableStateMonitor()
    monitor.add_listener(LifecycleLog(clock))
    return monitor


def publish(
    monitor: ServableStateMonitor, clock: FakeClock, after_s: float, state: ManagerState,
    error: NotFoundError | None = None, version: int = 1,
) -> None:
    clock.now += after_s
    monitor.publish(ServableState(ServableId("m", version), state, error))


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == "graphserve.lifecycle"]


def test_a_version_lifecycle_with_durations(
    monitor: ServableStateMonitor, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="graphserve.lifecycle"):
        publish(monitor, clock, 0, START)
        publish(monitor, clock, 0.5, LOADING)
        publish(monitor, clock, 1.234, AVAILABLE)
        publish(monitor, clock, 60, UNLOADING)
        publish(monitor, clock, 0.01, END)
    assert lines(caplog) == [
        (logging.INFO, "Servable {name: m version: 1} START"),
        (logging.INFO, "Servable {name: m version: 1} LOADING after 0.50 s START"),
        (logging.INFO, "Servable {name: m version: 1} AVAILABLE after 1.23 s LOADING"),
        (logging.INFO, "Servable {name: m version: 1} UNLOADING after 60.00 s AVAILABLE"),
        (logging.INFO, "Servable {name: m version: 1} END after 0.01 s UNLOADING"),
    ]
    assert all((r.model, r.version) == ("m", 1) for r in caplog.records)  # type: ignore[attr-defined]


def test_a_failed_load_says_why_and_retries_stay_in_their_phase(
    monitor: ServableStateMonitor, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    error = NotFoundError("no saved_model.pb")
    with caplog.at_level(logging.INFO, logger="graphserve.lifecycle"):
        publish(monitor, clock, 0, START)
        publish(monitor, clock, 0, LOADING)
        publish(monitor, clock, 2, LOADING, error)  # an attempt failed; a retry follows
        publish(monitor, clock, 3, END, error)
    retried = "Servable {name: m version: 1} LOADING again, 2.00 s into LOADING"
    ended = "Servable {name: m version: 1} END after 5.00 s LOADING"
    why = "; error: NOT_FOUND: no saved_model.pb"
    assert lines(caplog)[2:] == [(logging.WARNING, retried + why), (logging.WARNING, ended + why)]


def test_versions_are_timed_apart_and_forgotten_at_end(
    monitor: ServableStateMonitor, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="graphserve.lifecycle"):
        publish(monitor, clock, 0, START, version=1)
        publish(monitor, clock, 1, START, version=2)
        publish(monitor, clock, 1, LOADING, version=1)
        publish(monitor, clock, 0, END, version=1)
        publish(monitor, clock, 5, START, version=1)  # back again: a new lifecycle
    assert [m for _, m in lines(caplog)][2:] == [
        "Servable {name: m version: 1} LOADING after 2.00 s START",
        "Servable {name: m version: 1} END after 0.00 s LOADING",
        "Servable {name: m version: 1} START",
    ]


def test_a_version_first_seen_ended_is_logged_with_its_error(
    monitor: ServableStateMonitor, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="graphserve.lifecycle"):
        publish(monitor, clock, 0, END, NotFoundError("dangling symlink"))
    assert lines(caplog) == [
        (logging.WARNING,
         "Servable {name: m version: 1} END; error: NOT_FOUND: dangling symlink"),
    ]
