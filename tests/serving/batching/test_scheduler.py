"""SharedBatchScheduler, stepped by hand with a fake clock (plus one test with real threads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from runtime.errors import (
    CancelledError,
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnavailableError,
)
from serving.batching.scheduler import (
    QUEUE_FULL_MESSAGE,
    TIMEOUT_IN_QUEUE_MESSAGE,
    BatchQueue,
    QueueOptions,
    SharedBatchScheduler,
    Task,
    split_sizes,
)

MS = 1e-3


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Answers:
    """on_done callbacks that record each task's answer and insist on exactly one."""

    def __init__(self, scheduler: SharedBatchScheduler | None = None) -> None:
        self.scheduler = scheduler
        self.got: dict[Any, tuple[Any, BaseException | None]] = {}

    def callback(self, key: Any) -> Callable[[Any, BaseException | None], None]:
        def on_done(result: Any, error: BaseException | None) -> None:
            assert key not in self.got, f"on_done called twice for {key!r}"
            if self.scheduler is not None:
                # Never called with the scheduler's lock held.
                lock = self.scheduler._lock
                assert lock.acquire(blocking=False)
                lock.release()
            self.got[key] = (result, error)

        return on_done

    def result(self, key: Any) -> Any:
        result, error = self.got[key]
        assert error is None, error
        return result

    def error(self, key: Any) -> BaseException:
        result, error = self.got[key]
        assert result is None and error is not None
        return error


class Model:
    """A batch function that records the batches it saw and doubles each payload."""

    def __init__(self, clock: FakeClock | None = None, cost: Callable[[int], float] | None = None):
        self.batches: list[list[Any]] = []
        self.fail_with: BaseException | None = None
        self.clock = clock
        self.cost = cost

    def __call__(self, tasks: list[Task]) -> list[Any]:
        self.batches.append([task.payload for task in tasks])
        if self.clock is not None and self.cost is not None:
            self.clock.advance(self.cost(sum(task.size for task in tasks)))
        if self.fail_with is not None:
            raise self.fail_with
        return [payload * 2 for payload in (task.payload for task in tasks)]


def make(
    clock: FakeClock | None = None, **options: Any
) -> tuple[SharedBatchScheduler, BatchQueue, Model, Answers, FakeClock]:
    clock = clock or FakeClock()
    scheduler = SharedBatchScheduler(0, clock=clock)
    model = Model()
    queue = scheduler.add_queue(QueueOptions(**options), model)
    return scheduler, queue, model, Answers(scheduler), clock


def submit(
    queue: BatchQueue, answers: Answers, key: Any, size: int = 1, payload: Any = None, **kw: Any
) -> Task:
    task = Task(
        size=size, payload=key if payload is None else payload, on_done=answers.callback(key)
    )
    for name, value in kw.items():
        setattr(task, name, value)
    queue.schedule(task)
    return task


def test_batch_closes_when_full() -> None:
    scheduler, queue, model, answers, clock = make(max_batch_size=4, batch_timeout_micros=1_000_000)
    submit(queue, answers, 1, size=2)
    assert not scheduler.run_one()  # 2 of 4 rows, timeout far away
    submit(queue, answers, 2, size=2)
    assert scheduler.next_wakeup() == clock.now
    assert scheduler.run_one()
    assert model.batches == [[1, 2]]
    assert answers.result(1) == 2 and answers.result(2) == 4
    assert not scheduler.run_one()


def test_task_that_does_not_fit_closes_the_open_batch() -> None:
    scheduler, queue, model, answers, _ = make(max_batch_size=4, batch_timeout_micros=1_000_000)
    submit(queue, answers, 1, size=3)
    submit(queue, answers, 2, size=2)  # 3 + 2 > 4: the first batch closes, a new one opens
    assert scheduler.run_one()
    assert not scheduler.run_one()  # the new open batch waits for its timeout
    assert model.batches == [[1]]
    assert queue.num_enqueued_tasks() == 1


