"""Beyond TensorFlow Serving's API: GET /v1/models, GET /healthz and GET /readyz."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from runtime.errors import NotFoundError, UnknownError
from serving.rest.app import RestOptions, create_app
from serving.servable import (
    ManagerState,
    ServableHandle,
    ServableId,
    ServableRequest,
    ServableState,
)
from tests.serving.rest.server_process import ServerProcess

JSON = "application/json"
CORS = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "POST, GET",
    "access-control-allow-headers": "Content-Type",
}


def test_models_lists_every_model_with_its_versions(two_models: ServerProcess) -> None:
    response = two_models.client.get("/v1/models")
    assert response.status_code == 200 and response.headers["content-type"] == JSON
    available = [{"version": v, "state": "AVAILABLE",
                  "status": {"error_code": "OK", "error_message": ""}} for v in ("123", "1")]
    assert response.json() == {"models": [
        {"name": "half_plus_two", "model_version_status": available[:1]},
        {"name": "mlp_classifier", "model_version_status": available[1:]},
    ]}
    # Each entry says what the model's own status request says.
    status = two_models.client.get("/v1/models/half_plus_two").json()
    assert response.json()["models"][0]["model_version_status"] == status["model_version_status"]
    assert two_models.client.get("/V1/MODELS").json() == response.json()


def test_probes_on_a_serving_daemon(two_models: ServerProcess) -> None:
    live = two_models.client.get("/healthz")
    assert live.status_code == 200 and live.headers["content-type"] == JSON
    assert live.json() == {"status": "alive"}
    ready = two_models.client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    head = two_models.client.head("/readyz")
    assert head.status_code == 200 and head.content == b""
    # The probes are exact paths outside /v1/.
    assert two_models.client.get("/healthz/x").status_code == 404
    assert two_models.client.get("/v1/healthz").json() == {
        "error": "Malformed request: GET /v1/healthz"
    }


class _Manager:
    """Versions by model, as a manager reports them mid-start-up."""

    def __init__(self, states: dict[str, list[ServableState]]) -> None:
        self.states = states

    def handle(self, request: ServableRequest) -> ServableHandle:
        raise NotFoundError(f"Servable not found for request: {request}")

    def version_states(self, name: str) -> list[ServableState]:
        return self.states.get(name, [])

    def model_names(self) -> list[str]:
        return sorted(self.states)


def _requests(
    readiness: Callable[[], list[str]], requests: list[tuple[str, str]], cors: bool = False
) -> list[httpx.Response]:
    """Send ``(method, path)`` requests to an in-process app (no daemon: the manager's states
    and the readiness answer are made up here)."""
    loading = ServableState(ServableId("a", 2), ManagerState.LOADING)
    failed = ServableState(ServableId("a", 1), ManagerState.END,
                           UnknownError("Could not load it"))
    manager = _Manager({"a": [loading, failed], "b": []})
    app = create_app(manager, RestOptions(num_threads=1, enable_cors=cors), readiness)

    async def send() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [await client.request(method, path) for method, path in requests]

    try:
        return asyncio.run(send())
    finally:
        app.close()


def _get(readiness: Callable[[], list[str]], *paths: str, **kw: Any) -> list[httpx.Response]:
    return _requests(readiness, [("GET", path) for path in paths], **kw)


def test_not_ready_lists_the_models_without_an_available_version() -> None:
    response, live = _get(lambda: ["b", "a"], "/readyz", "/healthz")
    assert response.status_code == 503 and response.headers["content-type"] == JSON
    assert response.text == (
        '{\n "status": "not ready",\n "models_not_ready": [\n  "a",\n  "b"\n ]\n}\n'
    )
    assert live.status_code == 200  # alive all the same


def test_models_shows_loading_failed_and_empty_models() -> None:
    (response,) = _get(lambda: ["a", "b"], "/v1/models")
    assert response.status_code == 200
    assert response.text == (
        '{\n "models": [\n  {\n   "name": "a",\n   "model_version_status": [\n'
        '    {\n     "version": "2",\n     "state": "LOADING",\n     "status": {\n'
        '      "error_code": "OK",\n      "error_message": ""\n     }\n    },\n'
        '    {\n     "version": "1",\n     "state": "END",\n     "status": {\n'
        '      "error_code": "UNKNOWN",\n      "error_message": "Could not load it"\n'
        "     }\n    }\n   ]\n  },\n"
        '  {\n   "name": "b",\n   "model_version_status": []\n  }\n ]\n}\n'
    )


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_probes_take_only_get(method: str) -> None:
    paths = ("/healthz", "/readyz")
    responses = _requests(list, [(method, path) for path in paths])
    for path, response in zip(paths, responses, strict=True):
        assert response.status_code == 405
        assert response.headers["allow"] == "GET, HEAD"
        assert response.json() == {"error": f"Method {method} not allowed on {path}"}


def test_a_failing_readiness_check_is_not_ready() -> None:
    def broken() -> list[str]:
        raise RuntimeError("monitor gone")

    (response,) = _get(broken, "/readyz")
    assert response.status_code == 503
    assert response.json() == {"error": "RuntimeError: monitor gone"}


def test_probes_carry_cors_headers_when_enabled() -> None:
    for response in _get(list, "/healthz", "/readyz", "/v1/models", cors=True):
        assert {k: response.headers.get(k) for k in CORS} == CORS
