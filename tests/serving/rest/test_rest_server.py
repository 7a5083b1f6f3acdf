"""Server process behaviour: CORS headers, graceful shutdown, start-up with missing or invalid
models."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.serving.rest.server_process import GRAPHSERVE, ServerProcess
from tests.serving.support import HALF_PLUS_TWO

MODEL = "half_plus_two"
CORS = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "POST, GET",
    "access-control-allow-headers": "Content-Type",
}


def test_cors_headers_and_graceful_shutdown() -> None:
    server = ServerProcess([f"--model_name={MODEL}", f"--model_base_path={HALF_PLUS_TWO}",
                            "--rest_api_enable_cors_support", "--port=0"], [MODEL])
    try:
        for response in (
            server.client.get(f"/v1/models/{MODEL}"),
            server.client.get("/v1/models/nope"),
            server.client.options(f"/v1/models/{MODEL}:predict",
                                  headers={"Origin": "http://example.com"}),
        ):
            assert {k: response.headers.get(k) for k in CORS} == CORS
    finally:
        status = server.stop()
    assert status == 0, server.output()
    assert "Successfully loaded servable version {name: half_plus_two version: 123}" \
        in server.output()


def test_a_missing_base_path_serves_but_is_not_ready(tmp_path: Path) -> None:
    server = ServerProcess(["--model_name=m", f"--model_base_path={tmp_path}/missing"], [])
    try:
        assert server.client.get("/healthz").json() == {"status": "alive"}
        ready = server.client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"status": "not ready", "models_not_ready": ["m"]}
        response = server.client.post("/v1/models/m:predict", json={"instances": [[1.0]]})
        assert response.status_code == 404
        assert response.json() == {"error": "Servable not found for request: Latest(m)"}
    finally:
        assert server.stop() == 0, server.output()


def test_an_invalid_model_config_stops_start_up(tmp_path: Path) -> None:
    config = tmp_path / "models.config"
    config.write_text("model_config_list { config { name: ")
    result = subprocess.run(
        [str(GRAPHSERVE), "--rest_api_port=0", f"--model_config_file={config}"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 255
    assert f"Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '{config}'" \
        in result.stdout