def test_batch_closes_on_timeout() -> None:
    scheduler, queue, model, answers, clock = make(max_batch_size=8, batch_timeout_micros=1000)
    start = clock.now
    submit(queue, answers, 1)
    clock.advance(0.4 * MS)
    submit(queue, answers, 2)
    assert scheduler.next_wakeup() == pytest.approx(start + 1 * MS)  # the oldest task's timeout
    clock.advance(0.5 * MS)
    assert not scheduler.run_one()
    clock.advance(0.1 * MS)
    assert scheduler.run_one()
    assert model.batches == [[1, 2]]


def test_timeout_zero_runs_at_once() -> None:
    scheduler, queue, model, answers, _ = make(max_batch_size=8, batch_timeout_micros=0)
    submit(queue, answers, 1)
    submit(queue, answers, 2)
    assert scheduler.run_one()
    assert model.batches == [[1, 2]]
    assert scheduler.next_wakeup() is None


def test_full_queue_refuses_at_once() -> None:
    scheduler, queue, model, answers, _ = make(
        max_batch_size=2, batch_timeout_micros=1_000_000, max_enqueued_batches=2
    )
    submit(queue, answers, 1, size=2)
    submit(queue, answers, 2, size=2)
    with pytest.raises(UnavailableError) as refused:
        submit(queue, answers, 3, size=1)
    assert str(refused.value).startswith(QUEUE_FULL_MESSAGE)
    assert 3 not in answers.got  # a refused task hears it from schedule, not from on_done
    assert scheduler.run_one()
    submit(queue, answers, 3, size=1)  # room again
    assert scheduler.run_one()
    assert model.batches == [[1], [2]]


def test_task_larger_than_max_batch_size_is_invalid() -> None:
    _, queue, _, answers, _ = make(max_batch_size=4)
    with pytest.raises(InvalidArgumentError, match="^Task size 5 is larger than maximum input "):
        submit(queue, answers, 1, size=5)


def test_expired_tasks_are_dropped_before_running() -> None:
    scheduler, queue, model, answers, clock = make(max_batch_size=8, batch_timeout_micros=2000)
    submit(queue, answers, 1, deadline=clock.now + 1 * MS)
    submit(queue, answers, 2, deadline=clock.now + 5 * MS)
    submit(queue, answers, 3)
    clock.advance(2 * MS)
    assert scheduler.run_one()
    assert model.batches == [[2, 3]]
    error = answers.error(1)
    assert isinstance(error, ResourceExhaustedError)
    assert str(error) == TIMEOUT_IN_QUEUE_MESSAGE
    assert answers.result(2) == 4 and answers.result(3) == 6


def test_batch_of_only_expired_tasks_is_not_run() -> None:
    scheduler, queue, model, answers, clock = make(batch_timeout_micros=2000)
    submit(queue, answers, 1, deadline=clock.now + 1 * MS)
    clock.advance(2 * MS)
    assert scheduler.run_one()
    assert model.batches == []
    assert isinstance(answers.error(1), ResourceExhaustedError)
    assert queue.stats.snapshot()["expired"] == 1


def test_cancelled_tasks_are_dropped() -> None:
    scheduler, queue, model, answers, _ = make()
    gone = threading.Event()
    submit(queue, answers, 1, cancelled=gone.is_set)
    submit(queue, answers, 2)
    gone.set()
    assert scheduler.run_one()
    assert model.batches == [[2]]
    assert isinstance(answers.error(1), CancelledError)
    assert answers.result(2) == 4


def test_error_reaches_every_task_and_the_queue_carries_on() -> None:
    scheduler, queue, model, answers, _ = make(max_batch_size=8)
    model.fail_with = InvalidArgumentError("bad input x")
    submit(queue, answers, 1)
    submit(queue, answers, 2)
    assert scheduler.run_one()
    for key in (1, 2):
        assert answers.error(key) is model.fail_with
    model.fail_with = ValueError("boom")
    submit(queue, answers, 3)
    assert scheduler.run_one()
    error = answers.error(3)
    assert isinstance(error, InternalError) and str(error) == "boom"
    model.fail_with = None
    submit(queue, answers, 4)
    assert scheduler.run_one()
    assert answers.result(4) == 8
    assert queue.stats.snapshot()["failed_batches"] == 2


