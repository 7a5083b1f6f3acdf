"""``--workers 2`` seen from outside the real daemon: two processes listening on each port, one
server to every client: metrics summed over both, a ReloadConfig applied by both before it
answers, a killed worker replaced (serving the reloaded config), SIGTERM draining them all, and a
start failure ending the supervisor as it would end one process."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import grpc
import httpx
import pytest
from google.protobuf import text_format
from prometheus_client.parser import text_string_to_metric_families

from protos.tensorflow_serving.apis import model_management_pb2
from tests.serving.e2e.support import HALF_PLUS_THREE_V, wait_until
from tests.serving.rest.server_process import GRAPHSERVE, ServerProcess
from tests.serving.support import HALF_PLUS_TWO
from tests.serving.workers.support import listening_ports, workers_of

RELOAD = "/tensorflow.serving.ModelService/HandleReloadConfigRequest"
FRESH = 24  # connections opened one after another: both workers get some (or 2**-23)


def both_listen(server: ServerProcess, count: int = 2) -> bool:
    pids = workers_of(server.process.pid)
    wanted = {server.port, server.grpc_port}
    return len(pids) == count and all(wanted <= listening_ports(pid) for pid in pids)


def fresh_predict(server: ServerProcess, model: str, x: float) -> float:
    """A predict on a connection of its own, so the kernel picks the worker; ``model`` may
    end in ``/labels/L``."""
    response = httpx.post(
        f"{server.base_url}/v1/models/{model}:predict", json={"instances": [x]}, timeout=30
    )
    assert response.status_code == 200, response.text
    return float(response.json()["predictions"][0])


def reload(server: ServerProcess, models: dict[str, Path], labels: str = "") -> None:
    """ReloadConfig; ``labels`` (``version_labels`` entries) go to the last model."""
    request = model_management_pb2.ReloadConfigRequest()
    last = list(models)[-1]
    text_format.Parse(
        "model_config_list {" + "".join(
            f'config {{ name: "{name}" base_path: "{path}" model_platform: "tensorflow" '
            f'{labels if name == last else ""} }}'
            for name, path in models.items()
        ) + "}",
        request.config,
    )
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        call = channel.unary_unary(
            RELOAD,
            request_serializer=model_management_pb2.ReloadConfigRequest.SerializeToString,
            response_deserializer=model_management_pb2.ReloadConfigResponse.FromString,
        )
        response = call(request, timeout=60)
    assert response.status.error_code == 0


def request_count(server: ServerProcess, model: str) -> float:
    text = httpx.get(f"{server.base_url}/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == ":tensorflow:serving:request_count_total" and sample.labels == {
                "model_name": model, "status": "OK"
            }:
                return sample.value
    return 0.0


def test_two_workers_are_one_server(tmp_path: Path) -> None:
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true path: "/metrics" }\n')
    server = ServerProcess(
        ["--workers=2", "--wait_for_initial_models=true", "--model_name=hpt",
         f"--model_base_path={HALF_PLUS_TWO}", f"--monitoring_config_file={monitoring}"],
        ["hpt"],
    )
    try:
        wait_until(lambda: both_listen(server), "both workers listening on both ports")
        # Every request counted once, whichever worker answered it.
        before = request_count(server, "hpt")
        assert [fresh_predict(server, "hpt", 1.0) for _ in range(FRESH)] == [2.5] * FRESH
        assert request_count(server, "hpt") == before + FRESH
        # The reload answers once every worker serves the new model.
        models = {"hpt": HALF_PLUS_TWO, "three": HALF_PLUS_THREE_V.parent}
        reload(server, models)
        assert {fresh_predict(server, "three", 1.0) for _ in range(FRESH)} == {3.5}
        reload(server, models, 'version_labels { key: "stable" value: 1 }')
        # A killed worker is replaced, and its successor serves the reloaded config.
        killed = workers_of(server.process.pid)[0]
        os.kill(killed, signal.SIGKILL)
        wait_until(
            lambda: killed not in workers_of(server.process.pid) and both_listen(server),
            "the killed worker replaced",
        )
        # Labels included, once its versions are in.
        wait_until(
            lambda: all(
                httpx.get(f"{server.base_url}/v1/models/three/labels/stable", timeout=30)
                .status_code == 200 for _ in range(8)
            ),
            "the label on the new worker",
        )
        assert {fresh_predict(server, "three/labels/stable", 1.0) for _ in range(FRESH)} == {3.5}
        assert "replacing it" in server.output()
        workers = workers_of(server.process.pid)
    finally:
        status = server.stop()
    assert status == 0
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert server.output().count("Received SIGTERM; draining") == 3  # the supervisor, both workers


@pytest.mark.parametrize("broken", ["load", "flag"])
def test_a_start_that_fails_ends_the_supervisor_as_one_process(
    tmp_path: Path, broken: str
) -> None:
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"not a SavedModel")
    flags, message = (
        ([f"--model_base_path={tmp_path / 'm'}", "--max_num_load_retries=0"],
         "Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available")
        if broken == "load"
        else ([f"--model_base_path={HALF_PLUS_TWO}", "--workers=0"],
              "--workers must be 1 or more; was 0")
    )
    result = subprocess.run(
        [str(GRAPHSERVE), "--workers=2", "--port=0", "--rest_api_port=0", "--model_name=m",
         *flags],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 255
    assert message in result.stdout + result.stderr
