"""DeadlineWatch: the REST timeout for many requests from one loop timer."""

from __future__ import annotations

import asyncio
import time

from serving.rest.deadline_watch import DeadlineWatch


def test_tasks_past_their_deadline_are_cancelled_and_the_others_are_not() -> None:
    watch = DeadlineWatch()

    async def request(delay: float, timeout: float) -> str:
        task = asyncio.current_task()
        assert task is not None
        watch.watch(task, time.monotonic() + timeout)
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            if watch.done(task):
                return "timed out"
            raise
        finally:
            watch.done(task)
        return "answered"

    async def scenario() -> list[str]:
        return await asyncio.gather(
            request(0.0, 0.05), request(10.0, 0.05), request(0.01, 0.2), request(10.0, 0.1)
        )

    assert asyncio.run(scenario()) == ["answered", "timed out", "answered", "timed out"]


def test_an_expired_task_is_uncancelled_and_can_wait_again() -> None:
    watch = DeadlineWatch()

    async def scenario() -> int:
        task = asyncio.current_task()
        assert task is not None
        watch.watch(task, time.monotonic() + 0.01)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            assert watch.done(task)
        assert task.cancelling() == 0  # taken back, as asyncio.timeout does
        await asyncio.sleep(0)  # no cancellation left pending
        return 1

    assert asyncio.run(scenario()) == 1


def test_a_watch_outlives_its_loop() -> None:
    watch = DeadlineWatch()

    async def once(timeout: float, delay: float) -> bool:
        task = asyncio.current_task()
        assert task is not None
        watch.watch(task, time.monotonic() + timeout)
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            return watch.done(task)
        watch.done(task)
        return False

    assert asyncio.run(once(60.0, 0.0)) is False  # leaves a timer on a loop that then closes
    assert asyncio.run(once(0.01, 10.0)) is True  # a new loop: watched afresh
