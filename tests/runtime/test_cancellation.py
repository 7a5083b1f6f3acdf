"""Cancelling a run: the runtime stops between kernels and loop iterations with the cancellation's
error, as it is (not wrapped in another error or renamed after a node)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import runtime.dataflow_executor as dataflow_module
import runtime.plan as plan_module
from runtime import cancellation as cancellation_module
from runtime.cancellation import Cancellation
from runtime.dtypes import DataType
from runtime.errors import CancelledError, DeadlineExceededError, OpError
from runtime.graph import Graph, Node, TensorRef
from runtime.kernels import NodeContext
from runtime.saved_model import LoadedModel, load_saved_model
from runtime.session import Session
from tests.runtime.model_fixtures import FIXTURE_MODELS
from tests.runtime.test_control_flow import Builder, doubling_loop

F32 = DataType.DT_FLOAT
I32 = DataType.DT_INT32

CANCEL_AFTER_S = 0.05
# How soon after the cancel the run must have raised; generous for a loaded machine (a loop
# iteration takes tens of microseconds, and an uncancelled run below takes seconds).
RAISED_WITHIN_S = 0.5


def _model(name: str) -> LoadedModel:
    versions = sorted(p for p in (FIXTURE_MODELS / name).iterdir() if p.name.isdigit())
    return load_saved_model(Path(versions[-1]))


@pytest.fixture(scope="module")
def while_model() -> LoadedModel:
    """A tf.Module whose ``tf.while_loop`` (StatelessWhile) runs ``steps`` times."""
    return _model("control_flow")


@pytest.fixture(scope="module")
def tf1_model() -> LoadedModel:
    """A TF1 graph whose nested ``tf.compat.v1.while_loop``s run ~``steps**2 / 2`` iterations."""
    return _model("tf1_control")


def _cancel_mid_run(run: Callable[[Cancellation], Any]) -> tuple[BaseException | None, float]:
    """Start ``run`` on a thread, cancel it with a DeadlineExceededError after CANCEL_AFTER_S;
    the error it raised (None if it returned) and how long after the cancel it ended."""
    cancellation = Cancellation()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            run(cancellation)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            outcome["error"] = err
        outcome["ended"] = time.perf_counter()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    time.sleep(CANCEL_AFTER_S)
    cancelled_at = time.perf_counter()
    cancellation.cancel(DeadlineExceededError("Deadline Exceeded"))
    thread.join(timeout=60)
    assert not thread.is_alive(), "the run ignored its cancellation"
    return outcome.get("error"), outcome["ended"] - cancelled_at


def _assert_is_the_cancellation_error(error: BaseException | None) -> None:
    assert error is not None, "the run completed normally"
    assert type(error) is DeadlineExceededError, repr(error)
    assert error.message == "Deadline Exceeded"  # not annotated with a node
    assert error.node is None


# --- long loops in real models ---------------------------------------------------------------


def test_a_long_functional_while_loop_stops_soon_after_cancel(while_model: LoadedModel) -> None:
    x = np.ones((2, 4), np.float32)
    while_model.run("serving_default", {"x": x, "steps": np.int32(3)})  # compiled beforehand
    steps = np.int32(300_000)  # seconds of work uncancelled

    def run(cancellation: Cancellation) -> Any:
        return while_model.run("serving_default", {"x": x, "steps": steps}, None, cancellation)

    error, after_cancel = _cancel_mid_run(run)
    _assert_is_the_cancellation_error(error)
    assert after_cancel < RAISED_WITHIN_S
    assert cancellation_module.current() is None  # the run's cancellation is not left behind


def test_a_long_tf1_loop_stops_soon_after_cancel(tf1_model: LoadedModel) -> None:
    x = np.ones((2, 3), np.float32)
    tf1_model.run("serving_default", {"x": x, "steps": np.int32(3)})
    steps = np.int32(300)  # nested loops: seconds of work uncancelled

    def run(cancellation: Cancellation) -> Any:
        return tf1_model.run("serving_default", {"x": x, "steps": steps}, cancellation=cancellation)

    error, after_cancel = _cancel_mid_run(run)
    _assert_is_the_cancellation_error(error)
    assert after_cancel < RAISED_WITHIN_S


def test_an_uncancelled_run_gives_the_same_results(
    while_model: LoadedModel, tf1_model: LoadedModel
) -> None:
    for model, inputs in (
        (while_model, {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "steps": np.int32(5)}),
        (tf1_model, {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "steps": np.int32(4)}),
    ):
        plain = model.run("serving_default", inputs)
        watched = model.run("serving_default", inputs, cancellation=Cancellation())
        assert plain.keys() == watched.keys()
        for alias, value in plain.items():
            np.testing.assert_array_equal(watched[alias], value, err_msg=alias)


# --- where the checks are: kernels counted as they run ----------------------------------------


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Plans compiled while this is active count their kernel calls by op type in
    ``calls``; ``on_call[op]``, if set, runs before each call of that op's kernels."""
    state: dict[str, Any] = {"calls": {}, "on_call": {}}
    build = plan_module.build_kernel

    def counting(factory: Callable[[NodeContext], Any], ctx: NodeContext) -> Any:
        fn = build(factory, ctx)
        if not callable(fn):
            return fn
        op = ctx.op

        def counted(*args: Any) -> Any:
            state["calls"][op] = state["calls"].get(op, 0) + 1
            hook = state["on_call"].get(op)
            if hook is not None:
                hook(state["calls"][op])
            return fn(*args)

        return counted

    monkeypatch.setattr(plan_module, "build_kernel", counting)
    monkeypatch.setattr(dataflow_module, "build_kernel", counting)
    yield state


