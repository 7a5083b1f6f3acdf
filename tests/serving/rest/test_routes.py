"""REST path parsing, TensorFlow Serving's regexes and quirks included."""

from __future__ import annotations

import pytest

from runtime.errors import InvalidArgumentError
from serving.rest.routes import API_PATH, Route, parse_route


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [
        ("POST", "/v1/models/m:predict", Route("predict", "m")),
        ("POST", "/v1/models/m/versions/12:predict", Route("predict", "m", 12)),
        ("POST", "/v1/models/m/labels/stable:regress", Route("regress", "m", None, "stable")),
        ("POST", "/V1/MODELS/m:classify", Route("classify", "m")),
        ("POST", "/v1/models/my%20model:predict", Route("predict", "my model")),
        ("GET", "/v1/models/m", Route("status", "m")),
        ("GET", "/v1/models/m/versions/007", Route("status", "m", 7)),
        ("GET", "/v1/models/m/labels/l", Route("status", "m", None, "l")),
        ("GET", "/v1/models/m/metadata", Route("metadata", "m")),
        ("GET", "/v1/models/m/versions/3/metadata", Route("metadata", "m", 3)),
        # The regex is case-insensitive, the subresource check is not: a status request.
        ("GET", "/v1/models/m/METADATA", Route("status", "m")),
    ],
)
def test_routes(method: str, path: str, route: Route) -> None:
    assert parse_route(method, path) == route


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/models/m/metadata"),
        ("POST", "/v1/models/m:Predict"),
        ("POST", "/v1/models/m/versions/abc:predict"),
        ("POST", "/v1/models/m/label/l:regress"),
        ("POST", "/v1/models/m/versions/50/labels/l:regress"),
        ("PUT", "/v1/models/m"),
        ("DELETE", "/v1/models/m:predict"),
        ("HEAD", "/v1/models/m"),
        ("GET", "/v1/models/m:predict"),
        ("GET", "/v1/models/m/versions/1/labels/x"),
    ],
)
def test_malformed_requests(method: str, path: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse_route(method, path)
    assert info.value.message == f"Malformed request: {method} {path}"


def test_bare_models_path_lists_models() -> None:
    assert parse_route("GET", "/v1/models") == Route("models", "")
    assert parse_route("GET", "/V1/Models") == Route("models", "")


@pytest.mark.parametrize(
    "path", ["/v1/models/versions/3", "/v1/models/labels/l", "/v1/models/versions/3/metadata"]
)
def test_missing_model_name(path: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^Missing model name in request\.$"):
        parse_route("GET", path)


def test_models_path_takes_only_get() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^Malformed request: POST /v1/models$"):
        parse_route("POST", "/v1/models")


def test_version_beyond_int64() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse_route("GET", "/v1/models/m/versions/99999999999999999999")
    assert info.value.message == "Failed to convert version: 99999999999999999999 to numeric."


def test_api_prefix_is_case_insensitive() -> None:
    assert API_PATH.fullmatch("/V1/anything")
    assert not API_PATH.fullmatch("/v2/models/m")
    assert not API_PATH.fullmatch("/")
