"""Versions change on disk while clients send predicts: nobody notices but by the answers.

The real daemon on loopback, real HTTP clients on threads. Version 1 answers y = 0.5x + 2 and
version 2 y = 0.5x + 3, so every answer says which version computed it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from tests.serving.e2e.support import (
    HALF_PLUS_THREE_V,
    HALF_PLUS_TWO_V,
    Traffic,
    copy_slowly,
    state_is,
    version_states,
    wait_until,
)
from tests.serving.rest.server_process import ServerProcess

MODEL = "m"
X = 1.0  # version 1 answers 0.5 * X + 2 = 2.5, version 2 answers 0.5 * X + 3 = 3.5


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

        with Traffic(server.base_url, MODEL, {2.5, 3.5}, clients=4) as traffic:
            traffic.flowing()
            copy_slowly(HALF_PLUS_THREE_V, base / "2")
            wait_until(state_is(client, MODEL, 2, "AVAILABLE"), "version 2")
            wait_until(state_is(client, MODEL, 1, "END"), "version 1 to unload")
            shutil.rmtree(base / "1")

            # A broken version 3: complete on disk, but its variables are truncated.
            shutil.copytree(HALF_PLUS_TWO_V, base / "3")
            shard = next((base / "3" / "variables").glob("variables.data-*"))
            shard.write_bytes(shard.read_bytes()[:8])
            wait_until(state_is(client, MODEL, 3, "END"), "version 3 to fail")
            traffic.flowing()  # still answered after the failure

        states = version_states(client, MODEL)
        assert (states[2]["state"], states[2]["error_code"]) == ("AVAILABLE", "OK")
        assert states[3]["state"] == "END"
        assert states[3]["error_code"] != "OK"
        assert "variables" in str(states[3]["error_message"])
        assert traffic.failures == []
        assert traffic.answers[2.5] > 0 and traffic.answers[3.5] > 0  # versions 1 and 2
        # Still version 2 after the failed load.
        response = client.post(f"/v1/models/{MODEL}:predict", json={"instances": [[X]]})
        assert response.json() == {"predictions": [[3.5]]}
        print(f"swap test: {sum(traffic.answers.values())} requests "
              f"({dict(traffic.answers)} by answer), {len(traffic.failures)} failed")
    finally:
        status = server.stop()
    assert status == 0, server.output()


def _answers(client: httpx.Client, path: str) -> bool:
    try:
        client.get(path)
    except httpx.TransportError:
        return False
    return True
