"""start_run: answers reach the event loop in bulk, the handle is released once, and a run on
the pool is not started for a caller who has gone, and stops with its caller otherwise."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from runtime.cancellation import Cancellation
from runtime.errors import CancelledError, DeadlineExceededError, OpError
from serving.requests.call_context import CallContext
from serving.requests.model_runner import NOT_RUN_MESSAGE, start_run
from serving.servable import ServableHandle, ServableId


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(1)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def _handle(model: Any, release: Callable[[], None] | None = None) -> ServableHandle:
    return ServableHandle(ServableId("m", 1), model, release)


class _Batching:
    """A batching version whose "batch thread" answers every queued task at once."""

    def __init__(self) -> None:
        self.pending: list[Any] = []
        self.callers: list[Any] = []

    def batches(self, key: str, aliases: Any) -> bool:
        return True

    def submit(self, key: str, inputs: Any, aliases: Any, on_done: Any, caller: Any) -> None:
        self.pending.append((inputs, on_done))
        self.callers.append(caller)

    def answer_all(self) -> None:
        for inputs, on_done in self.pending:
            on_done({"y": inputs["x"] * 2}, None)


def test_a_batch_of_answers_wakes_the_loop_once(pool: ThreadPoolExecutor) -> None:
    model = _Batching()
    released: list[int] = []

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        wakeups = 0
        threadsafe = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakeups
            wakeups += 1
            return threadsafe(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        futures = []
        for index in range(5):
            release = lambda i=index: released.append(i)
            handle = ServableHandle(ServableId("m", 1), model, release)  # type: ignore[arg-type]
            futures.append(
                start_run(handle, "k", {"x": np.array([index])}, None, pool, CallContext())
            )
        batch_thread = threading.Thread(target=model.answer_all)
        batch_thread.start()
        batch_thread.join()
        results = await asyncio.gather(*futures)
        assert wakeups == 1
        return [r["y"].tolist() for r in results]

    assert asyncio.run(scenario()) == [[0], [2], [4], [6], [8]]
    assert sorted(released) == [0, 1, 2, 3, 4]


def test_the_queue_sees_the_callers_deadline_and_departure(pool: ThreadPoolExecutor) -> None:
    model = _Batching()
    released: list[int] = []

    async def scenario() -> None:
        def handle() -> ServableHandle:
            return ServableHandle(
                ServableId("m", 1), model, lambda: released.append(1)  # type: ignore[arg-type]
            )

        # A caller that stops awaiting (timed out, disconnected) shows as cancelled.
        call = CallContext.with_timeout(60)
        future = start_run(handle(), "k", {"x": np.array([1])}, None, pool, call)
        (caller,) = model.callers
        assert caller.deadline == call.deadline
        assert not caller.cancelled()
        future.cancel()
        assert caller.cancelled()
        # So does one whose request has been answered or stopped, though still awaiting.
        left = CallContext()
        start_run(handle(), "k", {"x": np.array([2])}, None, pool, left)
        assert model.callers[1].deadline is None and not model.callers[1].cancelled()
        left.leave()
        assert model.callers[1].cancelled()
        thread = threading.Thread(target=model.answer_all)
        thread.start()
        thread.join()
        await asyncio.sleep(0.01)  # let the loop take the (ignored) answers

    asyncio.run(scenario())
    assert released == [1, 1]  # released when the runs ended, not when the callers left


class _Plain:
    """A version that does not batch; records the cancellation each run was given."""

    def __init__(self, run: Any = None) -> None:
        self.cancellations: list[Cancellation | None] = []
        self._run = run

    def batches(self, key: str, aliases: Any) -> bool:
        return False

    def run(self, key: str, inputs: Any, aliases: Any, cancellation: Any = None) -> Any:
        self.cancellations.append(cancellation)
        if self._run is not None:
            self._run(cancellation)
        return {"y": inputs["x"] + 1}


def test_an_executor_that_never_runs_the_work_still_answers_and_releases() -> None:
    refusing = ThreadPoolExecutor(1)
    refusing.shutdown()
    cancelling = ThreadPoolExecutor(1)
    gate = threading.Event()
    cancelling.submit(gate.wait)  # the pool's one worker is busy: the next submit waits
    released: list[str] = []
    plain = _Plain()

    async def scenario() -> list[BaseException]:
        errors = []
        handle = _handle(plain, lambda: released.append("a"))
        try:
            start_run(handle, "k", {"x": np.array([1])}, None, refusing, CallContext())
        except RuntimeError as err:  # refused at once: the caller hears it, the handle is back
            errors.append(err)
        handle = _handle(plain, lambda: released.append("b"))
        future = start_run(handle, "k", {"x": np.array([1])}, None, cancelling, CallContext())
        cancelling.shutdown(wait=False, cancel_futures=True)
        gate.set()
        try:
            await asyncio.wait_for(future, 30)
        except OpError as err:
            errors.append(err)
        return errors

    refused, cancelled = asyncio.run(scenario())
    assert isinstance(refused, RuntimeError)
    assert isinstance(cancelled, CancelledError) and cancelled.message == NOT_RUN_MESSAGE
    assert released == ["a", "b"]
    assert plain.cancellations == []


def test_a_run_waiting_for_a_worker_is_not_started_once_its_caller_has_gone(
    pool: ThreadPoolExecutor,
) -> None:
    gate = threading.Event()
    pool.submit(gate.wait, 60)  # the one worker is busy until the callers are gone
    plain = _Plain()
    released: list[str] = []
    timed: list[float] = []

    async def scenario() -> list[BaseException | dict[str, Any]]:
        def start(name: str, call: CallContext) -> asyncio.Future[Any]:
            handle = _handle(plain, lambda: released.append(name))
            return start_run(handle, "k", {"x": np.array([1])}, None, pool, call, timed.append)

        stopped = CallContext()
        expired = CallContext(time.monotonic() - 1)  # passed while the run waited
        wanted = CallContext()
        futures = [start("stopped", stopped), start("expired", expired), start("wanted", wanted)]
        stopped.stop(CancelledError("gone"))
        gate.set()
        return list(await asyncio.gather(*futures, return_exceptions=True))

    gone, late, answer = asyncio.run(scenario())
    assert isinstance(gone, CancelledError) and gone.message == NOT_RUN_MESSAGE
    assert isinstance(late, DeadlineExceededError)
    assert late.message == "Deadline exceeded before the model could be run"
    assert isinstance(answer, dict) and answer["y"].tolist() == [2]
    assert len(plain.cancellations) == 1  # only the wanted run ran
    assert sorted(released) == ["expired", "stopped", "wanted"]
    assert len(timed) == 1 and timed[0] >= 0  # its CPU time, for where its next runs go


def test_a_run_on_the_pool_stops_when_its_caller_is_stopped(pool: ThreadPoolExecutor) -> None:
    started = threading.Event()

    def until_cancelled(cancellation: Cancellation) -> None:
        started.set()
        for _ in range(6000):  # a run checking between kernels, at most a minute
            cancellation.check()
            time.sleep(0.01)

    plain = _Plain(until_cancelled)
    call = CallContext()

    async def scenario() -> BaseException | None:
        handle = _handle(plain)
        future = start_run(handle, "k", {"x": np.array([1])}, None, pool, call)
        await asyncio.to_thread(started.wait, 60)
        call.stop(DeadlineExceededError("Timed out waiting for notification"))
        try:
            await asyncio.wait_for(future, 60)
        except OpError as err:
            return err
        return None

    error = asyncio.run(scenario())
    assert plain.cancellations == [call.cancellation]
    assert isinstance(error, DeadlineExceededError)
    assert error.message == "Timed out waiting for notification"
