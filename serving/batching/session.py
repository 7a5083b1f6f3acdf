"""BatchingServable: a loaded version whose signature runs are grouped into batches.

TensorFlow Serving's BatchingSession, over our ``LoadedModel``: each signature gets a queue in
the shared scheduler; a run that asks for all of a signature's outputs becomes a task of as
many rows as its inputs' dim 0, and the batch thread merges the tasks' inputs (padding as
configured), runs the model once and hands each task its own rows of the outputs. A run that
asks for a subset of outputs (Predict's ``output_filter``) matches no queue and runs unbatched,
as upstream.

Every queued task belongs to a request that holds the version's handle, so a version being
unloaded finishes its queue before ``close`` runs; ``close`` then retires the queues.

Each queue learns what its batch function costs (CPU time, moving average). Tasks queued from
an event loop's thread into a queue whose batches are cheap (``LOOP_BATCH_S``) have their
batches run on that loop (``loop_runner``) rather than a batch thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from runtime.cancellation import Cancellation
from serving.batching import merge
from serving.batching.loop_runner import loop_batches
from serving.batching.params import BatchingParams
from serving.batching.scheduler import BatchQueue, QueueOptions, SharedBatchScheduler, Task
from serving.requests.call_context import current
from serving.servable import Caller, OnDone, Outputs, PlainServable

if TYPE_CHECKING:
    from runtime.saved_model import LoadedModel

log = logging.getLogger("graphserve")

_UNBATCHED_WARNING_INTERVAL_S = 120.0  # as upstream: say it, but not on every request
# A batch whose batch function takes less CPU time than this (on average) runs on the event
# loop that queued its tasks (``loop_runner``): the thread hand-offs cost more than it. The
# line a single unbatched run goes inline under (``requests.run_site.INLINE_RUN_S``).
LOOP_BATCH_S = 250e-6
_COST_SAMPLE_CAP_S = 10 * LOOP_BATCH_S  # one outlier (a descheduled thread) moves it this far
_COST_WEIGHT = 1 / 8  # of the newest batch in the average


def queue_options(params: BatchingParams, name: str) -> QueueOptions:
    return QueueOptions(
        max_batch_size=params.max_batch_size,
        batch_timeout_micros=params.batch_timeout_micros,
        max_enqueued_batches=params.max_enqueued_batches,
        enable_large_batch_splitting=params.enable_large_batch_splitting,
        max_execution_batch_size=params.execution_batch_size,
        split_payload=merge.split_inputs,
        join_results=merge.concat_outputs,
        name=name,
    )


class _SignatureBatcher:
    """One signature's queue and the batch function that runs it."""

    def __init__(
        self,
        model: LoadedModel,
        key: str,
        params: BatchingParams,
        scheduler: SharedBatchScheduler,
        name: str,
    ) -> None:
        self.model = model
        self.key = key
        self.outputs = frozenset(model.signatures[key].outputs)
        self.params = params
        self.queue: BatchQueue = scheduler.add_queue(queue_options(params, name), self.process)
        # Batches may run on an event loop only where the queue's clock is the loops' own.
        self._loop_clock = scheduler.clock is time.monotonic
        self.cost_s = math.inf  # moving average of a batch's CPU time; inf: none yet

    def loop_runs(self) -> bool:
        """Whether a task queued from an event loop's thread should have its batch run there."""
        return self.cost_s < LOOP_BATCH_S and self._loop_clock

    def process(self, tasks: list[Task]) -> list[Outputs]:
        # CPU time, not wall time: a batch thread waiting for the GIL is not the batch's cost.
        start = time.thread_time()
        try:
            return self._process(tasks)
        finally:
            seconds = min(time.thread_time() - start, _COST_SAMPLE_CAP_S)
            cost = self.cost_s
            self.cost_s = seconds if cost == math.inf else cost + (seconds - cost) * _COST_WEIGHT

    def _process(self, tasks: list[Task]) -> list[Outputs]:
        sizes = [task.size for task in tasks]
        rows = sum(sizes)
        batch_size = merge.round_up_to_allowed(rows, self.params.allowed_batch_sizes)
        inputs = merge.merge_inputs(
            [task.payload for task in tasks], batch_size, self.params.pad_variable_length_inputs
        )
        outputs = self.model.run(self.key, inputs, checked=True)
        self.queue.stats.record_padding(rows, batch_size - rows)
        return merge.split_outputs(outputs, sizes, batch_size)


