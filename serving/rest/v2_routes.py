"""The Open Inference Protocol's (KServe v2) REST paths: which API a ``/v2`` path names.

    GET  /v2                                         server metadata
    GET  /v2/health/live | /v2/health/ready          server liveness, readiness
    GET  /v2/models/{name}[/versions/{v}]            model metadata
    GET  /v2/models/{name}[/versions/{v}]/ready      model readiness
    POST /v2/models/{name}[/versions/{v}]/infer      inference

Paths are case-sensitive, as Triton's. ``{v}``: digits name a version, anything else a version
label, none the latest. Names and versions are percent-decoded after matching. Any other path
under ``/v2`` is NOT_FOUND; a known path with another method is answered 405 by the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from runtime.errors import NotFoundError

_MODEL = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?(?:/(ready|infer))?")
_SERVER = {
    "/v2": "server_metadata",
    "/v2/": "server_metadata",
    "/v2/health/live": "live",
    "/v2/health/ready": "ready",
}
_GET = ("GET", "HEAD")
_POST = ("POST",)


def is_v2_path(path: bytes) -> bool:
    return path == b"/v2" or path.startswith(b"/v2/")


@dataclass(frozen=True)
class V2Route:
    api: str  # server_metadata | live | ready | model_metadata | model_ready | infer
    model_name: str = ""
    version: str = ""  # "" (the latest), a number, or a label

    @property
    def methods(self) -> tuple[str, ...]:
        return _POST if self.api == "infer" else _GET


def _decode(part: str) -> str:
    return unquote(part, encoding="utf-8", errors="surrogateescape")


def parse_v2_route(path: str) -> V2Route:
    """The API ``path`` names; NotFoundError for any other path."""
    server_api = _SERVER.get(path)
    if server_api is not None:
        return V2Route(server_api)
    match = _MODEL.fullmatch(path)
    if match is None:
        raise NotFoundError(f"unknown path {path}: not an API of the Open Inference Protocol")
    name, version, verb = match.groups()
    api = {"ready": "model_ready", "infer": "infer"}.get(verb or "", "model_metadata")
    return V2Route(api, _decode(name), _decode(version) if version else "")
