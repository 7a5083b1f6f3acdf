"""The shared batch scheduler: queues of tasks, grouped into batches, run by one thread pool.

TensorFlow's SharedBatchScheduler, with its semantics. One scheduler owns one pool of batch
threads; each queue (one per model version x signature) has its own options and batch function.
A queue is a deque of batches whose last batch is open. A task joins the open batch; when it
does not fit, the open batch is closed and a new one started, unless the queue already holds
``max_enqueued_batches`` batches, in which case ``schedule`` raises UnavailableError at once. A
batch is ready when it is closed or full, when its oldest task has waited
``batch_timeout_micros`` (0: at once), or, with a negative ``batch_timeout_micros``, when the
adaptive window says so (``adaptive.py``). Batch threads take ready batches round-robin over the
queues, one batch per queue in turn, so a busy queue cannot starve a quiet one.

Contract:

* ``on_done(result, None)`` or ``on_done(None, error)`` is called exactly once per accepted task,
  from the thread that runs its batch (a batch thread, or the caller of ``run_one``/``close``
  when the scheduler has no threads), never while the scheduler's lock is held. It must be
  cheap: it delays the rest of the batch.
* Before a batch runs, tasks whose deadline has passed get ResourceExhaustedError and tasks
  whose caller has gone (``cancelled()``) get CancelledError; neither reaches the batch
  function, which is not called at all when no task is left.
* An exception from the batch function reaches every task of the batch (an OpError as it is,
  anything else as InternalError with its message); the thread carries on.
* ``split_payload`` and ``join_results`` (large-batch splitting) run under the lock on the
  scheduling thread and on a batch thread respectively: they must be cheap and must not call
  back into the scheduler.
* With threads, ``clock`` must tick in real seconds (threads sleep on it); with
  ``num_batch_threads=0`` there are no threads and any clock will do: tests step the scheduler
  with ``run_one`` and a fake clock.

Idle threads sleep on their own condition until the earliest time a queued batch becomes ready;
``schedule`` wakes one only when it makes a batch ready sooner than any idle thread would look.
There is no polling.

A caller may run a queue's batches on its own thread instead (``schedule``'s ``on_ready``,
then ``run_ready``): an event loop does for models whose batches cost less than the thread
hand-offs (``loop_runner``). The batches are formed and checked exactly as above; only the
thread that runs them differs.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.errors import (
    CancelledError,
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnavailableError,
    from_memory_error,
)
from serving.batching.adaptive import AdaptiveWindow, thread_share
from serving.batching.params import task_too_large_message
from serving.batching.stats import BatchStats

log = logging.getLogger("graphserve")

# Upstream's words (shared_batch_scheduler.h, batching_session.cc), which clients match on.
QUEUE_FULL_MESSAGE = "The batch scheduling queue to which this task was submitted is full"
TIMEOUT_IN_QUEUE_MESSAGE = "Run() timeout exceeded while waiting in batching queue"
CANCELLED_IN_QUEUE_MESSAGE = "The request was cancelled while waiting in the batching queue"

_INF = math.inf

OnDone = Callable[[Any, BaseException | None], None]


@dataclass(slots=True)
class Task:
    """One caller's unit of work: ``size`` rows (dim 0) of an opaque ``payload``."""

    size: int
    payload: Any
    on_done: OnDone  # called exactly once: (result, None) or (None, error)
    deadline: float | None = None  # scheduler clock time; None = no deadline
    cancelled: Callable[[], bool] | None = None  # True once the caller has gone
    enqueued_at: float = 0.0  # set by the queue


@dataclass(frozen=True)
class QueueOptions:
    """One queue's settings; names and defaults are upstream's."""

    max_batch_size: int = 1000  # most rows per task (and per batch, without splitting)
    batch_timeout_micros: int = 0  # < 0: adaptive window, abs(value) = latency budget
    max_enqueued_batches: int = 10
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = 0  # 0: max_batch_size
    split_payload: Callable[[Any, list[int]], list[Any]] | None = None  # needed with splitting
    join_results: Callable[[list[Any]], Any] | None = None  # needed with splitting
    name: str = ""  # for stats and logs, e.g. "model/3/serving_default"


ProcessBatch = Callable[[list[Task]], Sequence[Any]]  # results in task order; raise to fail all
# Told (queue, clock time) when that queue's next batch becomes ready, instead of a batch thread.
ReadyHook = Callable[["BatchQueue", float], None]


