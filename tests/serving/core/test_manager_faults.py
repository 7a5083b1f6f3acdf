"""The manager under faults: a hung load, a directory replaced in place, a version a source
cannot aspire. Recording servables as in test_manager; the manage thread and model workers are
real."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from runtime.errors import Code, DataLossError, NotFoundError
from serving.core.aspired import AspiredVersion
from serving.servable import ServableId, ServableRequest
from tests.serving.core.test_manager import AVAILABLE, END, LOADING, WAIT_S, Setup


def _aspire(s: Setup, name: str, versions: dict[int, tuple[int, int, int]]) -> None:
    s.manager.set_aspired_versions(
        name,
        [AspiredVersion(v, Path("/models") / name / str(v), ident) for v, ident in versions.items()],
    )


def test_a_hung_load_holds_back_neither_other_models_nor_close() -> None:
    # --num_load_threads=0 (the default): one load at a time, until one stalls.
    s = Setup(autostart=True, load_stall_s=0.5)
    gate = threading.Event()
    s.loader.hooks[1] = lambda: gate.wait(WAIT_S) and None
    try:
        s.aspire("stuck", 1)
        assert s.monitor.wait_for(lambda _: s.is_in("stuck", 1, LOADING), WAIT_S)
        s.aspire("other", 2)
        assert s.monitor.wait_until_available("other", 2, WAIT_S)
        started = time.monotonic()
        s.manager.close(wait_s=0.2)
        assert time.monotonic() - started < WAIT_S
        assert s.loader.closed == [ServableId("other", 2)]
    finally:
        gate.set()
    # The abandoned load ends: it was cancelled, so what it loaded is closed at once.
    assert s.monitor.wait_for(lambda _: s.is_in("stuck", 1, END), WAIT_S)
    assert ServableId("stuck", 1) in s.loader.closed


def test_a_replaced_directory_is_swapped_in_without_a_gap() -> None:
    s = Setup(inline_actions=False)  # the old content's unload waits for this thread's handle
    _aspire(s, "m", {1: (1, 100, 0)})
    s.manager.step()
    assert s.monitor.wait_until_available("m", 1, WAIT_S)
    old = s.loader.last("m", 1)
    with s.manager.handle(ServableRequest("m")) as handle:
        mark = s.mark()
        _aspire(s, "m", {1: (1, 200, 0)})  # the same version number, another directory
        s.manager.step()
        assert s.monitor.wait_for(lambda _: s.loader.attempts(1) == 2 and len(s.events(mark)), WAIT_S)
        # The request holding the old content still has it; new requests get the new one.
        with s.manager.handle(ServableRequest("m")) as fresh:
            assert fresh.servable is s.loader.last("m", 1) and fresh.servable is not old
        assert handle.servable is old and not old.closed
    assert _eventually(lambda: old.closed)
    # The version stayed AVAILABLE throughout: no LOADING, UNLOADING or END was published.
    assert s.events(mark) == [(1, AVAILABLE)]
    s.manager.close()


def _eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_replacement_that_fails_leaves_the_old_content_serving() -> None:
    s = Setup(max_num_load_retries=0)
    _aspire(s, "m", {1: (1, 100, 0)})
    s.settle()
    old = s.loader.last("m", 1)
    s.loader.broken[1] = DataLossError("truncated variables")
    _aspire(s, "m", {1: (1, 200, 0)})
    s.settle()
    with s.manager.handle(ServableRequest("m")) as handle:
        assert handle.servable is old
    assert s.state("m", 1) == (AVAILABLE, Code.DATA_LOSS)
    (status,) = s.manager.version_states("m")
    assert status.error_message == "truncated variables"
    # Fixed by a third copy: swapped in, and the error is gone.
    del s.loader.broken[1]
    _aspire(s, "m", {1: (1, 300, 0)})
    s.settle()
    assert s.state("m", 1) == (AVAILABLE, Code.OK) and old.closed
    s.manager.close()


def test_a_failed_version_replaced_in_place_is_loaded_afresh() -> None:
    s = Setup(max_num_load_retries=0)
    s.loader.broken[1] = DataLossError("corrupt")
    _aspire(s, "m", {1: (1, 100, 0)})
    s.settle()
    assert s.state("m", 1) == (END, Code.DATA_LOSS)
    del s.loader.broken[1]
    _aspire(s, "m", {1: (1, 200, 0)})
    s.settle()
    assert s.state("m", 1) == (AVAILABLE, Code.OK)
    s.manager.close()


def test_unservable_versions_show_in_the_status() -> None:
    s = Setup()
    s.aspire("m", 1)
    s.settle()
    broken = NotFoundError("Version 2 of servable m at /models/m/2 cannot be loaded: 2 is a "
                           "dangling symbolic link (to /nowhere)")
    s.manager.report_unservable("m", 2, broken)
    assert s.state("m", 2) == (END, Code.NOT_FOUND)
    assert s.manager.version_states("m")[0].error_message == broken.message
    # A version still serving older content keeps serving, with the reason beside it.
    s.manager.report_unservable("m", 1, NotFoundError("no saved_model.pb"))
    assert s.state("m", 1) == (AVAILABLE, Code.NOT_FOUND)
    assert s.latest() == 1
    # Fixed where it lies (the same directory): the error goes.
    s.manager.report_unservable("m", 1, None)
    assert s.state("m", 1) == (AVAILABLE, Code.OK)
    s.manager.report_unservable("m", 2, None)  # not serving: its END stays as it was
    assert s.state("m", 2) == (END, Code.NOT_FOUND)
    s.manager.close()