class BatchingServable:
    """A version whose runs of a signature's full output set are queued for batches; a
    ``Servable`` (``serving.servable``)."""

    def __init__(
        self,
        model: LoadedModel,
        scheduler: SharedBatchScheduler,
        params: BatchingParams,
        name: str,
    ) -> None:
        self.model = model
        self.params = params
        self._unbatched = PlainServable(model)  # runs that match no queue
        self.signatures = model.signatures
        self.meta_graph = model.meta_graph
        self.bounded = self._unbatched.bounded
        self._batchers = {
            key: _SignatureBatcher(model, key, params, scheduler, f"{name}/{key}")
            for key in model.signatures
        }
        self._last_unbatched_warning = 0.0

    def batches(self, key: str, output_aliases: Sequence[str] | None) -> bool:
        return self._batcher(key, output_aliases) is not None

    def admits(self, key: str) -> bool:
        batcher = self._batchers.get(key)
        return batcher is None or not batcher.queue.full()

    def _batcher(self, key: str, output_aliases: Sequence[str] | None) -> _SignatureBatcher | None:
        batcher = self._batchers.get(key)
        if batcher is None:
            return None
        if output_aliases is not None and frozenset(output_aliases) != batcher.outputs:
            now = time.monotonic()
            if now - self._last_unbatched_warning > _UNBATCHED_WARNING_INTERVAL_S:
                self._last_unbatched_warning = now
                log.warning(
                    "Request for signature %r asks for outputs %s, not all of the signature's; "
                    "running it unbatched", key, sorted(output_aliases),
                )
            return None
        return batcher

    def submit(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None,
        on_done: OnDone,
        caller: Caller | None,
    ) -> None:
        """Queue one run (see ``Servable.submit``). Called on an event loop's thread, the
        batch may run on that loop (when the queue's batches are cheap, ``loop_runner``):
        ``on_done`` must not be waited for there."""
        self._submit(key, inputs, output_aliases, on_done, caller, on_loop=True)

    def _submit(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None,
        on_done: OnDone,
        caller: Caller | None,
        on_loop: bool,
    ) -> None:
        batcher = self._batcher(key, output_aliases)
        if batcher is None:
            self._unbatched.submit(key, inputs, output_aliases, on_done, caller)
            return
        loop = asyncio._get_running_loop() if on_loop else None
        try:
            task = Task(
                merge.task_size(inputs),
                inputs,
                on_done,
                caller.deadline if caller is not None else None,
                caller.cancelled if caller is not None else None,
            )
            if loop is not None and batcher.loop_runs():
                batcher.queue.schedule(task, loop_batches(loop))
            else:
                batcher.queue.schedule(task)
        except Exception as err:  # noqa: BLE001 - refused: the caller hears it
            on_done(None, err)

    def run(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None = None,
        cancellation: Cancellation | None = None,
    ) -> Outputs:
        """The blocking run: queue it and wait for its batch (the caller's deadline is the
        current call context's)."""
        if self._batcher(key, output_aliases) is None:
            return self._unbatched.run(key, inputs, output_aliases, cancellation)
        done = threading.Event()
        answer: list[Any] = [None, None]

        def on_done(result: Outputs | None, error: BaseException | None) -> None:
            answer[0], answer[1] = result, error
            done.set()

        # Never on an event loop's turn: this thread waits for the batch.
        self._submit(key, inputs, output_aliases, on_done, current(), on_loop=False)
        done.wait()
        if answer[1] is not None:
            raise answer[1]
        result: Outputs = answer[0]
        return result

    def batch_stats(self) -> dict[str, Any]:
        return {key: batcher.queue.stats.snapshot() for key, batcher in self._batchers.items()}

    def close(self) -> None:
        for batcher in self._batchers.values():
            batcher.queue.close(wait=True)
            stats = batcher.queue.stats.snapshot()
            if stats["tasks"] or stats["expired"] or stats["cancelled"]:
                log.info(
                    "Batching summary for %s: %d tasks in %d batches (%d rows, %d padding rows, "
                    "%d expired, %d cancelled)", stats["name"], stats["tasks"], stats["batches"],
                    stats["rows"], stats["padding"]["rows"], stats["expired"], stats["cancelled"],
                )
        self.model.close()
