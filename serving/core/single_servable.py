"""A ServableManager over one loaded version that no manager has published yet.

Warmup replays requests through the ordinary request layer, which looks models up through a
``ServableManager``; this one answers for exactly one (name, version) and nothing else, so a
version can be exercised while it is still LOADING. The caller owns the servable: handles pin
nothing and ``close`` is never called here.
"""

from __future__ import annotations

from runtime.errors import InvalidArgumentError, NotFoundError
from serving.servable import (
    ManagerState,
    Servable,
    ServableHandle,
    ServableId,
    ServableRequest,
    ServableState,
)


class SingleServableManager:
    """Resolves the latest or the exact version of one model to one servable. Thread-safe
    (it holds no mutable state)."""

    def __init__(self, id: ServableId, servable: Servable) -> None:
        self.id = id
        self.servable = servable

    def handle(self, request: ServableRequest) -> ServableHandle:
        if request.label is not None:
            # No labels exist for a version that is not published yet.
            raise InvalidArgumentError(f"Unrecognized servable version label: {request.label}")
        if request.name != self.id.name or request.version not in (None, self.id.version):
            raise NotFoundError(f"Servable not found for request: {request}")
        return ServableHandle(self.id, self.servable)

    def version_states(self, name: str) -> list[ServableState]:
        if name != self.id.name:
            return []
        return [ServableState(self.id, ManagerState.LOADING)]

    def model_names(self) -> list[str]:
        return [self.id.name]
