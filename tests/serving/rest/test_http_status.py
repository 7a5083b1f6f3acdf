"""Status codes map to HTTP as TensorFlow Serving's ToHTTPStatusCode maps them."""

from __future__ import annotations

import pytest

from runtime.errors import Code
from serving.rest.http_status import http_status

# model_servers/http_server.cc: every code, and the 500 default.
UPSTREAM = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}


@pytest.mark.parametrize("code", list(Code), ids=[c.name for c in Code])
def test_every_code_maps_as_upstream(code: Code) -> None:
    assert http_status(code) == UPSTREAM.get(code.name, 500)