def test_wrong_number_of_results_fails_the_batch() -> None:
    scheduler = SharedBatchScheduler(0, clock=FakeClock())
    answers = Answers(scheduler)
    queue = scheduler.add_queue(QueueOptions(), lambda tasks: [])
    submit(queue, answers, 1)
    assert scheduler.run_one()
    assert isinstance(answers.error(1), InternalError)


def test_a_failing_callback_does_not_stop_the_batch() -> None:
    scheduler, queue, _, answers, _ = make(max_batch_size=8)

    def explode(result: Any, error: BaseException | None) -> None:
        raise RuntimeError("callback bug")

    queue.schedule(Task(size=1, payload=1, on_done=explode))
    submit(queue, answers, 2)
    assert scheduler.run_one()
    assert answers.result(2) == 4


def test_queues_are_served_round_robin() -> None:
    clock = FakeClock()
    scheduler = SharedBatchScheduler(0, clock=clock)
    order: list[str] = []

    def process_as(name: str) -> Callable[[list[Task]], list[Any]]:
        def process(tasks: list[Task]) -> list[Any]:
            order.append(name)
            return [None] * len(tasks)

        return process

    options = QueueOptions(max_batch_size=1, max_enqueued_batches=10)
    queue_a = scheduler.add_queue(options, process_as("a"))
    queue_b = scheduler.add_queue(options, process_as("b"))
    queue_c = scheduler.add_queue(options, process_as("c"))
    answers = Answers(scheduler)
    for index in range(4):
        submit(queue_a, answers, ("a", index))
    for index in range(2):
        submit(queue_b, answers, ("b", index))
    submit(queue_c, answers, ("c", 0))
    while scheduler.run_one():
        pass
    assert order == ["a", "b", "c", "a", "b", "a", "a"]
    assert len(answers.got) == 7


def test_split_sizes_follow_upstream() -> None:
    # Upstream's InputSplitUtilTest cases: (input, open room, limit) -> pieces.
    assert split_sizes(5, 1, 1) == [1, 1, 1, 1, 1]
    assert split_sizes(10, 3, 4) == [3, 4, 3]
    assert split_sizes(20, 5, 6) == [5, 6, 6, 3]
    assert split_sizes(30, 0, 11) == [11, 11, 8]
    assert split_sizes(5, 6, 8) == [5]


def split_list(payload: list[int], sizes: list[int]) -> list[list[int]]:
    pieces, at = [], 0
    for size in sizes:
        pieces.append(payload[at : at + size])
        at += size
    return pieces


def join_lists(pieces: Sequence[list[int]]) -> list[int]:
    return [row for piece in pieces for row in piece]


def make_splitting(**options: Any) -> tuple[SharedBatchScheduler, BatchQueue, list, Answers]:
    scheduler = SharedBatchScheduler(0, clock=FakeClock())
    batches: list[list[list[int]]] = []
    fail = {"when": None}

    def process(tasks: list[Task]) -> list[Any]:
        payloads = [task.payload for task in tasks]
        batches.append(payloads)
        if fail["when"] is not None and fail["when"] in join_lists(payloads):
            raise InvalidArgumentError("row rejected")
        return [[row * 10 for row in payload] for payload in payloads]

    queue = scheduler.add_queue(
        QueueOptions(
            enable_large_batch_splitting=True,
            split_payload=split_list,
            join_results=join_lists,
            **options,
        ),
        process,
    )
    return scheduler, queue, [batches, fail], Answers(scheduler)