def split_sizes(size: int, open_room: int, limit: int) -> list[int]:
    """Piece sizes for a task of ``size`` rows when the open batch has ``open_room`` rows left
    and a batch holds ``limit``: the first piece fills the open batch (a whole batch when it is
    full), the rest are whole batches and a remainder (upstream's input_split_metadata)."""
    head = min(size, limit) if open_room <= 0 else min(size, open_room)
    sizes = [head]
    left = size - head
    while left > 0:
        piece = min(left, limit)
        sizes.append(piece)
        left -= piece
    return sizes


def as_op_error(error: BaseException) -> OpError:
    """An OpError as it is, a MemoryError as RESOURCE_EXHAUSTED; anything else as
    InternalError carrying its message."""
    if isinstance(error, OpError):
        return error
    if isinstance(error, MemoryError):
        return from_memory_error(error, "a batch")
    wrapped = InternalError(str(error) or type(error).__name__)
    wrapped.__cause__ = error
    return wrapped


def _deliver(on_done: OnDone, result: Any, error: BaseException | None) -> None:
    try:
        on_done(result, error)
    except Exception:  # a caller's callback must not take the batch thread down
        log.exception("Batch task completion callback failed")


def _gone(cancelled: Callable[[], bool]) -> bool:
    try:
        return cancelled()
    except Exception:  # a broken check must not cost the rest of the batch its answers
        log.exception("Batch task cancellation check failed")
        return False


class _Batch:
    __slots__ = ("ready", "size", "start", "tasks")

    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self.size = 0  # rows
        self.start = 0.0  # when its first task arrived
        self.ready = _INF  # when it may run; closed and full batches: when that happened


