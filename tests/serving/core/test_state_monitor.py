"""The servable state monitor: latest states, the event log, waiting and listeners."""

from __future__ import annotations

import threading

from runtime.errors import DataLossError, OpError
from serving.core.state_monitor import ServableStateMonitor
from serving.servable import ManagerState, ServableId, ServableState

START, LOADING, AVAILABLE = ManagerState.START, ManagerState.LOADING, ManagerState.AVAILABLE
UNLOADING, END = ManagerState.UNLOADING, ManagerState.END
WAIT_S = 30.0  # generous: only reached when something is broken


def state(
    name: str, version: int, manager_state: ManagerState, error: OpError | None = None
) -> ServableState:
    return ServableState(ServableId(name, version), manager_state, error)


def test_latest_state_per_version_newest_version_first() -> None:
    monitor = ServableStateMonitor()
    for s in [state("m", 1, START), state("m", 1, LOADING), state("m", 2, START)]:
        monitor.publish(s)
    monitor.publish(state("m", 1, AVAILABLE))
    monitor.publish(state("a", 7, START))
    assert monitor.states("m") == [state("m", 2, START), state("m", 1, AVAILABLE)]
    assert monitor.state(ServableId("m", 1)) == state("m", 1, AVAILABLE)
    assert monitor.state(ServableId("m", 3)) is None
    assert monitor.states("nope") == []
    assert monitor.model_names() == ["a", "m"]


def test_end_states_are_never_forgotten() -> None:
    monitor = ServableStateMonitor()
    error = DataLossError("corrupt")
    monitor.publish(state("m", 1, END, error=error))
    monitor.publish(state("m", 2, AVAILABLE))
    monitor.publish(state("m", 2, UNLOADING))
    monitor.publish(state("m", 2, END))
    states = monitor.states("m")
    assert [(s.id.version, s.state) for s in states] == [(2, END), (1, END)]
    assert states[1].error is error and states[0].error is None
    # A version aspired again starts over in the status.
    monitor.publish(state("m", 1, START))
    assert monitor.states("m")[1] == state("m", 1, START)


def test_event_log_keeps_order_and_is_bounded() -> None:
    monitor = ServableStateMonitor(max_events=3)
    published = [state("m", 1, s) for s in (START, LOADING, AVAILABLE, UNLOADING, END)]
    for s in published:
        monitor.publish(s)
    assert monitor.events() == published[-3:]
    assert monitor.states("m") == [published[-1]]


def test_wait_for_sees_a_publication_from_another_thread() -> None:
    monitor = ServableStateMonitor()
    publisher = threading.Thread(target=monitor.publish, args=(state("m", 1, AVAILABLE),))
    publisher.start()
    assert monitor.wait_for(lambda m: bool(m.states("m")), WAIT_S)
    publisher.join()
    assert not monitor.wait_for(lambda m: "other" in m.model_names(), 0)


def test_wait_until_available() -> None:
    monitor = ServableStateMonitor()
    assert not monitor.wait_until_available("m", timeout=0)
    monitor.publish(state("m", 1, LOADING))
    assert not monitor.wait_until_available("m", 1, timeout=0)
    monitor.publish(state("m", 1, AVAILABLE))
    assert monitor.wait_until_available("m", timeout=0)
    assert monitor.wait_until_available("m", 1, timeout=0)
    assert not monitor.wait_until_available("m", 2, timeout=0)


def test_wait_for_a_version_gives_up_when_it_ends() -> None:
    monitor = ServableStateMonitor()
    results: list[bool] = []
    # No timeout: only the END publication can end this wait.
    waiter = threading.Thread(target=lambda: results.append(monitor.wait_until_available("m", 3)))
    waiter.start()
    monitor.publish(state("m", 3, LOADING))
    monitor.publish(state("m", 3, END, error=DataLossError("corrupt")))
    waiter.join(WAIT_S)
    assert not waiter.is_alive()
    assert results == [False]


def test_waiting_for_any_version_outlives_a_failed_one() -> None:
    monitor = ServableStateMonitor()
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(monitor.wait_until_available("m")))
    waiter.start()
    monitor.publish(state("m", 3, END, error=DataLossError("corrupt")))
    monitor.publish(state("m", 2, AVAILABLE))
    waiter.join(WAIT_S)
    assert not waiter.is_alive()
    assert results == [True]


def test_listeners_run_in_order_and_a_failing_one_is_contained() -> None:
    monitor = ServableStateMonitor()
    seen: list[tuple[ServableState, list[ServableState]]] = []

    def broken(_: ServableState) -> None:
        raise RuntimeError("listener bug")

    monitor.add_listener(broken)
    # A listener may query the monitor: the state is already recorded when it runs.
    monitor.add_listener(lambda s: seen.append((s, monitor.states(s.id.name))))
    first, second = state("m", 1, START), state("m", 1, LOADING)
    monitor.publish(first)
    monitor.publish(second)
    assert seen == [(first, [first]), (second, [second])]
    assert monitor.events() == [first, second]