def test_large_task_is_split_and_joined() -> None:
    scheduler, queue, (batches, _), answers = make_splitting(
        max_batch_size=10, max_execution_batch_size=4, batch_timeout_micros=1_000_000
    )
    submit(queue, answers, "small", size=3, payload=[0, 1, 2])
    submit(queue, answers, "large", size=7, payload=list(range(100, 107)))
    while scheduler.run_one():
        pass
    # Pieces 1, 4, 2: the first fills the open batch, then whole batches; the rest stays open.
    assert batches == [[[0, 1, 2], [100]], [[101, 102, 103, 104]]]
    assert "large" not in answers.got  # its last piece is still waiting in the open batch
    queue.close()
    assert batches[-1] == [[105, 106]]
    assert answers.result("small") == [0, 10, 20]
    assert answers.result("large") == [row * 10 for row in range(100, 107)]


def test_split_task_gets_the_first_error_once_and_stops() -> None:
    scheduler, queue, (batches, fail), answers = make_splitting(
        max_batch_size=12, max_execution_batch_size=4
    )
    fail["when"] = 4
    submit(queue, answers, "large", size=12, payload=list(range(12)))
    while scheduler.run_one():
        pass
    error = answers.error("large")
    assert isinstance(error, InvalidArgumentError) and str(error) == "row rejected"
    assert batches == [[[0, 1, 2, 3]], [[4, 5, 6, 7]]]  # the third piece was not computed


def test_split_needs_room_for_every_piece() -> None:
    _, queue, _, answers = make_splitting(
        max_batch_size=10,
        max_execution_batch_size=4,
        max_enqueued_batches=2,
        batch_timeout_micros=1_000_000,
    )
    submit(queue, answers, 1, size=3, payload=[0, 1, 2])
    with pytest.raises(UnavailableError) as refused:  # room: 1 + 4 = 5 rows
        submit(queue, answers, 2, size=6, payload=list(range(6)))
    assert str(refused.value).startswith(QUEUE_FULL_MESSAGE)
    with pytest.raises(InvalidArgumentError, match="larger than maximum input batch size 10"):
        submit(queue, answers, 3, size=11, payload=list(range(11)))
    submit(queue, answers, 4, size=5, payload=list(range(5)))


def test_invalid_options() -> None:
    scheduler = SharedBatchScheduler(0)
    with pytest.raises(InvalidArgumentError, match="input_batch_size_limit must be positive"):
        scheduler.add_queue(QueueOptions(max_batch_size=0), list)
    with pytest.raises(InvalidArgumentError, match="split_payload"):
        scheduler.add_queue(QueueOptions(enable_large_batch_splitting=True), list)
    with pytest.raises(InvalidArgumentError, match="greater than or equal to max_execution"):
        scheduler.add_queue(
            QueueOptions(
                max_batch_size=4,
                max_execution_batch_size=8,
                enable_large_batch_splitting=True,
                split_payload=split_list,
                join_results=join_lists,
            ),
            list,
        )
    with pytest.raises(InvalidArgumentError, match="num_batch_threads"):
        SharedBatchScheduler(-1)


def test_closed_queue_runs_what_it_holds_and_refuses_more() -> None:
    scheduler, queue, model, answers, _ = make(max_batch_size=2, batch_timeout_micros=1_000_000)
    for key in range(3):
        submit(queue, answers, key)
    queue.close(wait=True)  # no threads: the remaining batches run on this thread
    assert model.batches == [[0, 1], [2]]
    assert len(answers.got) == 3
    with pytest.raises(UnavailableError, match="closed"):
        submit(queue, answers, 9)
    assert scheduler.next_wakeup() is None


def test_close_without_wait_makes_the_open_batch_ready() -> None:
    scheduler, queue, model, answers, _ = make(batch_timeout_micros=1_000_000)
    submit(queue, answers, 1)
    queue.close(wait=False)
    assert scheduler.run_one()
    assert model.batches == [[1]]