class _SplitJoin:
    """Collects the pieces of a split task and answers its caller once."""

    __slots__ = ("_failed", "_join", "_left", "_lock", "_results", "_task")

    def __init__(self, task: Task, pieces: int, join: Callable[[list[Any]], Any]) -> None:
        self._lock = threading.Lock()  # pieces may finish on different batch threads
        self._task = task
        self._join = join
        self._results: list[Any] = [None] * pieces
        self._left = pieces
        self._failed = False

    def cancelled(self) -> bool:
        # Once one piece failed, the caller has its answer: the other pieces need not run.
        if self._failed:
            return True
        gone = self._task.cancelled
        return gone is not None and gone()

    def done(self, index: int, result: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._failed:
                return
            if error is not None:
                self._failed = True
            else:
                self._results[index] = result
                self._left -= 1
                if self._left:
                    return
        if error is not None:
            self._task.on_done(None, error)
            return
        try:
            joined = self._join(self._results)
        except Exception as err:  # noqa: BLE001 - the caller hears it, like a batch error
            self._task.on_done(None, as_op_error(err))
            return
        self._task.on_done(joined, None)


class BatchQueue:
    """One queue of a SharedBatchScheduler; made by ``SharedBatchScheduler.add_queue``."""

    def __init__(
        self, scheduler: SharedBatchScheduler, options: QueueOptions, process: ProcessBatch
    ) -> None:
        splitting = options.enable_large_batch_splitting
        if options.max_batch_size < 1:
            raise InvalidArgumentError(
                f"input_batch_size_limit must be positive; was {options.max_batch_size}"
            )
        execution = options.max_execution_batch_size if splitting else 0
        execution = execution or options.max_batch_size
        max_batches = options.max_enqueued_batches
        if max_batches == 0 and not splitting:
            max_batches = 1  # upstream reads 0 as 1 so old low-traffic configs keep working
        if max_batches < 1:
            raise InvalidArgumentError(
                f"max_enqueued_batches must be positive; was {options.max_enqueued_batches}"
            )
        if splitting:
            if options.split_payload is None or options.join_results is None:
                raise InvalidArgumentError(
                    "split_payload and join_results must be given when "
                    "enable_large_batch_splitting is true"
                )
            if execution < 1 or options.max_batch_size < execution:
                raise InvalidArgumentError(
                    "When enable_large_batch_splitting is true, input_batch_size_limit must be "
                    "greater than or equal to max_execution_batch_size. "
                    f"(input_batch_size_limit {options.max_batch_size}, "
                    f"max_execution_batch_size {execution})"
                )
        self.options = options
        self.name = options.name
        self.stats = BatchStats(options.name)
        self._scheduler = scheduler
        self._lock = scheduler._lock
        self._process = process
        self._max_input = options.max_batch_size
        self._execution = execution
        self._max_batches = max_batches
        self._splitting = splitting
        timeout = options.batch_timeout_micros
        self._timeout = timeout / 1e6 if timeout >= 0 else 0.0
        self._window = AdaptiveWindow(-timeout / 1e6, execution) if timeout < 0 else None
        self._demand = 0.0  # adaptive: batch threads this queue was last measured to use
        self._batches: deque[_Batch] = deque([_Batch()])
        self._closed = False
        self._in_flight = 0
        # The ready time for which an idle thread is already due to look (or none was idle);
        # saves waking a second thread for the same batch. Reset when a batch is taken.
        self._armed = _INF

    # -- the caller's side ---------------------------------------------------------------

    def schedule(self, task: Task, on_ready: ReadyHook | None = None) -> None:
        """Queue ``task``. Raises InvalidArgumentError for a task larger than
        ``max_batch_size`` and UnavailableError when the queue is full or closed; ``on_done``
        is not called then.

        ``on_ready``: the caller will run this queue's batches itself (``run_ready``) when
        told when the next one is ready, instead of waking a batch thread for it. For a caller
        whose own thread is better placed than a batch thread (an event loop serving a model
        whose batches take microseconds: a thread hand-off costs more than the batch). It is
        called on this thread, after the lock is released; the batch threads still take any
        batch that is ready when they look."""
        size = task.size
        if size > self._max_input:
            raise InvalidArgumentError(task_too_large_message(size, self._max_input))
        scheduler = self._scheduler
        tell = _INF
        with self._lock:
            if self._closed:
                raise UnavailableError(
                    f"The batch scheduling queue {self.name!r} is closed and accepts no new tasks"
                )
            now = scheduler._clock()
            batches = self._batches
            open_batch = batches[-1]
            if open_batch.size + size <= self._execution:
                self._add_locked(open_batch, task, now)
            elif self._splitting:
                self._add_split_locked(task, now)
            else:
                if len(batches) >= self._max_batches:
                    raise UnavailableError(
                        f"{QUEUE_FULL_MESSAGE}; currently {len(batches)} batches enqueued and "
                        f"max_enqueued_batches is {self._max_batches}"
                    )
                self._add_locked(self._start_batch_locked(now), task, now)
            window = self._window
            if window is not None:
                window.on_arrival(now, size)
                open_batch = batches[-1]
                if open_batch.size < self._execution:
                    open_batch.ready = window.ready_time(
                        now, open_batch.size, open_batch.start, scheduler._share_locked(self)
                    )
            ready = batches[0].ready
            if ready < self._armed:
                self._armed = ready
                if on_ready is None:
                    scheduler._kick_locked(ready)
                else:
                    tell = ready
        if tell < _INF:
            assert on_ready is not None
            try:
                on_ready(self, tell)
            except Exception:  # the task is queued: a batch thread must see to it instead
                log.exception("Batch queue %r: ready hook failed", self.name)
                with self._lock:
                    scheduler._kick_locked(tell)

    def full(self) -> bool:
        """Whether a one-row task would be refused now (read without the lock: a hint for
        refusing a request before its inputs are decoded; ``schedule`` decides)."""
        batches = self._batches
        return (
            self._closed
            or (len(batches) >= self._max_batches and batches[-1].size >= self._execution)
        )

    def run_ready(self) -> float | None:
        """Run this queue's ready batches on this thread (the ``on_ready`` caller's side).
        Returns when the next queued batch becomes ready (the caller runs it then; it may
        already be past), or None when nothing is queued."""
        scheduler = self._scheduler
        while True:
            with self._lock:
                now = scheduler._clock()
                batch = self._take_locked(now)
                if batch is None:
                    head = self._batches[0]
                    if not head.tasks:
                        return None
                    self._armed = min(self._armed, head.ready)
                    return head.ready
            try:
                rows, seconds = scheduler._run(self, batch, now)
            except BaseException:  # a bug of ours: hand what is left to the batch threads
                with self._lock:
                    scheduler._finish_locked(self, 0, None)
                    ready = self._batches[0].ready
                    self._armed = min(self._armed, ready)
                    scheduler._kick_locked(ready)
                raise
            with self._lock:
                scheduler._finish_locked(self, rows, seconds)

    def close(self, wait: bool = True) -> None:
        """Accept no new tasks; queued batches still run (the open one at once). With ``wait``,
        return once every queued task is done: on a scheduler without threads (or when called
        from a batch thread) the remaining batches run on this thread."""
        scheduler = self._scheduler
        with self._lock:
            self._close_locked(scheduler._clock())
            if not wait or self._empty_locked():
                return
            inline = not scheduler._workers or scheduler._is_worker_thread()
            if not inline:
                while not self._empty_locked():
                    scheduler._drained.wait()
                return
        while scheduler._run_from(self):
            pass

    @property
    def closed(self) -> bool:
        return self._closed

    def num_enqueued_tasks(self) -> int:
        """Tasks (or pieces of split tasks) waiting, not counting batches being run."""
        with self._lock:
            return sum(len(batch.tasks) for batch in self._batches)

    # -- under the scheduler's lock ------------------------------------------------------

    def _add_locked(self, batch: _Batch, task: Task, now: float) -> None:
        task.enqueued_at = now
        if not batch.tasks:
            batch.start = now
            batch.ready = now + self._timeout
        batch.tasks.append(task)
        batch.size += task.size
        if batch.size >= self._execution and batch.ready > now:
            batch.ready = now  # full

    def _start_batch_locked(self, now: float) -> _Batch:
        closing = self._batches[-1]
        closing.ready = min(closing.ready, now)
        batch = _Batch()
        self._batches.append(batch)
        return batch

    def _add_split_locked(self, task: Task, now: float) -> None:
        batches = self._batches
        limit = self._execution
        room = limit - batches[-1].size
        capacity = (self._max_batches - len(batches)) * limit + room
        if task.size > capacity:
            raise UnavailableError(
                f"{QUEUE_FULL_MESSAGE}; task size is {task.size} but scheduling capacity is "
                f"only {capacity} (num_enqueued_batches={len(batches)}, "
                f"max_enqueued_batches={self._max_batches}, open_batch_size={batches[-1].size}, "
                f"max_execution_batch_size={limit})"
            )
        sizes = split_sizes(task.size, room, limit)
        assert self.options.split_payload is not None and self.options.join_results is not None
        payloads = self.options.split_payload(task.payload, sizes)
        if len(payloads) != len(sizes):
            raise InternalError(f"split_payload returned {len(payloads)} pieces for sizes {sizes}")
        join = _SplitJoin(task, len(sizes), self.options.join_results)
        task.enqueued_at = now
        for index, (size, payload) in enumerate(zip(sizes, payloads, strict=True)):
            piece = Task(
                size,
                payload,
                functools.partial(join.done, index),
                task.deadline,
                join.cancelled,
            )
            open_batch = batches[-1]
            if open_batch.size + size > limit:
                open_batch = self._start_batch_locked(now)
            self._add_locked(open_batch, piece, now)

    def _take_locked(self, now: float) -> _Batch | None:
        batches = self._batches
        if len(batches) > 1:
            batch = batches.popleft()
        else:
            batch = batches[0]
            if batch.ready > now:  # also true of an empty batch
                return None
            batches[0] = _Batch()
        self._in_flight += 1
        self._armed = _INF
        return batch

    def _close_locked(self, now: float) -> None:
        if self._closed:
            return
        self._closed = True
        open_batch = self._batches[-1]
        if open_batch.tasks and open_batch.ready > now:
            open_batch.ready = now
        scheduler = self._scheduler
        if self._empty_locked():
            scheduler._retire_locked(self)
            return
        # A thread, even when an ``on_ready`` caller was due to look: that caller (an event
        # loop) may be stopping too.
        ready = self._batches[0].ready
        self._armed = min(self._armed, ready)
        scheduler._kick_locked(ready)

    def _empty_locked(self) -> bool:
        return self._in_flight == 0 and len(self._batches) == 1 and not self._batches[0].tasks


class _Worker:
    __slots__ = ("cond", "idle", "thread", "wake")

    def __init__(self, lock: threading.Lock) -> None:
        self.cond = threading.Condition(lock)
        self.wake = _INF  # when it will look again by itself, while idle
        self.idle = False  # listed in the scheduler's idle list
        self.thread: threading.Thread | None = None


class SharedBatchScheduler:
    """One pool of batch threads serving any number of queues fairly (round-robin)."""

    def __init__(
        self,
        num_batch_threads: int,
        clock: Callable[[], float] = time.monotonic,
        thread_name_prefix: str = "batch",
    ) -> None:
        if num_batch_threads < 0:
            raise InvalidArgumentError(
                f"num_batch_threads must be non-negative; was {num_batch_threads}"
            )
        self._clock = clock
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)  # a closed queue became empty
        self._queues: list[BatchQueue] = []
        self._next = 0  # round-robin position in _queues
        self._idle: list[_Worker] = []
        self._stopping = False
        self._threads = num_batch_threads
        self._demand_total = 0.0  # sum of the adaptive queues' _demand
        self._workers = [_Worker(self._lock) for _ in range(num_batch_threads)]
        self._worker_threads: set[threading.Thread] = set()
        for index, worker in enumerate(self._workers):
            thread = threading.Thread(
                target=self._work,
                args=(worker,),
                name=f"{thread_name_prefix}_{index}",
                daemon=True,
            )
            worker.thread = thread
            self._worker_threads.add(thread)
        for worker in self._workers:
            assert worker.thread is not None
            worker.thread.start()

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    def add_queue(self, options: QueueOptions, process: ProcessBatch) -> BatchQueue:
        """A new queue whose batches go to ``process``. InvalidArgumentError for bad options."""
        queue = BatchQueue(self, options, process)
        with self._lock:
            if self._stopping:
                raise UnavailableError("The batch scheduler is closed")
            self._queues.append(queue)
        return queue

    def queue_depths(self) -> dict[str, int]:
        """Tasks waiting in each open queue, by queue name (for the metrics endpoint)."""
        with self._lock:
            queues = list(self._queues)
        return {queue.name: queue.num_enqueued_tasks() for queue in queues}

    def run_one(self) -> bool:
        """Take one ready batch (round-robin over the queues) and run it on this thread.
        Returns False when no batch is ready."""
        with self._lock:
            now = self._clock()
            taken = self._take_locked(now)
            if taken is None:
                return False
            self._after_take_locked()
        queue, batch = taken
        rows, seconds = self._run(queue, batch, now)
        with self._lock:
            self._finish_locked(queue, rows, seconds)
        return True

    def next_wakeup(self) -> float | None:
        """The earliest clock time at which a queued batch is ready (possibly already past);
        None when nothing is queued."""
        with self._lock:
            return self._next_wakeup_locked()

    def close(self) -> None:
        """Close every queue, let the queued work finish, and stop the threads. Without
        threads, the remaining batches run on this thread."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                now = self._clock()
                for queue in list(self._queues):
                    queue._close_locked(now)
                for worker in self._idle:
                    worker.idle = False
                    worker.cond.notify()
                self._idle.clear()
        if not self._workers:
            while self.run_one():
                pass
            return
        me = threading.current_thread()
        for worker in self._workers:
            if worker.thread is not None and worker.thread is not me:
                worker.thread.join()

    # -- internals -----------------------------------------------------------------------

    def _is_worker_thread(self) -> bool:
        return threading.current_thread() in self._worker_threads

    def _take_locked(self, now: float) -> tuple[BatchQueue, _Batch] | None:
        queues = self._queues
        for _ in range(len(queues)):
            index = self._next if self._next < len(queues) else 0
            self._next = index + 1
            queue = queues[index]
            batch = queue._take_locked(now)
            if batch is not None:
                return queue, batch
        return None

    def _after_take_locked(self) -> None:
        # The taker may have been the thread another ready batch counted on; make sure an idle
        # thread looks at the next ready time.
        if self._idle:
            wake = self._next_wakeup_locked()
            if wake is not None:
                self._kick_locked(wake)

    def _kick_locked(self, ready: float) -> None:
        """Make sure some idle thread looks at the queues by ``ready`` (if any is idle)."""
        idle = self._idle
        if not idle:
            return
        for worker in idle:
            if worker.wake <= ready:
                return
        worker = idle.pop()
        worker.idle = False
        worker.cond.notify()

    def _next_wakeup_locked(self) -> float | None:
        wake = _INF
        for queue in self._queues:
            ready = queue._batches[0].ready
            wake = min(wake, ready)
        return None if wake == _INF else wake

    def _share_locked(self, queue: BatchQueue) -> float:
        return thread_share(self._threads, self._demand_total, queue._demand, len(self._queues))

    def _run_from(self, queue: BatchQueue) -> bool:
        """Run one ready batch of ``queue`` on this thread (closing a queue without threads)."""
        with self._lock:
            now = self._clock()
            batch = queue._take_locked(now)
            if batch is None:
                return False
        rows, seconds = self._run(queue, batch, now)
        with self._lock:
            self._finish_locked(queue, rows, seconds)
        return True

    def _run(self, queue: BatchQueue, batch: _Batch, now: float) -> tuple[int, float | None]:
        """Run a taken batch, outside the lock. Returns the rows that reached the batch function
        and how long it took (None when it was not called or failed)."""
        live: list[Task] = []
        latencies: list[float] = []
        expired = cancelled = 0
        for task in batch.tasks:
            latencies.append((now - task.enqueued_at) * 1e6)
            if task.cancelled is not None and _gone(task.cancelled):
                cancelled += 1
                _deliver(task.on_done, None, CancelledError(CANCELLED_IN_QUEUE_MESSAGE))
            elif task.deadline is not None and task.deadline <= now:
                expired += 1
                _deliver(task.on_done, None, ResourceExhaustedError(TIMEOUT_IN_QUEUE_MESSAGE))
            else:
                live.append(task)
        rows = 0
        seconds: float | None = None
        failed = False
        if live:
            rows = sum(task.size for task in live)
            clock = self._clock
            started = clock()
            try:
                results = queue._process(live)
                if len(results) != len(live):
                    raise InternalError(
                        f"The batch function returned {len(results)} results for {len(live)} tasks"
                    )
            except Exception as err:  # noqa: BLE001 - every task of the batch hears it
                failed = True
                error = as_op_error(err)
                for task in live:
                    _deliver(task.on_done, None, error)
            else:
                seconds = clock() - started
                for task, result in zip(live, results, strict=True):
                    _deliver(task.on_done, result, None)
        queue.stats.record_batch(
            rows=rows,
            tasks=len(live),
            queueing_us=latencies,
            expired=expired,
            cancelled=cancelled,
            failed=failed,
        )
        return rows, seconds

    def _finish_locked(self, queue: BatchQueue, rows: int, seconds: float | None) -> None:
        queue._in_flight -= 1
        window = queue._window
        if window is not None and seconds is not None:
            window.on_batch(rows, seconds)
            self._update_demand_locked()
        if queue._closed and queue._empty_locked():
            self._retire_locked(queue)

    def _update_demand_locked(self) -> None:
        # Once per batch, not per request: every adaptive queue's use of the threads, with
        # quiet queues fading out.
        now = self._clock()
        total = 0.0
        for queue in self._queues:
            window = queue._window
            if window is not None:
                queue._demand = window.demand(now)
                total += queue._demand
        self._demand_total = total

    def _retire_locked(self, queue: BatchQueue) -> None:
        queues = self._queues
        if queue in queues:
            index = queues.index(queue)
            del queues[index]
            if index < self._next:
                self._next -= 1
            self._demand_total -= queue._demand
            queue._demand = 0.0
        self._drained.notify_all()

    def _work(self, me: _Worker) -> None:
        lock = self._lock
        with lock:
            while True:
                now = self._clock()
                taken = self._take_locked(now)
                if taken is None:
                    if self._stopping:
                        return
                    wake = self._next_wakeup_locked()
                    me.wake = _INF if wake is None else wake
                    me.idle = True
                    self._idle.append(me)
                    me.cond.wait(None if wake is None else max(wake - now, 0.0))
                    if me.idle:  # woke by itself, not by a kick that unlisted it
                        me.idle = False
                        self._idle.remove(me)
                    continue
                self._after_take_locked()
                queue, batch = taken
                rows: int = 0
                seconds: float | None = None
                lock.release()
                try:
                    rows, seconds = self._run(queue, batch, now)
                except Exception:  # a bug of ours; the batch's tasks may be unanswered
                    log.exception("Batch thread failed to run a batch of %r", queue.name)
                finally:
                    lock.acquire()
                self._finish_locked(queue, rows, seconds)
