"""Batches of cheap queues run on the event loop that queued their tasks.

A batch thread costs an event loop two thread hand-offs per batch (the batch thread wakes and
takes the GIL from the loop; the answers wake the loop and it takes the GIL back), plus the
batch thread's own wake-up for a batch timeout. For a model whose whole batch takes tens of
microseconds (a small MLP: ~20 µs for 64 rows), those hand-offs cost more than the batch, and
the batch thread buys no parallelism: both threads need the GIL. So when a task is queued from
an event loop's thread and its queue's batches are known to be cheap, the queue tells the loop
when the next batch is ready (``BatchQueue.schedule``'s ``on_ready``) and the loop runs it then
(``BatchQueue.run_ready``), from a timer or at its next turn: the same batches, closed by the
same rules (size, timeout, adaptive window), with no thread in between. The batch threads
still run anything ready when they look, so nothing depends on the loop alone.

``LoopBatches`` is that loop-side timer keeper: one per event loop, loop thread only.
"""

from __future__ import annotations

import asyncio
import threading
import time

from serving.batching.scheduler import BatchQueue


class LoopBatches:
    """Runs queues' batches on one event loop when they become ready (a ``ReadyHook``)."""

    __slots__ = ("_due", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._due: dict[BatchQueue, tuple[float, asyncio.Handle]] = {}

    def __call__(self, queue: BatchQueue, ready: float) -> None:
        """Run ``queue``'s batches at ``ready`` (a ``time.monotonic`` time), or sooner if
        already due sooner."""
        due = self._due.get(queue)
        if due is not None:
            if due[0] <= ready:
                return
            due[1].cancel()
        delay = ready - time.monotonic()
        loop = self.loop
        handle: asyncio.Handle = (
            loop.call_soon(self._run, queue)
            if delay <= 0
            else loop.call_later(delay, self._run, queue)
        )
        self._due[queue] = (ready, handle)

    def _run(self, queue: BatchQueue) -> None:
        del self._due[queue]
        ready = queue.run_ready()
        if ready is not None:
            self(queue, ready)


_per_thread = threading.local()  # an event loop runs on one thread


def loop_batches(loop: asyncio.AbstractEventLoop) -> LoopBatches:
    """The ``LoopBatches`` of ``loop``; call on the loop's thread."""
    batches: LoopBatches | None = getattr(_per_thread, "batches", None)
    if batches is None or batches.loop is not loop:
        batches = _per_thread.batches = LoopBatches(loop)
    return batches
