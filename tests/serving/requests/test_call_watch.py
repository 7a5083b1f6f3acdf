"""CallWatch: the deadlines and departed clients of many requests from one loop timer."""

from __future__ import annotations

import asyncio
import time

from runtime.errors import CancelledError, DeadlineExceededError
from serving.requests.call_context import TIMED_OUT, CallContext
from serving.requests.call_watch import CLIENT_GONE, POLL_S, CallWatch

POLLS_ENOUGH = int(60 / POLL_S)  # a guard against hanging, far beyond one poll


async def _wait(watch: CallWatch, call: CallContext, answered: asyncio.Future[None]) -> str:
    """A request waiting for its answer under ``watch``, as the dispatcher waits."""
    task = asyncio.current_task()
    assert task is not None
    watch.watch(task, call)
    try:
        await answered
    except asyncio.CancelledError:
        if watch.done(task):
            return "timed out"
        raise
    finally:
        watch.done(task)
    return "answered"


def test_a_deadline_cancels_the_task_and_stops_its_call() -> None:
    watch = CallWatch()
    call = CallContext.with_timeout(0.01)

    async def scenario() -> tuple[str, int]:
        result = await _wait(watch, call, asyncio.get_running_loop().create_future())
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    result, cancelling = asyncio.run(scenario())
    assert result == "timed out"
    assert cancelling == 0  # the cancellation was taken back, as asyncio.timeout does
    assert call.cancelled() and call.expired()
    error = call.cancellation.error
    assert isinstance(error, DeadlineExceededError) and error.message == TIMED_OUT


def test_different_deadlines_in_any_order_expire_each_at_its_own() -> None:
    watch = CallWatch()
    timeouts = [0.4, 0.1, 60.0, 0.3, 0.2, None]
    expired: list[float] = []

    async def one(timeout: float | None, answered: asyncio.Future[None]) -> str:
        result = await _wait(watch, CallContext.with_timeout(timeout), answered)
        if result == "timed out":
            assert timeout is not None
            expired.append(timeout)
        return result

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        answers = [loop.create_future() for _ in timeouts]
        waiting = [asyncio.create_task(one(t, a)) for t, a in zip(timeouts, answers, strict=True)]
        # Wait until the four short deadlines have passed (bounded), then answer the rest.
        for _ in range(6000):
            if len(expired) == 4:
                break
            await asyncio.sleep(0.01)
        for answer in answers:
            if not answer.done():
                answer.set_result(None)
        return list(await asyncio.gather(*waiting))

    results = asyncio.run(scenario())
    assert results == ["timed out", "timed out", "answered", "timed out", "timed out", "answered"]
    assert expired == [0.1, 0.2, 0.3, 0.4]  # in deadline order, not the order watched


def test_an_answered_request_is_not_cancelled_at_its_deadline() -> None:
    watch = CallWatch()
    call = CallContext.with_timeout(0.05)

    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        answered = loop.create_future()
        answered.set_result(None)
        result = await _wait(watch, call, answered)
        # Past the deadline it was watched for, the same task waits on undisturbed.
        later = loop.create_future()
        loop.call_later(0.2, later.set_result, None)
        await later
        return result

    assert asyncio.run(scenario()) == "answered"
    assert call.cancellation.error is None


def test_a_polled_caller_that_departs_is_stopped_and_the_others_are_not() -> None:
    watch = CallWatch()
    gone = [False, False]
    calls = [CallContext(None, lambda i=i: gone[i]) for i in range(2)]
    assert all(call.polls for call in calls)

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        answers = [loop.create_future() for _ in calls]
        waiting = [
            asyncio.create_task(_wait(watch, call, answer))
            for call, answer in zip(calls, answers, strict=True)
        ]
        await asyncio.sleep(0)  # both are watched now
        gone[0] = True
        for _ in range(POLLS_ENOUGH):
            if calls[0].cancellation.cancelled:
                break
            await asyncio.sleep(POLL_S / 4)
        # The departed caller's run stops with its error, which answers the request (the task
        # itself is not cancelled: nobody reads its answer).
        error = calls[0].cancellation.error
        assert isinstance(error, CancelledError) and error.message == CLIENT_GONE
        assert not waiting[0].done()
        answers[0].set_exception(error)
        assert not calls[1].cancelled() and calls[1].cancellation.error is None
        answers[1].set_result(None)
        outcome = await asyncio.gather(*waiting, return_exceptions=True)
        return [r if isinstance(r, str) else type(r).__name__ for r in outcome]

    assert asyncio.run(scenario()) == ["CancelledError", "answered"]
    assert calls[1].cancellation.error is None


def test_the_heap_stays_bounded_while_requests_are_answered_before_their_deadlines() -> None:
    watch = CallWatch()

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        largest = 0
        for _ in range(5000):
            watch.watch(task, CallContext.with_timeout(3600))
            assert not watch.done(task)
            largest = max(largest, len(watch._heap))
        # Still working: a short deadline after all of that fires.
        answered: asyncio.Future[None] = loop.create_future()
        assert await _wait(watch, CallContext.with_timeout(0.01), answered) == "timed out"
        return largest

    largest = asyncio.run(scenario())
    assert largest <= 2 * 1 + 64 + 1  # near the number of requests still waiting (here one)


def test_a_watch_outlives_its_loop() -> None:
    watch = CallWatch()

    async def once(timeout: float, answer: bool) -> str:
        answered = asyncio.get_running_loop().create_future()
        if answer:
            answered.set_result(None)
        return await _wait(watch, CallContext.with_timeout(timeout), answered)

    assert asyncio.run(once(60.0, True)) == "answered"  # leaves a timer on a loop that closes
    assert asyncio.run(once(0.01, False)) == "timed out"  # a new loop: watched afresh


def test_an_expired_task_can_wait_again() -> None:
    watch = CallWatch()

    async def scenario() -> str:
        answered = asyncio.get_running_loop().create_future()
        first = await _wait(watch, CallContext(time.monotonic() + 0.01), answered)
        await asyncio.sleep(0)  # no cancellation left pending
        return first

    assert asyncio.run(scenario()) == "timed out"
