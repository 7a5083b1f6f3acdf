"""TensorFlow Serving's REST paths: which API a (method, path) names.

Everything under ``/v1/`` (any case) belongs to the API; what does not parse is a 400
``Malformed request: <METHOD> <path>``. Quirks kept on purpose: the regexes are
case-insensitive but the verb must then be exactly ``predict``/``classify``/``regress`` and the
subresource exactly ``metadata`` (``GET .../METADATA`` is a status request); names and labels
are percent-decoded after matching. One addition: a bare ``GET /v1/models`` lists the models
(TensorFlow Serving answers 400 "Missing model name in request." there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from runtime.errors import InvalidArgumentError

API_PATH = re.compile(r"/v1/.*", re.IGNORECASE | re.DOTALL)
_VERSION_OR_LABEL = r"(?:(?:/versions/([0-9]+))|(?:/labels/([^/:]+)))?"
_PREDICTION = re.compile(
    r"/v1/models/([^/:]+)" + _VERSION_OR_LABEL + r":(classify|regress|predict)", re.IGNORECASE
)
_STATUS = re.compile(
    r"/v1/models(?:/([^/:]+))?" + _VERSION_OR_LABEL + r"(?:/(metadata))?", re.IGNORECASE
)
VERBS = ("classify", "regress", "predict")


@dataclass(frozen=True)
class Route:
    api: str  # "predict" | "classify" | "regress" | "status" | "metadata" | "models"
    model_name: str
    version: int | None = None
    label: str | None = None


def _decode(part: str) -> str:
    return unquote(part, encoding="utf-8", errors="surrogateescape")


def parse_route(method: str, path: str) -> Route:
    """The API a request names; raises InvalidArgumentError for anything else."""
    malformed = InvalidArgumentError(f"Malformed request: {method} {path}")
    if method == "POST":
        match = _PREDICTION.fullmatch(path)
        if match is None or match.group(4) not in VERBS:
            raise malformed
        api = match.group(4)
    elif method == "GET":
        match = _STATUS.fullmatch(path)
        if match is None:
            raise malformed
        api = "metadata" if match.group(4) == "metadata" else "status"
    else:
        raise malformed
    name, version, label = match.group(1), match.group(2), match.group(3)
    if not name:
        if api == "status" and version is None and label is None:
            return Route("models", "")  # the model list, beyond TensorFlow Serving's API
        raise InvalidArgumentError("Missing model name in request.")
    number = int(version) if version else None
    if number is not None and number >= 2**63:
        raise InvalidArgumentError(f"Failed to convert version: {version} to numeric.")
    return Route(api, _decode(name), number, _decode(label) if label else None)
