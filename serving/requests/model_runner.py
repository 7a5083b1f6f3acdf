"""Running a model version from an event loop without blocking it.

A batching version (``serving.batching.session.BatchingModel``) takes the task into its queue
and calls back from a batch thread, so the caller holds no thread while it waits. Any other
version runs on the given executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from serving.requests.call_context import CallContext, current

Outputs = dict[str, np.ndarray]


def _settle(future: asyncio.Future[Outputs], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting (timeout or disconnect)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def run_model(
    model: Any,
    key: str,
    inputs: Mapping[str, np.ndarray],
    output_aliases: Sequence[str] | None,
    executor: Executor | None = None,
    call: CallContext | None = None,
) -> Outputs:
    loop = asyncio.get_running_loop()
    submit = getattr(model, "submit", None)
    if submit is None:
        outputs: Outputs = await loop.run_in_executor(
            executor, model.run, key, inputs, output_aliases
        )
        return outputs
    future: asyncio.Future[Outputs] = loop.create_future()
    caller = call or current()
    gone = caller.cancelled if caller is not None else None

    def cancelled() -> bool:
        # A caller that stopped awaiting (wait_for timed out, connection closed) is gone too.
        return future.done() or (gone is not None and gone())

    def on_done(result: Any, error: BaseException | None) -> None:
        loop.call_soon_threadsafe(_settle, future, result, error)

    deadline = caller.deadline if caller is not None else None
    submit(key, inputs, output_aliases, on_done, CallContext(deadline, cancelled))
    return await future
