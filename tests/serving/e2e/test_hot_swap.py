"""Versions change on disk while clients send predicts: nobody notices but by the answers.

The real daemon on loopback, real HTTP clients on threads. Version 1 answers y = 0.5x + 2 and
version 2 y = 0.5x + 3, so every answer says which version computed it.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Self

import httpx

from tests.serving.e2e.support import (
    HALF_PLUS_THREE_V,
    HALF_PLUS_TWO_V,
    copy_slowly,
    state_is,
    version_states,
    wait_until,
)
from tests.serving.rest.server_process import ServerProcess

MODEL = "m"
X = 1.0
ANSWER_BY_VERSION = {2.5: 1, 3.5: 2}  # 0.5 * X + 2, 0.5 * X + 3
CLIENTS = 4


class Traffic:
    """Clients that predict in a loop until stopped, counting answers by version."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.answers: Counter[int] = Counter()
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(CLIENTS)]

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=60) as client:
            while not self._stop.is_set():
                try:
                    response = client.post(f"/v1/models/{MODEL}:predict",
                                           json={"instances": [[X]]})
                    body = response.json()
                    outcome = (response.status_code == 200
                               and ANSWER_BY_VERSION.get(body["predictions"][0][0]))
                except (httpx.HTTPError, ValueError, KeyError, IndexError) as err:
                    outcome, body = None, repr(err)
                with self._lock:
                    if outcome:
                        self.answers[outcome] += 1
                    else:
                        self.failures.append(str(body))

    def total(self) -> int:
        with self._lock:
            return sum(self.answers.values()) + len(self.failures)

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def test_versions_swap_under_steady_traffic_with_no_failed_request(tmp_path: Path) -> None:
    base = tmp_path / MODEL
    base.mkdir()
    server = ServerProcess(
        [f"--model_name={MODEL}", f"--model_base_path={base}", "--port=0",
         "--file_system_poll_wait_seconds=1", "--file_system_settle_seconds=0.3",
         "--max_num_load_retries=1", "--load_retry_interval_micros=100000"],
        [],
    )
    client = server.client
    try:
        # Started on an empty base path: up, but not ready.
        wait_until(lambda: _answers(client, "/healthz"), "the server to answer")
        assert client.get("/readyz").status_code == 503

        copy_slowly(HALF_PLUS_TWO_V, base / "1")
        wait_until(state_is(client, MODEL, 1, "AVAILABLE"), "version 1")
        assert client.get("/readyz").status_code == 200

        with Traffic(server.base_url) as traffic:
            wait_until(lambda: traffic.total() >= 20, "traffic to flow")
            copy_slowly(HALF_PLUS_THREE_V, base / "2")
            wait_until(state_is(client, MODEL, 2, "AVAILABLE"), "version 2")
            wait_until(state_is(client, MODEL, 1, "END"), "version 1 to unload")
            shutil.rmtree(base / "1")

            # A broken version 3: complete on disk, but its variables are truncated.
            shutil.copytree(HALF_PLUS_TWO_V, base / "3")
            shard = next((base / "3" / "variables").glob("variables.data-*"))
            shard.write_bytes(shard.read_bytes()[:8])
            wait_until(state_is(client, MODEL, 3, "END"), "version 3 to fail")
            seen = traffic.total()
            wait_until(lambda: traffic.total() >= seen + 20, "traffic after the failure")

        states = version_states(client, MODEL)
        assert (states[2]["state"], states[2]["error_code"]) == ("AVAILABLE", "OK")
        assert states[3]["state"] == "END"
        assert states[3]["error_code"] != "OK"
        assert "variables" in str(states[3]["error_message"])
        assert traffic.failures == []
        assert traffic.answers[1] > 0 and traffic.answers[2] > 0
        # Still version 2 after the failed load.
        response = client.post(f"/v1/models/{MODEL}:predict", json={"instances": [[X]]})
        assert response.json() == {"predictions": [[3.5]]}
        print(f"swap test: {sum(traffic.answers.values())} requests "
              f"({dict(traffic.answers)} by version), {len(traffic.failures)} failed")
    finally:
        status = server.stop()
    assert status == 0, server.output()


def _answers(client: httpx.Client, path: str) -> bool:
    try:
        client.get(path)
    except httpx.TransportError:
        return False
    return True
