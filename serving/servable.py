"""What the request layer needs from whatever owns the loaded models.

``ServableManager`` is the lookup interface the request layer and the transports use; the
``AspiredVersionsManager`` (behind ``ServerCore``) implements it, and so does the one-version
manager warmup replays against. Its contract:

* ``handle(request)`` resolves (name, latest | version | label) to a ``ServableHandle`` that
  keeps that version loaded until released (use it as a context manager). Unknown model or
  version: ``NotFoundError("Servable not found for request: Latest(m)")`` /
  ``...Specific(m, v)``; unknown label: ``InvalidArgumentError("Unrecognized servable version
  label: l")``. Thread-safe; never blocks on loading.
* ``version_states(name)``: every version the manager has known for that model (END ones
  included, as TensorFlow Serving's state monitor keeps them), newest first; empty if none.
* ``model_names()``: every model the manager has known, sorted.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Self

from runtime.errors import Code, OpError

if TYPE_CHECKING:
    from runtime.saved_model import LoadedModel


class ManagerState(enum.IntEnum):
    """A version's lifecycle state; numbers are ModelVersionStatus.State's."""

    START = 10
    LOADING = 20
    AVAILABLE = 30
    UNLOADING = 40
    END = 50


@dataclass(frozen=True, order=True)
class ServableId:
    name: str
    version: int

    def __str__(self) -> str:
        return f"{{name: {self.name} version: {self.version}}}"


@dataclass(frozen=True)
class ServableState:
    """The latest known state of one version; ``error`` is its health (None = OK)."""

    id: ServableId
    state: ManagerState
    error: OpError | None = None

    @property
    def error_code(self) -> Code:
        return Code.OK if self.error is None else self.error.code

    @property
    def error_message(self) -> str:
        return "" if self.error is None else self.error.message


@dataclass(frozen=True)
class ServableRequest:
    """Which version of a model: the latest (both None), a number, or a label."""

    name: str
    version: int | None = None
    label: str | None = None

    def __str__(self) -> str:
        # TensorFlow Serving's ServableRequest::DebugString (labels are resolved before this).
        if self.version is None:
            return f"Latest({self.name})"
        return f"Specific({self.name}, {self.version})"


class ServableHandle:
    """Keeps one loaded version alive while a request uses it."""

    def __init__(
        self, id: ServableId, servable: LoadedModel, release: Callable[[], None] | None = None
    ) -> None:
        self.id = id
        self.servable = servable
        # At most one entry; list.pop is atomic, so two threads releasing at once release once
        # (no lock to make per request).
        self._release: list[Callable[[], None]] = [] if release is None else [release]

    def release(self) -> None:
        try:
            release = self._release.pop()
        except IndexError:  # released already (or nothing to release)
            return
        release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ServableManager(Protocol):
    def handle(self, request: ServableRequest) -> ServableHandle: ...

    def version_states(self, name: str) -> list[ServableState]: ...

    def model_names(self) -> list[str]: ...
