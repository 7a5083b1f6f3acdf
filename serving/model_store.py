"""The static model store: loads each model's aspired versions once, at start-up.

It implements ``serving.servable.ServableManager`` (lookups, version states), the interface
the version-watching manager will implement too. Loading is sequential and records every
version's state (LOADING, then AVAILABLE or END with the load error), so the status API can
report failures; ``start_up`` then refuses to serve when any version failed, as TensorFlow
Serving does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    UnknownError,
)
from serving.config import ModelConfig
from serving.servable import (
    ManagerState,
    ServableHandle,
    ServableId,
    ServableRequest,
    ServableState,
)
from serving.storage_path import aspired_versions, list_versions

if TYPE_CHECKING:
    from runtime.saved_model import LoadedModel

log = logging.getLogger("graphserve")

Loader = Callable[[Path, tuple[str, ...]], "LoadedModel"]


def load_saved_model_version(path: Path, tags: tuple[str, ...]) -> LoadedModel:
    from runtime.saved_model import load_saved_model

    return load_saved_model(path, tags)


class ModelStore:
    """Loaded versions by model, their states and version labels. Thread-safe."""

    def __init__(self, loader: Loader = load_saved_model_version) -> None:
        self._loader = loader
        self._lock = threading.Lock()
        self._servables: dict[str, dict[int, LoadedModel]] = {}
        self._states: dict[str, dict[int, ServableState]] = {}
        self._labels: dict[str, dict[str, int]] = {}

    # -- ServableManager ------------------------------------------------------------------

    def handle(self, request: ServableRequest) -> ServableHandle:
        with self._lock:
            version = request.version
            if request.label is not None:
                version = self._labels.get(request.name, {}).get(request.label)
                if version is None:
                    raise InvalidArgumentError(
                        f"Unrecognized servable version label: {request.label}"
                    )
                request = ServableRequest(request.name, version)
            versions = self._servables.get(request.name, {})
            if version is None and versions:
                version = max(versions)
            if version is None or version not in versions:
                raise NotFoundError(f"Servable not found for request: {request}")
            # Nothing unloads while serving, so there is nothing to pin; the watching manager
            # will hand out counted handles here.
            return ServableHandle(ServableId(request.name, version), versions[version])

    def version_states(self, name: str) -> list[ServableState]:
        with self._lock:
            states = self._states.get(name, {})
            return [states[v] for v in sorted(states, reverse=True)]

    def model_names(self) -> list[str]:
        with self._lock:
            return sorted(self._states)

    # -- loading --------------------------------------------------------------------------

    def _set_state(self, state: ServableState) -> None:
        with self._lock:
            self._states.setdefault(state.id.name, {})[state.id.version] = state

    def load_version(self, id: ServableId, path: Path, tags: tuple[str, ...]) -> ServableState:
        """Load one version; a failure becomes its END state, never an exception."""
        self._set_state(ServableState(id, ManagerState.LOADING))
        try:
            servable = self._loader(path, tags)
        except OpError as err:
            state = ServableState(id, ManagerState.END, err)
            log.error("Loading servable: %s failed: %s", id, err)
        except Exception as err:  # a bug or an unexpected file: keep serving the others
            log.exception("Loading servable: %s failed", id)
            error = UnknownError(f"{type(err).__name__}: {err}")
            state = ServableState(id, ManagerState.END, error)
        else:
            with self._lock:
                self._servables.setdefault(id.name, {})[id.version] = servable
            state = ServableState(id, ManagerState.AVAILABLE)
            log.info("Successfully loaded servable version %s", id)
        self._set_state(state)
        return state

    def load_model(self, config: ModelConfig, tags: tuple[str, ...]) -> list[ServableState]:
        """Load the versions ``config``'s policy wants; returns their states."""
        versions = list_versions(config.name, config.base_path)
        wanted = aspired_versions(config.version_policy, versions)
        if not wanted:
            log.warning(
                "No versions of servable %s found under base path %s. Did you forget to name "
                "your leaf directory as a number (eg. '/1/')?", config.name, config.base_path
            )
        return [
            self.load_version(ServableId(config.name, v), versions[v], tags) for v in wanted
        ]

    def set_labels(self, config: ModelConfig, allow_unavailable: bool = False) -> None:
        for version in config.version_labels.values():
            state = self._states.get(config.name, {}).get(version)
            available = state is not None and state.state == ManagerState.AVAILABLE
            if not available and not allow_unavailable:
                raise FailedPreconditionError(
                    f"Request to assign label to version {version} of model {config.name}, "
                    "which is not currently available for inference"
                )
        with self._lock:
            self._labels[config.name] = dict(config.version_labels)

    def close(self) -> None:
        with self._lock:
            servables, self._servables = self._servables, {}
            for name, versions in servables.items():
                for version in versions:
                    self._states[name][version] = ServableState(
                        ServableId(name, version), ManagerState.END
                    )
        for versions in servables.values():
            for servable in versions.values():
                servable.close()


def start_up(
    configs: Sequence[ModelConfig],
    tags: Iterable[str],
    *,
    allow_labels_for_unavailable: bool = False,
    loader: Loader = load_saved_model_version,
) -> ModelStore:
    """Load every configured model; raise if any version failed or a model has none."""
    store = ModelStore(loader)
    tags = tuple(tags)
    failed: list[ServableState] = []
    empty: list[ModelConfig] = []
    for config in configs:
        states = store.load_model(config, tags)
        failed += [s for s in states if s.state != ManagerState.AVAILABLE]
        if not states:
            empty.append(config)
    if failed:
        store.close()
        entries = "".join(
            f"{{{s.id} due to error: {s.error_code.name}: {s.error_message}}}, " for s in failed
        )
        raise UnknownError(f"{len(failed)} model(s) did not become available: {{{entries}}}")
    if empty:
        # TensorFlow Serving would wait for a version to appear; without a watcher that wait
        # could never end, so say what is missing instead.
        store.close()
        names = ", ".join(f"{c.name} (base path {c.base_path})" for c in empty)
        raise NotFoundError(f"No versions found for model(s): {names}")
    try:
        for config in configs:
            store.set_labels(config, allow_labels_for_unavailable)
    except OpError:
        store.close()
        raise
    return store
