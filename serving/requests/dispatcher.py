"""The one way a request reaches a model, whatever the transport.

    transport adapter: decode bytes ─▶ Dispatcher ─▶ encode the answer
    Dispatcher.predict: handle(model, version | label) ─▶ signature ─▶ the adapter's decoder types
        the inputs ─▶ one check (names, dtypes, sizes, output filter) ─▶ inline | pool | batcher
        ─▶ Servable.run / submit, under the request's deadline and cancellation

The APIs that are blocking code (Classify, Regress, MultiInference, status, metadata, model
management) run on the worker pool through ``blocking``, under the same deadline and
cancellation. A transport owns one dispatcher per event loop; the options are its knobs.

Where a Predict runs: inline on the event loop when its version does not batch it, its graph
has no loops (nothing could stop an inline run), its inputs are small and its runs are known to
be short (``run_site``); queued for a batch when the version batches it (no thread waits); else
on the pool. A queue that is full is answered UNAVAILABLE before the inputs are
decoded. Decoding that is not cheap, and encoding of large answers (``offload``), leave the loop.

The caller's deadline and departure are watched (``call_watch``): at the deadline the request
answers DEADLINE_EXCEEDED at once and its run stops at its next kernel; a departed client's run
stops too. Nothing started for a request outlives it by more than one kernel.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from runtime import cancellation
from runtime.errors import (
    CancelledError,
    DeadlineExceededError,
    ResourceExhaustedError,
    UnavailableError,
)
from serving.batching.scheduler import QUEUE_FULL_MESSAGE
from serving.metrics.catalog import METRICS, RUNTIME
from serving.requests.call_context import CallContext, calling
from serving.requests.call_watch import CallWatch
from serving.requests.model_runner import start_run
from serving.requests.predict import (
    InputDecoder,
    PredictResponse,
    checked_inputs,
    output_aliases,
    response,
    signature_key,
    signature_of,
)
from serving.requests.run_site import INLINE_RUN_S, RunSites
from serving.servable import ServableManager

T = TypeVar("T")

NOT_RUN_DEADLINE = "Deadline exceeded before the request could be run"
NOT_RUN_CANCELLED = "The request was cancelled before it could be run"
REQUEST_CANCELLED = "The request was cancelled"

INLINE_INPUT_BYTES = 64 << 10  # larger inputs never run inline
# A request may decode to no more tensor bytes than the largest message it could send.
DEFAULT_MAX_TENSOR_BYTES = 2**31 - 1


@dataclass(frozen=True)
class DispatchOptions:
    threads: int = 4  # the worker pool: blocking APIs and runs that neither batch nor inline
    max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES  # decoded inputs of one request, in all
    # --enable_signature_method_name_check: classify/regress also require their method name.
    method_name_check: bool = False
    thread_name_prefix: str = "worker"
    # A run known to take less CPU time than this may go inline on the event loop.
    inline_run_s: float = INLINE_RUN_S


def _small(inputs: dict[str, np.ndarray]) -> bool:
    """Inputs small enough that a run known to be short stays short on them."""
    size = 0
    for array in inputs.values():
        size += array.nbytes
    return size <= INLINE_INPUT_BYTES


def _timed(record: Callable[[float], None], name: str) -> Callable[[float], None]:
    """``record``, and the run's time into ``runtime_latency`` (the CPU time of the run, the
    time inside the session; a batched run is timed by its caller, from queue to answer)."""
    cell = (name, "Predict", RUNTIME)

    def timed(seconds: float) -> None:
        record(seconds)
        METRICS.runtime_latency.observe(cell, seconds * 1e6)

    return timed


def _if_still_wanted(call: CallContext, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    """Blocking work for ``call``, on a worker: not started when nobody waits any more."""
    if call.expired():
        raise DeadlineExceededError(NOT_RUN_DEADLINE)
    if call.cancelled():
        raise CancelledError(NOT_RUN_CANCELLED)
    with calling(call), cancellation.running(call.cancellation):
        return fn(*args)


class Dispatcher:
    """Event-loop side of every API; thread-safe apart from the loop-only methods."""

    def __init__(self, manager: ServableManager, options: DispatchOptions) -> None:
        self.manager = manager
        self.options = options
        self.pool = ThreadPoolExecutor(
            options.threads, thread_name_prefix=options.thread_name_prefix
        )
        self._sites = RunSites(options.inline_run_s)
        self._watch = CallWatch()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    async def predict(
        self,
        name: str,
        version: int | None,
        label: str | None,
        signature_name: str,
        inputs: InputDecoder,
        output_filter: Sequence[str],
        call: CallContext,
    ) -> PredictResponse:
        site = self._sites.get(name, version, label, signature_name)
        spec = site.spec
        handle = self.manager.handle(site.request)
        try:
            servable = handle.servable
            key = signature_key(spec)
            signature = signature_of(servable, key, inputs)
            aliases = output_aliases(signature, output_filter)
            batches = servable.batches(key, aliases)
            if batches and not servable.admits(key):
                raise UnavailableError(QUEUE_FULL_MESSAGE)  # before decoding anything
            limit = self.options.max_tensor_bytes
            if inputs.cheap():
                values = inputs.decode(signature, limit)
            else:
                values = await self._waiting(call, self._off_loop(inputs.decode, signature, limit))
            checked = checked_inputs(signature, values)
        except BaseException:
            handle.release()
            raise
        version_ = handle.id.version
        if not batches and site.short() and servable.bounded and _small(checked):
            # CPU time, not wall time: a preempted run (other processes share the cores) did
            # not block the loop any longer than it would have anyway.
            start = time.thread_time()
            try:
                outputs = servable.run(key, checked, aliases)
            finally:
                ran = time.thread_time() - start
                site.record(ran)
                handle.release()
            METRICS.runtime_latency.observe((name, "Predict", RUNTIME), ran * 1e6)
        else:
            timed = None if batches else _timed(site.record, name)
            began = time.perf_counter()
            run = start_run(handle, key, checked, aliases, self.pool, call, timed)  # releases it
            outputs = await self._waiting(call, run)
            if batches:  # the batching session's Run, as upstream times it: the wait included
                METRICS.runtime_latency.observe(
                    (name, "Predict", RUNTIME), (time.perf_counter() - began) * 1e6
                )
        return response(spec, version_, key, outputs)

    async def blocking(self, call: CallContext, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the pool, for ``call`` (its deadline and cancellation current)."""
        work = asyncio.get_running_loop().run_in_executor(
            self.pool, _if_still_wanted, call, fn, args
        )
        return await self._waiting(call, work)

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the pool (decoding or encoding large messages)."""
        return await self._off_loop(fn, *args)

    def _off_loop(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    async def _waiting(self, call: CallContext, work: asyncio.Future[T]) -> T:
        """Await ``work`` under ``call``'s deadline; a caller that stops waiting (deadline,
        disconnect, or this task cancelled by its transport) stops the work."""
        task = asyncio.current_task()
        assert task is not None
        watch = self._watch
        watch.watch(task, call)
        try:
            return await work
        except ResourceExhaustedError:
            # A batch queue dropped the task at its deadline just before the watch fired: the
            # same timeout, answered the same way.
            if call.expired():
                raise call.timed_out() from None
            raise
        except asyncio.CancelledError:
            if watch.done(task):
                raise call.timed_out() from None
            # The transport cancelled the request (gRPC: the client cancelled or its deadline
            # passed; shutdown): stop what runs for it.
            call.stop(call.timed_out() if call.expired() else CancelledError(REQUEST_CANCELLED))
            raise
        finally:
            watch.done(task)
            # A failed ``work`` holds its error, whose traceback holds this frame: without this,
            # the request's buffers would wait in that cycle for a full garbage collection.
            del work
