"""BatchingModel: a loaded version whose signature runs are grouped into batches.

TensorFlow Serving's BatchingSession, over our ``LoadedModel``: each signature gets a queue in
the shared scheduler; a run that asks for all of a signature's outputs becomes a task of as
many rows as its inputs' dim 0, and the batch thread merges the tasks' inputs (padding as
configured), runs the model once and hands each task its own rows of the outputs. A run that
asks for a subset of outputs (Predict's ``output_filter``) matches no queue and runs unbatched,
as upstream.

Every queued task belongs to a request that holds the version's handle, so a version being
unloaded finishes its queue before ``close`` runs; ``close`` then retires the queues.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from serving.batching import merge
from serving.batching.params import BatchingParams
from serving.batching.scheduler import BatchQueue, QueueOptions, SharedBatchScheduler, Task
from serving.requests.call_context import CallContext, current

log = logging.getLogger("graphserve")

Outputs = dict[str, np.ndarray]
OnDone = Callable[[Any, BaseException | None], None]
_UNBATCHED_WARNING_INTERVAL_S = 120.0  # as upstream: say it, but not on every request


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
        model: Any,
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

    def process(self, tasks: list[Task]) -> list[Outputs]:
        sizes = [task.size for task in tasks]
        rows = sum(sizes)
        batch_size = merge.round_up_to_allowed(rows, self.params.allowed_batch_sizes)
        inputs = merge.merge_inputs(
            [task.payload for task in tasks], batch_size, self.params.pad_variable_length_inputs
        )
        outputs = self.model.run(self.key, inputs)
        self.queue.stats.record_padding(rows, batch_size - rows)
        return merge.split_outputs(outputs, sizes, batch_size)


class BatchingModel:
    """Looks like the ``LoadedModel`` it wraps (``signatures``, ``signature``, ``run``,
    ``close``) and adds ``submit``, the non-blocking run for event loops."""

    def __init__(
        self,
        model: Any,
        scheduler: SharedBatchScheduler,
        params: BatchingParams,
        name: str,
    ) -> None:
        self.model = model
        self.params = params
        self.signatures = model.signatures
        self._batchers = {
            key: _SignatureBatcher(model, key, params, scheduler, f"{name}/{key}")
            for key in model.signatures
        }
        self._last_unbatched_warning = 0.0

    def __getattr__(self, attribute: str) -> Any:
        # export_dir, meta_graph, session, ...: the wrapped version's own.
        return getattr(self.model, attribute)

    def signature(self, key: str) -> Any:
        return self.model.signature(key)

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
        call: CallContext | None = None,
    ) -> None:
        """Queue one run; ``on_done(outputs, None)`` or ``on_done(None, error)`` follows once,
        from a batch thread (or from this thread when the run is refused or unbatched)."""
        batcher = self._batcher(key, output_aliases)
        try:
            if batcher is not None:
                batcher.queue.schedule(
                    Task(
                        size=merge.task_size(inputs),
                        payload=inputs,
                        on_done=on_done,
                        deadline=call.deadline if call is not None else None,
                        cancelled=call.cancelled if call is not None else None,
                    )
                )
                return
            outputs = self.model.run(key, inputs, output_aliases)
        except Exception as err:  # noqa: BLE001 - refused or failed here: the caller hears it
            on_done(None, err)
            return
        on_done(outputs, None)

    def run(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None = None,
    ) -> Outputs:
        """The blocking run: queue it and wait for its batch."""
        if self._batcher(key, output_aliases) is None:
            outputs: Outputs = self.model.run(key, inputs, output_aliases)
            return outputs
        done = threading.Event()
        answer: list[Any] = [None, None]

        def on_done(result: Any, error: BaseException | None) -> None:
            answer[0], answer[1] = result, error
            done.set()

        self.submit(key, inputs, output_aliases, on_done, current())
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
