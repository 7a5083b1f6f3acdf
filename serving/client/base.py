"""What both transports' clients promise, and the argument checks they share.

Contract (``GrpcClient`` and ``RestClient`` alike):

* ``version`` picks a version number, ``label`` a version label; neither means the latest
  available version; both is refused before anything is sent.
* ``signature_name`` None means the server's default (``serving_default``).
* ``timeout`` is in seconds for that call; None means the client's default (30 s unless set
  when the client was made). A call still unanswered then raises ``DeadlineExceededError``.
* Every failure is a ``ServingError`` subclass naming the status code and carrying the
  server's message; see ``serving.client.errors``.
* Clients are safe to share between threads and should be closed (or used as context
  managers) to release their connections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from serving.client.errors import InvalidArgumentError
from serving.client.examples import ExampleLike
from serving.client.results import VersionStatus

DEFAULT_TIMEOUT_S = 30.0


def check_selection(model: str, version: int | None, label: str | None) -> None:
    if not model:
        raise InvalidArgumentError("ModelSpec has no name specified.")
    if version is not None and label is not None:
        raise InvalidArgumentError(
            f"Both model version ({version}) and model version label ({label}) cannot be supplied."
        )
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise InvalidArgumentError(f"a model version is an integer, not {version!r}")


def check_timeout(timeout: float | None, default: float) -> float:
    value = default if timeout is None else timeout
    if not value > 0:
        raise InvalidArgumentError(f"a timeout is a positive number of seconds, not {value!r}")
    return float(value)


class ServingClient(Protocol):
    def predict(
        self,
        model: str,
        inputs: Mapping[str, Any],
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        output_filter: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, np.ndarray]: ...

    def classify(
        self,
        model: str,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None = None,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> list[list[tuple[str, float]]]: ...

    def regress(
        self,
        model: str,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None = None,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> list[float]: ...

    def get_model_status(
        self,
        model: str,
        version: int | None = None,
        label: str | None = None,
        *,
        timeout: float | None = None,
    ) -> list[VersionStatus]: ...

    def get_model_metadata(
        self,
        model: str,
        version: int | None = None,
        label: str | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...

    def reload_config(self, models: Iterable[Any], *, timeout: float | None = None) -> None: ...

    def close(self) -> None: ...
