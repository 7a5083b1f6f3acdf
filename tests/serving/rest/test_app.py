"""Pieces of the REST adapter that the end-to-end tests cannot reach cheaply."""

from __future__ import annotations

import asyncio
import gzip
import threading

import pytest

from runtime.errors import DeadlineExceededError
from serving.core.server_core import CoreOptions, ServerCore
from serving.rest.app import RestApi, RestOptions, gunzip


def test_gunzip() -> None:
    assert gunzip(gzip.compress(b"x" * 100)) == b"x" * 100
    assert gunzip(gzip.compress(b"x" * 100), limit=99) == b""  # over the cap: empty body
    assert gunzip(b"not gzip") == b""


def test_a_run_past_the_deadline_answers_deadline_exceeded() -> None:
    core = ServerCore(CoreOptions())
    api = RestApi(core, RestOptions(num_threads=1, timeout_in_ms=1))
    release = threading.Event()

    def stuck() -> bytes:
        release.wait()
        return b""

    try:
        with pytest.raises(DeadlineExceededError, match="^Timed out waiting for notification$"):
            asyncio.run(api._in_pool(stuck))
    finally:
        release.set()
        api.close()
        core.close()