def _chain(length: int) -> Graph:
    """x -> Neg -> Neg -> ... (``length`` kernels)."""
    nodes = [Node("x", "Placeholder", attrs={"dtype": F32, "shape": None})]
    previous = "x"
    for k in range(length):
        nodes.append(Node(f"neg{k}", "Neg", [TensorRef(previous)], attrs={"T": F32}))
        previous = f"neg{k}"
    return Graph(nodes)


def test_a_run_cancelled_before_it_starts_runs_no_kernel(kernel_calls: dict[str, Any]) -> None:
    session = Session(_chain(200))
    cancellation = Cancellation()
    cancellation.cancel(DeadlineExceededError("Deadline Exceeded"))
    with pytest.raises(DeadlineExceededError) as raised:
        session.run("neg199", {"x": np.ones(3, np.float32)}, cancellation=cancellation)
    _assert_is_the_cancellation_error(raised.value)
    assert kernel_calls["calls"] == {}


def test_the_static_plan_stops_between_kernels(kernel_calls: dict[str, Any]) -> None:
    session = Session(_chain(50))
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(session.run("neg49", {"x": x}), x)  # 50 negations
    assert kernel_calls["calls"] == {"Neg": 50}

    cancellation = Cancellation()
    kernel_calls["calls"].clear()
    kernel_calls["on_call"]["Neg"] = lambda n: n == 5 and cancellation.cancel()
    with pytest.raises(CancelledError) as raised:
        session.run("neg49", {"x": x}, cancellation=cancellation)
    assert type(raised.value) is CancelledError and raised.value.node is None
    assert kernel_calls["calls"] == {"Neg": 5}  # the kernel running when cancelled finishes


def test_a_plan_given_no_cancellation_checks_nothing(kernel_calls: dict[str, Any]) -> None:
    plan = Session(_chain(3)).plan(["x"], ["neg2"])
    assert "cancellation" not in plan.source
    plan.run([np.ones(2, np.float32)], cancellation=Cancellation())  # the other variant runs
    assert kernel_calls["calls"] == {"Neg": 3}


def test_a_functional_while_stops_between_iterations(kernel_calls: dict[str, Any]) -> None:
    b = Builder()
    b.placeholder("x", F32)
    b.placeholder("n", I32)
    doubling_loop(b)
    session = Session(b.graph())
    feeds = {"x": np.float32(1.0), "n": np.int32(100)}
    assert float(session.run(["loop:2"], feeds)[0]) == 2.0**100
    assert kernel_calls["calls"]["Mul"] == 100

    cancellation = Cancellation()
    kernel_calls["calls"].clear()
    kernel_calls["on_call"]["Mul"] = lambda n: n == 10 and cancellation.cancel(
        DeadlineExceededError("Deadline Exceeded")
    )
    with pytest.raises(DeadlineExceededError) as raised:
        session.run(["loop:2"], feeds, cancellation=cancellation)
    _assert_is_the_cancellation_error(raised.value)
    # The body running when cancelled finishes; the next iteration does not start.
    assert kernel_calls["calls"]["Mul"] == 10
    assert cancellation_module.current() is None


def test_the_dataflow_executor_stops_between_nodes(
    kernel_calls: dict[str, Any], tf1_model: LoadedModel
) -> None:
    # A signature call of its own: its plan is compiled now, with the kernels counted.
    inputs = {"x": np.ones((2, 3), np.float32), "steps": np.int32(20)}
    tf1_model.run("serving_default", inputs, ["triangle"])
    ops = dict(kernel_calls["calls"])
    assert ops, "no kernel of the TF1 loop was counted"
    op = max(ops, key=ops.__getitem__)  # the op its loops run most

    cancellation = Cancellation()
    kernel_calls["calls"].clear()
    kernel_calls["on_call"][op] = lambda n: n == 7 and cancellation.cancel(
        DeadlineExceededError("Deadline Exceeded")
    )
    with pytest.raises(OpError) as raised:
        tf1_model.run("serving_default", inputs, ["triangle"], cancellation)
    _assert_is_the_cancellation_error(raised.value)
    assert kernel_calls["calls"][op] == 7
    assert sum(kernel_calls["calls"].values()) < sum(ops.values())
