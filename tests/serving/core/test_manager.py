"""The AspiredVersionsManager, stepped by hand: every transition, failure and retry path.

Most tests use small recording servables (the manager's contract holds for any servable) so
that each published state and each close() can be asserted exactly; one test swaps real
SavedModels and predicts through the handles, and one runs the real manage thread.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.errors import (
    CancelledError,
    Code,
    DataLossError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
)
from runtime.saved_model import load_saved_model
from serving.core.aspired import AspiredVersion
from serving.core.manager import AspiredVersionsManager
from serving.core.state_monitor import ServableStateMonitor
from serving.core.transition_policy import TransitionPolicy, resource_preserving
from serving.servable import ManagerState, ServableId, ServableRequest, ServableState
from tests.serving.support import HALF_PLUS_TWO

START, LOADING, AVAILABLE = ManagerState.START, ManagerState.LOADING, ManagerState.AVAILABLE
UNLOADING, END = ManagerState.UNLOADING, ManagerState.END
WAIT_S = 30.0  # generous: only reached when something is broken


class FakeServable:
    def __init__(self, id: ServableId, closed_log: list[ServableId]) -> None:
        self.id = id
        self.closed = False
        self._closed_log = closed_log

    def close(self) -> None:
        self.closed = True
        self._closed_log.append(self.id)


class FakeLoader:
    """Makes FakeServables; per-version scripted failures and hooks run inside the load."""

    def __init__(self) -> None:
        self.calls: list[ServableId] = []
        self.failures: dict[int, list[Exception]] = {}  # one per attempt, then success
        self.broken: dict[int, Exception] = {}  # every attempt
        self.hooks: dict[int, Callable[[], None]] = {}
        self.closed: list[ServableId] = []  # every close(), in order
        # Weak, so tests can check the manager let go of what it loaded.
        self.loaded: dict[ServableId, list[weakref.ref[FakeServable]]] = {}

    def attempts(self, version: int) -> int:
        return sum(1 for id in self.calls if id.version == version)

    def last(self, name: str, version: int) -> FakeServable:
        servable = self.loaded[ServableId(name, version)][-1]()
        assert servable is not None
        return servable

    def __call__(self, id: ServableId, path: Path) -> FakeServable:
        assert path == Path("/models") / id.name / str(id.version)
        self.calls.append(id)
        hook = self.hooks.get(id.version)
        if hook is not None:
            hook()
        if id.version in self.broken:
            raise self.broken[id.version]
        failures = self.failures.get(id.version)
        if failures:
            raise failures.pop(0)
        servable = FakeServable(id, self.closed)
        self.loaded.setdefault(id, []).append(weakref.ref(servable))
        return servable


class Setup:
    def __init__(self, policy: TransitionPolicy | None = None, **options: Any) -> None:
        self.loader = FakeLoader()
        self.monitor = ServableStateMonitor()
        options = {
            "autostart": False,
            "load_retry_interval_s": 0,
            "max_num_load_retries": 2,
            **options,
        }
        # Stepped by hand, actions run inside step() unless a test asks for load workers.
        options.setdefault(
            "inline_actions", not options["autostart"] and "num_load_threads" not in options
        )
        if policy is not None:
            options["policy"] = policy
        self.manager = AspiredVersionsManager(self.loader, self.monitor, **options)

    def aspire(self, name: str, *versions: int) -> None:
        self.manager.set_aspired_versions(
            name, [AspiredVersion(v, Path("/models") / name / str(v)) for v in versions]
        )

    def settle(self) -> None:
        for _ in range(50):
            if not self.manager.step():
                return
        raise AssertionError("the manager never settled")

    def events(self, since: int = 0) -> list[tuple[int, ManagerState]]:
        return [(s.id.version, s.state) for s in self.monitor.events()[since:]]

    def mark(self) -> int:
        return len(self.monitor.events())

    def latest(self, name: str = "m") -> int:
        with self.manager.handle(ServableRequest(name)) as handle:
            return handle.id.version

    def state(self, name: str, version: int) -> tuple[ManagerState, Code]:
        s = self.monitor.state(ServableId(name, version))
        assert s is not None
        return s.state, s.error_code

    def is_in(self, name: str, version: int, state: ManagerState) -> bool:
        s = self.monitor.state(ServableId(name, version))
        return s is not None and s.state is state


@pytest.fixture
def setup() -> Iterator[Setup]:
    s = Setup()
    yield s
    s.manager.close()


def test_set_aspired_versions_only_records_the_list(setup: Setup) -> None:
    setup.aspire("m", 1)
    assert setup.loader.calls == [] and setup.events() == []
    assert setup.manager.model_names() == ["m"]
    assert setup.manager.step()
    assert setup.events() == [(1, START), (1, LOADING), (1, AVAILABLE)]
    assert not setup.manager.step()
    # The same list again changes nothing.
    setup.aspire("m", 1)
    assert not setup.manager.step()
    assert setup.loader.calls == [ServableId("m", 1)]


def test_load_success_serves_through_counted_handles(setup: Setup) -> None:
    setup.aspire("m", 1)
    setup.settle()
    servable = setup.loader.last("m", 1)
    with setup.manager.handle(ServableRequest("m")) as handle:
        assert handle.id == ServableId("m", 1)
        assert handle.servable is servable
    with setup.manager.handle(ServableRequest("m", 1)) as handle:
        assert handle.servable is servable
    assert setup.manager.available_versions("m") == [1]
    assert [(s.id, s.state) for s in setup.manager.version_states("m")] == [
        (ServableId("m", 1), AVAILABLE)
    ]


def test_load_failure_ends_with_the_error_after_the_retries(setup: Setup) -> None:
    setup.loader.broken[1] = DataLossError("corrupt checkpoint")
    setup.aspire("m", 1)
    setup.settle()
    assert setup.loader.attempts(1) == 3  # max_num_load_retries=2: one try and two retries
    # While it waits to be retried, the version is LOADING with the last attempt's error.
    assert setup.events() == [(1, START), (1, LOADING), (1, LOADING), (1, LOADING), (1, END)]
    retrying = setup.monitor.events()[2:4]
    assert [(s.error_code, s.error_message) for s in retrying] == [
        (Code.DATA_LOSS, "corrupt checkpoint")
    ] * 2
    (status,) = setup.manager.version_states("m")
    assert (status.state, status.error_code) == (END, Code.DATA_LOSS)
    assert status.error_message == "corrupt checkpoint"
    # The status is kept for good; it must not pin the failed load's frames.
    assert status.error is not None and status.error.__traceback__ is None
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(m\)$"):
        setup.manager.handle(ServableRequest("m"))
    # Still aspired, not retried: only a fresh aspiration loads it again.
    setup.aspire("m", 1)
    assert not setup.manager.step()
    assert setup.loader.attempts(1) == 3


def test_load_succeeds_on_a_retry(setup: Setup) -> None:
    setup.loader.failures[1] = [DataLossError("flaky"), DataLossError("flaky")]
    setup.aspire("m", 1)
    setup.settle()
    assert setup.loader.attempts(1) == 3
    assert setup.events() == [(1, START), (1, LOADING), (1, LOADING), (1, LOADING), (1, AVAILABLE)]
    assert setup.manager.version_states("m")[0].error is None  # AVAILABLE clears the error


def test_unexpected_exception_becomes_unknown_error(setup: Setup) -> None:
    setup.loader.broken[1] = ValueError("boom")
    setup.aspire("m", 1)
    setup.settle()
    (status,) = setup.manager.version_states("m")
    assert (status.state, status.error_code) == (END, Code.UNKNOWN)
    assert status.error_message == "ValueError: boom"


def test_retries_stop_when_the_version_is_no_longer_aspired() -> None:
    setup = Setup(max_num_load_retries=5)
    # The source drops version 1 while its first attempt fails (inline: during step()).
    setup.loader.broken[1] = DataLossError("corrupt")
    setup.loader.hooks[1] = lambda: setup.aspire("m")
    setup.aspire("m", 1)
    setup.settle()
    assert setup.loader.attempts(1) == 1
    assert setup.events() == [(1, START), (1, LOADING), (1, END)]
    assert setup.state("m", 1) == (END, Code.DATA_LOSS)
    setup.manager.close()


def test_should_retry_model_load_ends_a_load_it_turns_down() -> None:
    # A minute between retries: a retry would hold this inline load far beyond WAIT_S.
    setup = Setup(
        max_num_load_retries=5,
        load_retry_interval_s=60.0,
        should_retry_model_load=lambda err: err.code != Code.DATA_LOSS,
    )
    try:
        setup.loader.broken[1] = DataLossError("corrupt")
        setup.aspire("m", 1)
        started = time.monotonic()
        setup.settle()
        assert time.monotonic() - started < WAIT_S
        assert setup.loader.attempts(1) == 1
        assert setup.state("m", 1) == (END, Code.DATA_LOSS)
    finally:
        setup.manager.close()


def test_errors_should_retry_model_load_accepts_are_retried() -> None:
    retried = Setup(should_retry_model_load=lambda err: err.code != Code.DATA_LOSS)
    try:
        retried.loader.failures[1] = [NotFoundError("not yet")]
        retried.aspire("m", 1)
        retried.settle()
        assert retried.loader.attempts(1) == 2
        assert retried.state("m", 1) == (AVAILABLE, Code.OK)
    finally:
        retried.manager.close()


def test_cancelling_interrupts_the_wait_between_retries() -> None:
    # A minute between retries: only the cancellation can end this load within WAIT_S.
    s = Setup(num_load_threads=1, load_retry_interval_s=60.0, max_num_load_retries=5)
    try:
        failed = threading.Event()
        s.loader.broken[1] = DataLossError("corrupt")
        s.loader.hooks[1] = failed.set
        s.aspire("m", 1)
        s.manager.step()
        assert failed.wait(WAIT_S)
        s.aspire("m")
        ended = s.monitor.wait_for(lambda m: m.states("m")[0].state is END, WAIT_S)
        assert ended and s.loader.attempts(1) == 1
    finally:
        s.manager.close()


def test_availability_preserving_swap(setup: Setup) -> None:
    setup.aspire("m", 1)
    setup.settle()
    v1 = setup.loader.last("m", 1)
    served_during_load: list[int] = []
    setup.loader.hooks[2] = lambda: served_during_load.append(setup.latest())
    mark = setup.mark()
    setup.aspire("m", 2)  # latest{1}: version 2 replaces version 1
    assert setup.manager.step()
    # Version 2 is AVAILABLE and version 1 still serves: nothing has unloaded yet.
    assert setup.events(mark) == [(2, START), (2, LOADING), (2, AVAILABLE)]
    assert served_during_load == [1]
    assert setup.manager.available_versions("m") == [2, 1]
    assert setup.latest() == 2 and not v1.closed
    assert setup.manager.step()
    assert setup.events(mark)[3:] == [(1, UNLOADING), (1, END)]
    assert v1.closed
    assert setup.manager.available_versions("m") == [2]
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Specific\(m, 1\)$"):
        setup.manager.handle(ServableRequest("m", 1))
    # The manager holds nothing of version 1 any more: its memory can go.
    del v1
    gc.collect()
    assert setup.loader.loaded[ServableId("m", 1)][0]() is None


def test_published_states_agree_with_handle(setup: Setup) -> None:
    # Listeners run as each state is published: AVAILABLE comes once handle() returns the
    # version; UNLOADING while it is still handed out; END once it no longer is.
    seen: list[tuple[int, ManagerState, bool]] = []

    def servable_now(state: ServableState) -> None:
        try:
            with setup.manager.handle(ServableRequest("m", state.id.version)):
                found = True
        except NotFoundError:
            found = False
        seen.append((state.id.version, state.state, found))

    setup.aspire("m", 1)
    setup.settle()
    setup.monitor.add_listener(servable_now)
    setup.aspire("m", 2)
    setup.settle()
    assert seen == [
        (2, START, False),
        (2, LOADING, False),
        (2, AVAILABLE, True),
        (1, UNLOADING, True),
        (1, END, False),
    ]


def test_failed_replacement_keeps_the_old_version_serving(setup: Setup) -> None:
    setup.aspire("m", 1)
    setup.settle()
    setup.loader.broken[2] = DataLossError("corrupt")
    setup.aspire("m", 2)
    setup.settle()
    assert setup.state("m", 2) == (END, Code.DATA_LOSS)
    assert setup.state("m", 1) == (AVAILABLE, Code.OK)
    assert setup.latest() == 1 and not setup.loader.last("m", 1).closed
    # The broken directory goes: version 1 is aspired again and simply stays (no reload).
    setup.aspire("m", 1)
    setup.settle()
    assert setup.loader.attempts(1) == 1 and setup.latest() == 1
    # The fixed version 2 comes back: a fresh harness, a fresh load, then the swap.
    del setup.loader.broken[2]
    mark = setup.mark()
    setup.aspire("m", 2)
    setup.settle()
    assert setup.events(mark) == [
        (2, START),
        (2, LOADING),
        (2, AVAILABLE),
        (1, UNLOADING),
        (1, END),
    ]
    assert setup.latest() == 2


def test_last_serving_version_stays_while_its_replacement_loads(setup: Setup) -> None:
    setup.aspire("m", 1)
    setup.settle()
    v1 = setup.loader.last("m", 1)
    loading, proceed = threading.Event(), threading.Event()

    def slow_load() -> None:
        loading.set()
        assert proceed.wait(WAIT_S)

    setup.loader.hooks[2] = slow_load
    mark = setup.mark()
    setup.aspire("m", 2)
    # The manage pass loading version 2 (inline) runs on its own thread, as in the server.
    manage = threading.Thread(target=setup.manager.step)
    manage.start()
    assert loading.wait(WAIT_S)
    # Version 2 is mid-load: another pass changes nothing and version 1 keeps answering.
    assert not setup.manager.step()
    assert setup.latest() == 1 and setup.state("m", 1) == (AVAILABLE, Code.OK)
    proceed.set()
    manage.join(WAIT_S)
    assert not manage.is_alive()
    assert setup.events(mark) == [(2, START), (2, LOADING), (2, AVAILABLE)]
    assert setup.manager.step()
    assert setup.events(mark)[3:] == [(1, UNLOADING), (1, END)]
    assert v1.closed


def test_resource_preserving_unloads_before_loading() -> None:
    s = Setup(policy=resource_preserving)
    try:
        s.aspire("m", 1)
        s.settle()
        mark = s.mark()
        s.aspire("m", 2)
        assert s.manager.step()
        assert s.events(mark) == [(2, START), (1, UNLOADING), (1, END)]
        with pytest.raises(NotFoundError):
            s.manager.handle(ServableRequest("m"))
        s.settle()
        assert s.events(mark)[3:] == [(2, LOADING), (2, AVAILABLE)]
        assert s.latest() == 2
    finally:
        s.manager.close()


def test_all_versions_load_highest_first_and_lowest_unloads_first(setup: Setup) -> None:
    setup.aspire("m", 1, 2, 3)
    setup.settle()
    assert setup.events() == [
        (1, START),
        (2, START),
        (3, START),
        (3, LOADING),
        (3, AVAILABLE),
        (2, LOADING),
        (2, AVAILABLE),
        (1, LOADING),
        (1, AVAILABLE),
    ]
    assert setup.manager.available_versions("m") == [3, 2, 1]
    assert setup.latest() == 3
    for version in (1, 2, 3):
        with setup.manager.handle(ServableRequest("m", version)) as handle:
            assert handle.servable is setup.loader.last("m", version)
    mark = setup.mark()
    setup.aspire("m")  # zero versions on disk: everything goes, lowest first
    setup.settle()
    assert setup.events(mark) == [
        (1, UNLOADING),
        (1, END),
        (2, UNLOADING),
        (2, END),
        (3, UNLOADING),
        (3, END),
    ]
    assert setup.manager.available_versions("m") == []
    assert setup.loader.closed == [ServableId("m", v) for v in (1, 2, 3)]
    assert [s.state for s in setup.manager.version_states("m")] == [END, END, END]
    assert setup.manager.model_names() == ["m"]
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(m\)$"):
        setup.manager.handle(ServableRequest("m"))


def test_models_are_managed_independently(setup: Setup) -> None:
    setup.loader.broken[1] = DataLossError("corrupt")
    setup.aspire("a", 1)
    setup.aspire("b", 5)
    setup.settle()
    assert setup.state("a", 1) == (END, Code.DATA_LOSS)
    assert setup.latest("b") == 5
    assert setup.manager.model_names() == ["a", "b"]


def test_unload_waits_for_in_flight_requests() -> None:
    s = Setup(inline_actions=False)
    try:
        s.aspire("m", 1)
        s.settle()
        v1 = s.loader.last("m", 1)
        started, finish = threading.Event(), threading.Event()
        seen_closed: list[bool] = []

        def request() -> None:
            with s.manager.handle(ServableRequest("m")) as handle:
                started.set()
                assert finish.wait(WAIT_S)
                seen_closed.append(handle.servable.closed)

        worker = threading.Thread(target=request)
        worker.start()
        assert started.wait(WAIT_S)
        s.aspire("m", 2)
        s.manager.step()  # hands the load of 2 to the model's worker
        assert s.monitor.wait_until_available("m", 2, WAIT_S)
        s.manager.step()  # hands version 1's unload to it
        assert s.monitor.wait_for(lambda _: s.is_in("m", 1, UNLOADING), WAIT_S)
        # Version 1 waits for the request; new requests already get version 2.
        assert s.latest() == 2
        assert not v1.closed
        finish.set()
        worker.join(WAIT_S)
        assert s.monitor.wait_for(lambda _: s.is_in("m", 1, END), WAIT_S)
        assert seen_closed == [False] and v1.closed
    finally:
        s.manager.close()


def test_handle_errors(setup: Setup) -> None:
    setup.aspire("m", 1)
    setup.settle()
    setup.manager.set_version_labels("m", {"canary": 5})
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(x\)$"):
        setup.manager.handle(ServableRequest("x"))
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Specific\(m, 9\)$"):
        setup.manager.handle(ServableRequest("m", 9))
    with pytest.raises(InvalidArgumentError, match="^Unrecognized servable version label: x$"):
        setup.manager.handle(ServableRequest("m", label="x"))
    with pytest.raises(InvalidArgumentError, match="^Unrecognized servable version label: s$"):
        setup.manager.handle(ServableRequest("other", label="s"))
    # A label naming a version that is not loaded resolves, then is not found.
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Specific\(m, 5\)$"):
        setup.manager.handle(ServableRequest("m", label="canary"))


def test_labels(setup: Setup) -> None:
    setup.aspire("m", 1, 2)
    setup.settle()
    setup.manager.set_version_labels("m", {"stable": 1, "canary": 2})
    for label, version in [("stable", 1), ("canary", 2)]:
        with setup.manager.handle(ServableRequest("m", label=label)) as handle:
            assert handle.id == ServableId("m", version)
    labels = setup.manager.version_labels("m")
    assert labels == {"stable": 1, "canary": 2}
    labels["stable"] = 2  # a copy: the manager's labels do not change
    assert setup.manager.version_labels("m")["stable"] == 1
    setup.manager.set_version_labels("m", {})
    assert setup.manager.version_labels("m") == {}
    with pytest.raises(InvalidArgumentError):
        setup.manager.handle(ServableRequest("m", label="stable"))


def test_version_aspired_again_after_unloading_loads_again(setup: Setup) -> None:
    setup.aspire("m", 1)
    setup.settle()
    first = setup.loader.last("m", 1)
    setup.aspire("m")
    setup.settle()
    assert first.closed
    mark = setup.mark()
    setup.aspire("m", 1)
    setup.settle()
    assert setup.events(mark) == [(1, START), (1, LOADING), (1, AVAILABLE)]
    second = setup.loader.last("m", 1)
    assert second is not first and not second.closed
    with setup.manager.handle(ServableRequest("m")) as handle:
        assert handle.servable is second


def test_version_dropped_and_named_again_mid_load_is_loaded_afresh(setup: Setup) -> None:
    # The source drops version 1 and names it again while it loads: the cancelled load is
    # undone, then the version loads afresh.
    def flap() -> None:
        setup.loader.hooks.pop(1)
        setup.aspire("m")
        setup.aspire("m", 1)

    setup.loader.hooks[1] = flap
    setup.aspire("m", 1)
    setup.settle()
    assert setup.events() == [
        (1, START),
        (1, LOADING),
        (1, END),
        (1, START),
        (1, LOADING),
        (1, AVAILABLE),
    ]
    (first, second) = [ref() for ref in setup.loader.loaded[ServableId("m", 1)]]
    assert first is None and second is not None and not second.closed
    assert setup.loader.closed == [ServableId("m", 1)]
    cancelled = next(s for s in setup.monitor.events() if s.state is END)
    assert isinstance(cancelled.error, CancelledError)
    assert setup.latest() == 1


def test_close_unloads_everything_after_its_handles(setup: Setup) -> None:
    setup.aspire("a", 1)
    setup.aspire("b", 1, 2)
    setup.settle()
    handle = setup.manager.handle(ServableRequest("b", 1))
    closer = threading.Thread(target=setup.manager.close)
    closer.start()
    assert setup.monitor.wait_for(lambda _: setup.is_in("b", 1, UNLOADING), WAIT_S)
    assert not handle.servable.closed
    handle.release()
    closer.join(WAIT_S)
    assert not closer.is_alive()
    ids = [ServableId("a", 1), ServableId("b", 1), ServableId("b", 2)]
    assert setup.loader.closed == ids
    for id in ids:
        assert setup.state(id.name, id.version) == (END, Code.OK)
    with pytest.raises(NotFoundError):
        setup.manager.handle(ServableRequest("a"))
    setup.manager.close()  # idempotent
    mark = setup.mark()
    setup.aspire("a", 3)  # ignored once closed
    assert not setup.manager.step()
    assert setup.events(mark) == []


def test_real_saved_models_swap_and_predict(tmp_path: Path) -> None:
    base = tmp_path / "half_plus_two"
    base.mkdir()
    for dirname in ("1", "2"):
        (base / dirname).symlink_to(HALF_PLUS_TWO / "00000123", target_is_directory=True)
    (base / "3").mkdir()
    (base / "3" / "saved_model.pb").write_bytes(b"not a SavedModel")
    monitor = ServableStateMonitor()
    manager = AspiredVersionsManager(
        lambda id, path: load_saved_model(path),
        monitor,
        autostart=False,
        inline_actions=True,
        load_retry_interval_s=0,
        max_num_load_retries=0,
    )

    def aspire(version: int) -> None:
        manager.set_aspired_versions(
            "half_plus_two", [AspiredVersion(version, base / str(version))]
        )
        while manager.step():
            pass

    def predict() -> tuple[int, np.ndarray]:
        with manager.handle(ServableRequest("half_plus_two")) as handle:
            x = np.array([[1.0], [2.0], [5.0]], np.float32)
            return handle.id.version, handle.servable.run("serving_default", {"x": x})["y"]

    try:
        aspire(1)
        version, y = predict()
        assert version == 1
        np.testing.assert_allclose(y, [[2.5], [3.0], [4.5]])
        aspire(2)
        version, y = predict()
        assert version == 2
        np.testing.assert_allclose(y, [[2.5], [3.0], [4.5]])
        aspire(3)  # broken: reported with its error, version 2 keeps serving
        states = {s.id.version: s for s in manager.version_states("half_plus_two")}
        assert [states[v].state for v in (3, 2, 1)] == [END, AVAILABLE, END]
        assert states[3].error_code == Code.DATA_LOSS
        assert "Could not parse SavedModel" in states[3].error_message
        assert isinstance(states[3].error, OpError) and states[1].error is None
        assert predict()[0] == 2
    finally:
        manager.close()
    assert manager.version_states("half_plus_two")[1].state is END


def test_manage_thread_with_load_threads() -> None:
    # An hour between passes: only the wake-ups (new list, finished load) move things along.
    s = Setup(autostart=True, num_load_threads=2, manage_interval_s=3600)
    try:
        gate = threading.Event()

        def stuck() -> None:
            assert gate.wait(WAIT_S)

        s.loader.hooks[2] = stuck
        s.aspire("m", 1, 2, 3)
        s.aspire("other", 7)  # returns at once although version 2 of m is stuck loading
        assert s.monitor.wait_until_available("m", 3, WAIT_S)
        assert s.monitor.wait_until_available("other", 7, WAIT_S)
        gate.set()
        assert s.monitor.wait_until_available("m", 2, WAIT_S)
        assert s.monitor.wait_until_available("m", 1, WAIT_S)
        s.aspire("m", 4)
        assert s.monitor.wait_until_available("m", 4, WAIT_S)
        assert s.monitor.wait_for(
            lambda m: [st.state for st in m.states("m")] == [AVAILABLE, END, END, END], WAIT_S
        )
        assert s.manager.available_versions("m") == [4]
        assert s.latest("other") == 7
    finally:
        s.manager.close()
    assert all(st.state is END for st in s.monitor.states("m"))


def test_requests_never_fail_or_see_a_closed_servable_across_swaps() -> None:
    s = Setup(autostart=True, num_load_threads=1, manage_interval_s=3600)
    stop = threading.Event()
    failures: list[str] = []
    served: set[int] = set()

    def traffic() -> None:
        while not stop.is_set():
            try:
                with s.manager.handle(ServableRequest("m")) as handle:
                    if handle.servable.closed:
                        failures.append(f"version {handle.id.version} served after close")
                    served.add(handle.id.version)
            except OpError as err:
                failures.append(err.status_text())

    try:
        s.aspire("m", 1)
        assert s.monitor.wait_until_available("m", 1, WAIT_S)
        clients = [threading.Thread(target=traffic) for _ in range(3)]
        for client in clients:
            client.start()
        for version in range(2, 12):
            s.aspire("m", version)
            assert s.monitor.wait_for(lambda _, v=version: s.is_in("m", v - 1, END), WAIT_S)
        stop.set()
        for client in clients:
            client.join(WAIT_S)
        assert failures == []
        assert served <= set(range(1, 12))
        assert s.latest() == 11
        assert s.loader.closed == [ServableId("m", v) for v in range(1, 11)]
    finally:
        stop.set()
        s.manager.close()
