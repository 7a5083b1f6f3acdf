"""Running a model version from an event loop without blocking it.

A batching version (``serving.batching.session.BatchingModel``) takes the task into its queue
and calls back from a batch thread, so the caller holds no thread while it waits. Any other
version runs on the given executor. Either way the event loop only waits on a future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from serving.requests.call_context import CallContext, current
from serving.servable import ServableHandle

Outputs = dict[str, np.ndarray]


def _settle(future: asyncio.Future[Outputs], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting (timeout or disconnect)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def run_model(
    handle: ServableHandle,
    key: str,
    inputs: Mapping[str, np.ndarray],
    output_aliases: Sequence[str] | None,
    executor: Executor | None = None,
    call: CallContext | None = None,
) -> Outputs:
    """Run the handle's version and answer its outputs. Takes over ``handle``: it is released
    when the run is over, not when the caller stops waiting, so a version is never unloaded
    under a run still in progress."""
    loop = asyncio.get_running_loop()
    model = handle.servable
    waiter: asyncio.Future[Outputs] = loop.create_future()

    def finish(result: Any, error: BaseException | None) -> None:  # on any thread, once
        handle.release()
        try:
            loop.call_soon_threadsafe(_settle, waiter, result, error)
        except RuntimeError:  # the loop is gone (shutdown): nobody is waiting
            pass

    submit = getattr(model, "submit", None)
    try:
        if submit is None:

            def work() -> None:
                try:
                    outputs = model.run(key, inputs, output_aliases)
                except Exception as err:  # noqa: BLE001 - the caller hears it
                    finish(None, err)
                else:
                    finish(outputs, None)

            loop.run_in_executor(executor, work)
        else:
            caller = call or current()
            gone = caller.cancelled if caller is not None else None

            def cancelled() -> bool:
                # A caller that stopped awaiting (timed out, disconnected) is gone too.
                return waiter.done() or (gone is not None and gone())

            deadline = caller.deadline if caller is not None else None
            submit(key, inputs, output_aliases, finish, CallContext(deadline, cancelled))
    except BaseException:
        handle.release()
        raise
    return await waiter