def test_scheduler_close_drains_every_queue() -> None:
    clock = FakeClock()
    scheduler = SharedBatchScheduler(0, clock=clock)
    answers = Answers(scheduler)
    models = [Model(), Model()]
    queues = [
        scheduler.add_queue(QueueOptions(batch_timeout_micros=1_000_000), model) for model in models
    ]
    submit(queues[0], answers, 1)
    submit(queues[1], answers, 2)
    scheduler.close()
    assert models[0].batches == [[1]] and models[1].batches == [[2]]
    assert answers.result(1) == 2 and answers.result(2) == 4
    with pytest.raises(UnavailableError):
        scheduler.add_queue(QueueOptions(), list)


def test_stats() -> None:
    scheduler, queue, _, answers, clock = make(max_batch_size=8, batch_timeout_micros=1000)
    submit(queue, answers, 1, size=3)
    clock.advance(0.5 * MS)
    submit(queue, answers, 2, size=2)
    clock.advance(0.5 * MS)
    assert scheduler.run_one()
    queue.stats.record_padding(5, 3)
    snap = queue.stats.snapshot()
    assert (snap["batches"], snap["tasks"], snap["rows"]) == (1, 2, 5)
    sizes = snap["batch_size"]
    assert sizes["counts"][sizes["bounds"].index(8)] == 1  # 5 rows: the (4, 8] bucket
    latency = snap["queueing_latency_us"]
    assert latency["count"] == 2 and latency["sum"] == pytest.approx(1500.0)
    assert snap["padding"]["rows"] == 3
    assert snap["padding"]["by_execution_batch_size"] == {8: {"batches": 1, "padding_rows": 3}}


def test_threads_run_batches_and_survive_errors() -> None:
    scheduler = SharedBatchScheduler(2, thread_name_prefix="test_batch")
    seen_threads: set[str] = set()

    def process(tasks: list[Task]) -> list[Any]:
        seen_threads.add(threading.current_thread().name)
        if any(task.payload == "bad" for task in tasks):
            raise InvalidArgumentError("bad payload")
        return [task.payload.upper() for task in tasks]

    queue = scheduler.add_queue(QueueOptions(max_batch_size=4, batch_timeout_micros=2000), process)
    done: dict[str, threading.Event] = {}
    got: dict[str, tuple[Any, BaseException | None]] = {}

    def send(payload: str) -> None:
        done[payload] = threading.Event()

        def on_done(result: Any, error: BaseException | None) -> None:
            got[payload] = (result, error)
            done[payload].set()

        queue.schedule(Task(size=1, payload=payload, on_done=on_done))

    send("bad")
    assert done["bad"].wait(10)
    assert isinstance(got["bad"][1], OpError)
    for payload in ("a", "b", "c", "d", "e"):
        send(payload)
    for payload in ("a", "b", "c", "d", "e"):
        assert done[payload].wait(10)
        assert got[payload] == (payload.upper(), None)
    assert seen_threads <= {"test_batch_0", "test_batch_1"}
    send("late")  # waits for its 2 ms timeout; close still lets it run
    scheduler.close()
    assert got["late"] == ("LATE", None)
    assert all(not thread.is_alive() for thread in scheduler._worker_threads)


def test_idle_thread_is_woken_for_a_timed_batch() -> None:
    # The thread sleeps with no timeout while nothing is queued; schedule() must wake it to
    # sleep until this batch's timeout instead.
    scheduler = SharedBatchScheduler(1)
    runs: list[float] = []
    queue = scheduler.add_queue(
        QueueOptions(batch_timeout_micros=20_000),
        lambda tasks: runs.append(time.monotonic()) or [None] * len(tasks),
    )
    done = threading.Event()
    queue.schedule(Task(size=1, payload=0, on_done=lambda result, error: done.set()))
    assert done.wait(10)
    assert len(runs) == 1
    queue.close(wait=True)
    scheduler.close()


def test_zero_enqueued_batches_means_one_without_splitting() -> None:
    scheduler, queue, _, answers, _ = make(
        max_batch_size=1, max_enqueued_batches=0, batch_timeout_micros=1_000_000
    )
    submit(queue, answers, 1)
    with pytest.raises(UnavailableError, match="max_enqueued_batches is 1"):
        submit(queue, answers, 2)
    assert scheduler.run_one()
