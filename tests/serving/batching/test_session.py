"""BatchingServable over a real SavedModel, with the scheduler stepped by hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from runtime.errors import (
    CancelledError,
    FailedPreconditionError,
    InvalidArgumentError,
    ResourceExhaustedError,
    UnavailableError,
)
from runtime.saved_model import LoadedModel, load_saved_model
from serving.batching.params import BatchingParams
from serving.batching.scheduler import SharedBatchScheduler
from serving.batching.session import BatchingServable
from serving.requests.call_context import CallContext
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO

KEY = "serving_default"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Answers:
    """Collects on_done calls in submission order."""

    def __init__(self) -> None:
        self.got: list[tuple[Any, BaseException | None]] = []

    def callback(self) -> Any:
        slot = len(self.got)
        self.got.append((None, None))

        def on_done(result: Any, error: BaseException | None) -> None:
            self.got[slot] = (result, error)

        return on_done


@pytest.fixture(scope="module")
def mlp() -> Iterator[LoadedModel]:
    model = load_saved_model(FIXTURE_MODELS / "mlp" / "1")
    yield model
    model.close()


def _batching(
    model: LoadedModel, **params: Any
) -> tuple[BatchingServable, SharedBatchScheduler, Clock]:
    clock = Clock()
    scheduler = SharedBatchScheduler(0, clock=clock)
    settings = BatchingParams(**{"batch_timeout_micros": 1000, **params})
    return BatchingServable(model, scheduler, settings, "mlp/1"), scheduler, clock


def _rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)


def test_queued_tasks_run_as_one_batch_and_get_their_own_rows(mlp: LoadedModel) -> None:
    batching, scheduler, clock = _batching(mlp)
    answers = Answers()
    inputs = [_rows(n, seed) for seed, n in enumerate([1, 3, 2])]
    for rows in inputs:
        batching.submit(KEY, {"features": rows}, None, answers.callback(), None)
    assert not scheduler.run_one()  # the window is still open
    clock.now += 0.002
    assert scheduler.run_one()
    for rows, (result, error) in zip(inputs, answers.got, strict=True):
        assert error is None
        expected = mlp.run(KEY, {"features": rows})["output_0"]
        np.testing.assert_allclose(result["output_0"], expected, rtol=1e-6, atol=1e-7)
    stats = batching.batch_stats()[KEY]
    assert (stats["batches"], stats["tasks"]) == (1, 3)


def test_allowed_batch_sizes_pad_and_the_padding_is_dropped(mlp: LoadedModel) -> None:
    batching, scheduler, clock = _batching(mlp, max_batch_size=8, allowed_batch_sizes=(4, 8))
    answers = Answers()
    rows = _rows(3, 7)
    batching.submit(KEY, {"features": rows}, None, answers.callback(), None)
    clock.now += 0.002
    assert scheduler.run_one()
    result, error = answers.got[0]
    assert error is None and result["output_0"].shape == (3, 4)
    assert batching.batch_stats()[KEY]["padding"]["rows"] == 1


def test_an_output_subset_runs_unbatched_at_once() -> None:
    model = load_saved_model(FIXTURE_MODELS / "functional_multi_io" / "1")
    try:
        batching, scheduler, _ = _batching(model)
        answers = Answers()
        inputs = {
            "category": np.array([[1], [2]], np.int64),
            "numeric": np.ones((2, 6), np.float32),
        }
        batching.submit(KEY, inputs, ["probability"], answers.callback(), None)
        result, error = answers.got[0]  # answered before any batch ran
        assert error is None and list(result) == ["probability"]
        # Every output, in any order, is the signature's own set: that one is queued.
        batching.submit(
            KEY, inputs, ["probability", "class_scores"], answers.callback(), None
        )
        assert answers.got[1] == (None, None)
        assert scheduler.run_one() is False  # still inside its window
    finally:
        model.close()


def test_scalar_inputs_are_refused_with_upstreams_message() -> None:
    model = load_saved_model(HALF_PLUS_TWO / "00000123")
    try:
        batching, _, _ = _batching(model)
        answers = Answers()
        batching.submit(KEY, {"x": np.float32(1.0)}, None, answers.callback(), None)
        error = answers.got[0][1]
        assert isinstance(error, InvalidArgumentError)
        assert "must have at least one dimension" in error.message
    finally:
        model.close()


def test_a_task_past_its_deadline_is_dropped_not_computed(mlp: LoadedModel) -> None:
    batching, scheduler, clock = _batching(mlp)
    answers = Answers()
    batching.submit(KEY, {"features": _rows(1, 2)}, None, answers.callback(),
                    CallContext(deadline=clock.now + 0.0005))
    batching.submit(KEY, {"features": _rows(1, 3)}, None, answers.callback(), None)
    clock.now += 0.002
    assert scheduler.run_one()
    assert isinstance(answers.got[0][1], ResourceExhaustedError)
    assert answers.got[1][1] is None
    assert batching.batch_stats()[KEY]["tasks"] == 1


def test_a_task_whose_caller_left_is_dropped_not_computed(mlp: LoadedModel) -> None:
    batching, scheduler, clock = _batching(mlp)
    answers = Answers()
    left, stopped, waiting = CallContext(), CallContext(), CallContext()
    for seed, caller in enumerate((left, stopped, waiting)):
        batching.submit(KEY, {"features": _rows(1, seed)}, None, answers.callback(), caller)
    left.leave()  # answered elsewhere (its transport timed it out)
    stopped.stop(CancelledError("The client went away"))
    clock.now += 0.002
    assert scheduler.run_one()
    for _, error in answers.got[:2]:
        assert isinstance(error, CancelledError)
        assert error.message == "The request was cancelled while waiting in the batching queue"
    assert answers.got[2][1] is None
    stats = batching.batch_stats()[KEY]
    assert (stats["tasks"], stats["cancelled"]) == (1, 2)


def test_a_failing_batch_fails_each_of_its_tasks_with_the_real_message(mlp: LoadedModel) -> None:
    batching, scheduler, clock = _batching(mlp)
    answers = Answers()
    batching.submit(KEY, {"features": _rows(1, 4)}, None, answers.callback(), None)
    batching.submit(KEY, {"features": _rows(1, 5)[:, :6]}, None, answers.callback(), None)
    clock.now += 0.002
    assert scheduler.run_one()
    for _, error in answers.got:
        assert isinstance(error, FailedPreconditionError)
        assert "different shapes and padding is turned off" in error.message
    # The queue still works afterwards.
    batching.submit(KEY, {"features": _rows(1, 6)}, None, answers.callback(), None)
    clock.now += 0.002
    assert scheduler.run_one()
    assert answers.got[2][1] is None


def test_a_full_queue_is_refused_before_the_run_is_submitted(mlp: LoadedModel) -> None:
    batching, scheduler, clock = _batching(mlp, max_batch_size=2, max_enqueued_batches=1)
    answers = Answers()
    assert batching.admits(KEY)
    batching.submit(KEY, {"features": _rows(1, 10)}, None, answers.callback(), None)
    assert batching.admits(KEY)  # the only batch still has room for a row
    batching.submit(KEY, {"features": _rows(1, 11)}, None, answers.callback(), None)
    assert not batching.admits(KEY)
    # What admits foresaw: the queue refuses the task, as upstream words it.
    batching.submit(KEY, {"features": _rows(1, 12)}, None, answers.callback(), None)
    error = answers.got[2][1]
    assert isinstance(error, UnavailableError)
    assert error.message.startswith(
        "The batch scheduling queue to which this task was submitted is full"
    )
    clock.now += 0.002
    assert scheduler.run_one()
    assert [error for _, error in answers.got[:2]] == [None, None]
    assert batching.admits(KEY)  # room again once the batch has run
    assert batching.admits("no such signature")  # nothing to queue for: never refused here


def test_run_blocks_until_a_batch_thread_answers(mlp: LoadedModel) -> None:
    scheduler = SharedBatchScheduler(1)
    try:
        batching = BatchingServable(mlp, scheduler, BatchingParams(), "mlp/1")
        rows = _rows(2, 9)
        got = batching.run(KEY, {"features": rows})["output_0"]
        np.testing.assert_allclose(got, mlp.run(KEY, {"features": rows})["output_0"], rtol=1e-6)
    finally:
        scheduler.close()
