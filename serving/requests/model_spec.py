"""ModelSpec: which model, which version (number or label), which signature."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.errors import InvalidArgumentError
from serving.servable import ServableRequest


@dataclass(frozen=True)
class ModelSpec:
    name: str
    version: int | None = None
    version_label: str | None = None
    signature_name: str = ""

    def servable_request(self) -> ServableRequest:
        # Made once per spec: a transport that keeps its specs (REST does, per route) asks
        # for it on every request.
        cached: ServableRequest | None = self.__dict__.get("_servable_request")
        if cached is not None:
            return cached
        if not self.name:
            raise InvalidArgumentError("ModelSpec has no name specified.")
        if self.version is not None and self.version_label is not None:
            raise InvalidArgumentError(
                f"Both model version ({self.version}) and model version label "
                f"({self.version_label}) cannot be supplied."
            )
        request = ServableRequest(self.name, self.version, self.version_label)
        self.__dict__["_servable_request"] = request
        return request
