"""start_run: answers reach the event loop in bulk, and the handle is released once."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from runtime.errors import CancelledError, OpError
from serving.requests.model_runner import NOT_RUN_MESSAGE, start_run
from serving.servable import ServableHandle, ServableId


class _Batching:
    """A batching version whose "batch thread" answers every queued task at once."""

    def __init__(self) -> None:
        self.pending: list[Any] = []
        self.calls: list[Any] = []

    def submit(self, key: str, inputs: Any, aliases: Any, on_done: Any, call: Any = None) -> None:
        self.pending.append((inputs, on_done))
        self.calls.append(call)

    def answer_all(self) -> None:
        for inputs, on_done in self.pending:
            on_done({"y": inputs["x"] * 2}, None)


def test_a_batch_of_answers_wakes_the_loop_once() -> None:
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
            futures.append(start_run(handle, "k", {"x": np.array([index])}, None))
        batch_thread = threading.Thread(target=model.answer_all)
        batch_thread.start()
        batch_thread.join()
        results = await asyncio.gather(*futures)
        assert wakeups == 1
        return [r["y"].tolist() for r in results]

    assert asyncio.run(scenario()) == [[0], [2], [4], [6], [8]]
    assert sorted(released) == [0, 1, 2, 3, 4]


def test_a_caller_that_stopped_waiting_shows_as_cancelled_and_the_late_answer_is_dropped() -> None:
    model = _Batching()
    released: list[int] = []

    async def scenario() -> None:
        handle = ServableHandle(
            ServableId("m", 1), model, lambda: released.append(1)  # type: ignore[arg-type]
        )
        future = start_run(handle, "k", {"x": np.array([1])}, None)
        (call,) = model.calls
        assert not call.cancelled()
        future.cancel()
        assert call.cancelled()
        thread = threading.Thread(target=model.answer_all)
        thread.start()
        thread.join()
        await asyncio.sleep(0.01)  # let the loop take the (ignored) answer

    asyncio.run(scenario())
    assert released == [1]  # released when the run ended, not when the caller left


class _Plain:
    def run(self, key: str, inputs: Any, aliases: Any) -> Any:
        return {"y": inputs["x"] + 1}


def test_an_executor_that_never_runs_the_work_still_answers_and_releases() -> None:
    refusing = ThreadPoolExecutor(1)
    refusing.shutdown()
    cancelling = ThreadPoolExecutor(1)
    gate = threading.Event()
    cancelling.submit(gate.wait)  # the pool's one worker is busy: the next submit waits
    released: list[str] = []

    async def scenario() -> list[BaseException]:
        errors = []
        plain: Any = _Plain()
        handle = ServableHandle(ServableId("m", 1), plain, lambda: released.append("a"))
        try:
            start_run(handle, "k", {"x": np.array([1])}, None, refusing)
        except RuntimeError as err:  # refused at once: the caller hears it, the handle is back
            errors.append(err)
        handle = ServableHandle(ServableId("m", 1), plain, lambda: released.append("b"))
        future = start_run(handle, "k", {"x": np.array([1])}, None, cancelling)
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
