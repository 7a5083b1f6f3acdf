"""Batches run by the caller's own thread: ``schedule``'s ready hook and ``run_ready`` (stepped
by hand), and ``LoopBatches`` / ``BatchingServable.submit`` on a real event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from runtime.errors import ResourceExhaustedError
from runtime.saved_model import LoadedModel, load_saved_model
from serving.batching import session
from serving.batching.loop_runner import LoopBatches, loop_batches
from serving.batching.params import BatchingParams
from serving.batching.scheduler import BatchQueue, QueueOptions, SharedBatchScheduler, Task
from serving.batching.session import BatchingServable
from tests.serving.batching.test_scheduler import MS, Answers, FakeClock, Model
from tests.serving.support import FIXTURE_MODELS

KEY = "serving_default"


class Hook:
    def __init__(self) -> None:
        self.told: list[tuple[BatchQueue, float]] = []

    def __call__(self, queue: BatchQueue, ready: float) -> None:
        self.told.append((queue, ready))


def _queue(timeout_us: int = 1000, **options: Any) -> tuple[BatchQueue, FakeClock, Model]:
    clock = FakeClock()
    scheduler = SharedBatchScheduler(0, clock=clock)
    model = Model()
    queue = scheduler.add_queue(
        QueueOptions(max_batch_size=4, batch_timeout_micros=timeout_us, **options), model
    )
    return queue, clock, model


def test_the_hook_hears_when_the_batch_is_ready_and_run_ready_runs_it() -> None:
    queue, clock, model = _queue()
    hook, answers = Hook(), Answers()
    start = clock.now
    queue.schedule(Task(1, "a", answers.callback("a")), hook)
    queue.schedule(Task(1, "b", answers.callback("b")), hook)
    assert hook.told == [(queue, start + 1 * MS)]  # told once: the second task changes nothing
    assert queue.run_ready() == start + 1 * MS  # not ready yet: nothing runs
    assert model.batches == []
    clock.advance(1 * MS)
    assert queue.run_ready() is None
    assert model.batches == [["a", "b"]]
    assert answers.result("a") == "aa" and answers.result("b") == "bb"


def test_a_full_batch_is_ready_at_once_and_the_next_is_told_again() -> None:
    queue, clock, model = _queue()
    hook, answers = Hook(), Answers()
    for name in "abcd":
        queue.schedule(Task(1, name, answers.callback(name)), hook)
    assert hook.told == [(queue, clock.now + 1 * MS), (queue, clock.now)]  # full: ready now
    queue.schedule(Task(1, "e", answers.callback("e")), hook)
    assert queue.run_ready() == clock.now + 1 * MS  # ran the full one; "e" waits its window
    assert model.batches == [list("abcd")]
    queue.schedule(Task(1, "f", answers.callback("f")), hook)
    assert len(hook.told) == 2  # "e"'s batch is already due to be looked at
    clock.advance(1 * MS)
    assert queue.run_ready() is None
    assert model.batches == [list("abcd"), ["e", "f"]]


def test_run_ready_drops_expired_tasks_as_the_threads_do() -> None:
    queue, clock, model = _queue()
    answers = Answers()
    queue.schedule(Task(1, "late", answers.callback("late"), deadline=clock.now + 0.5 * MS), Hook())
    queue.schedule(Task(1, "ok", answers.callback("ok")), Hook())
    clock.advance(1 * MS)
    queue.run_ready()
    assert model.batches == [["ok"]]
    assert isinstance(answers.error("late"), ResourceExhaustedError)


def test_a_failing_hook_leaves_the_task_to_the_batch_threads() -> None:
    queue, _, _ = _queue(timeout_us=0)
    answers = Answers()

    def broken(queue: BatchQueue, ready: float) -> None:
        raise RuntimeError("no loop")

    queue.schedule(Task(1, "a", answers.callback("a")), broken)
    assert queue._scheduler.run_one()
    assert answers.result("a") == "aa"


def test_loop_batches_run_on_the_loop_at_the_batch_timeout() -> None:
    scheduler = SharedBatchScheduler(1)
    threads: list[str] = []

    def process(tasks: list[Task]) -> list[Any]:
        threads.append(threading.current_thread().name)
        return [task.payload * 2 for task in tasks]

    queue = scheduler.add_queue(QueueOptions(max_batch_size=8, batch_timeout_micros=2000), process)

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        runner = loop_batches(loop)
        assert isinstance(runner, LoopBatches) and loop_batches(loop) is runner
        futures = [loop.create_future() for _ in range(3)]
        for index, future in enumerate(futures):

            def on_done(result: Any, error: BaseException | None, future: Any = future) -> None:
                future.set_result(result)  # on the loop's thread: no call_soon_threadsafe

            queue.schedule(Task(1, index, on_done), runner)
        return await asyncio.wait_for(asyncio.gather(*futures), 10)

    try:
        assert asyncio.run(scenario()) == [0, 2, 4]
    finally:
        scheduler.close()
    assert threads == [threading.main_thread().name]  # one batch, on the loop's thread


@pytest.fixture(scope="module")
def mlp() -> Iterator[LoadedModel]:
    model = load_saved_model(FIXTURE_MODELS / "mlp" / "1")
    yield model
    model.close()


def _submit_all(batching: BatchingServable, inputs: list[np.ndarray]) -> list[Any]:
    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in inputs]
        for rows, future in zip(inputs, futures, strict=True):

            def on_done(result: Any, error: BaseException | None, future: Any = future) -> None:
                loop.call_soon_threadsafe(future.set_result, (result, error))

            batching.submit(KEY, {"features": rows}, None, on_done, None)
        return await asyncio.wait_for(asyncio.gather(*futures), 30)

    return asyncio.run(scenario())


def test_a_cheap_queue_batches_on_the_loop_once_its_cost_is_known(
    mlp: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "LOOP_BATCH_S", 10.0)  # any measured batch counts as cheap
    scheduler = SharedBatchScheduler(1)
    params = BatchingParams(max_batch_size=16, batch_timeout_micros=5000, num_batch_threads=1)
    batching = BatchingServable(mlp, scheduler, params, "mlp/1")
    batcher = batching._batchers[KEY]
    ran_on: list[str] = []
    process = batcher.process

    def watched(tasks: list[Task]) -> list[Any]:
        ran_on.append(threading.current_thread().name)
        return process(tasks)

    batcher.queue._process = watched
    rng = np.random.default_rng(3)
    try:
        for _ in range(2):  # the first batch (cost unknown) on a thread, the next on the loop
            inputs = [rng.standard_normal((n, 8)).astype(np.float32) for n in (1, 2, 1)]
            for rows, (result, error) in zip(inputs, _submit_all(batching, inputs), strict=True):
                assert error is None
                expected = mlp.run(KEY, {"features": rows})["output_0"]
                np.testing.assert_allclose(result["output_0"], expected, rtol=1e-6, atol=1e-7)
    finally:
        batching.close()
        scheduler.close()
    assert len(ran_on) == 2 and ran_on[0] != threading.main_thread().name
    assert ran_on[1] == threading.main_thread().name


def test_the_blocking_run_on_a_loop_thread_still_uses_the_batch_threads(
    mlp: LoadedModel,
) -> None:
    scheduler = SharedBatchScheduler(1)
    params = BatchingParams(max_batch_size=16, batch_timeout_micros=1000, num_batch_threads=1)
    batching = BatchingServable(mlp, scheduler, params, "mlp/1")
    batching._batchers[KEY].cost_s = 0.0  # known cheap: a submit from the loop would run there
    rows = np.ones((2, 8), np.float32)

    async def scenario() -> Any:
        return batching.run(KEY, {"features": rows})  # blocks the loop: must not wait on it

    answer: list[Any] = []
    runner = threading.Thread(target=lambda: answer.append(asyncio.run(scenario())), daemon=True)
    try:
        runner.start()
        runner.join(60)  # a guard against hanging the suite, not a timing
        assert not runner.is_alive(), "the blocking run waited on its own event loop"
    finally:
        batching.close()
        scheduler.close()
    np.testing.assert_allclose(
        answer[0]["output_0"], mlp.run(KEY, {"features": rows})["output_0"], rtol=1e-6
    )
