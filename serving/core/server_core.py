"""ServerCore: the model lifecycle built from the model config, kept in step with reloads.

    FileSystemSource --aspired versions--> AspiredVersionsManager --handles--> request layer
                                             (loader: SavedModel + warmup)

The core is what the transports talk to: it is a ``ServableManager`` (lookups and states go to
the manager) and it answers readiness. It never waits for models: the server answers as soon as
it is up, and readiness turns true once every configured model has an AVAILABLE version.
Version labels follow TensorFlow Serving's rules and are checked before a config is applied, so
a rejected config changes nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from runtime.errors import FailedPreconditionError, InvalidArgumentError, UnavailableError
from serving.batching.params import BatchingParams, read_batching_parameters
from serving.batching.scheduler import SharedBatchScheduler
from serving.batching.session import BatchingServable
from serving.config import ModelConfig, ServerOptions
from serving.core.fs_source import FileSystemSource
from serving.core.lifecycle_log import LifecycleLog
from serving.core.manager import AspiredVersionsManager, VersionLoader
from serving.core.model_format import should_retry_load, tflite_passed_over, unservable_model
from serving.core.remote_mirror import RemoteMirrors
from serving.core.settle import TFLITE_MODEL_FILE
from serving.core.state_monitor import ServableStateMonitor
from serving.servable import (
    PlainServable,
    Servable,
    ServableHandle,
    ServableId,
    ServableRequest,
    ServableState,
)
from serving.workers.weight_store import WeightStore

if TYPE_CHECKING:
    from runtime.saved_model import LoadedModel

log = logging.getLogger("graphserve")

PER_MODEL_BATCHING_FILE = "batching_params.pbtxt"  # in the version directory
# The thread pool's name when --enable_batching comes without a parameters file (upstream's).
DEFAULT_BATCH_THREAD_POOL = "model_server_batch_threads"


@dataclass(frozen=True)
class CoreOptions:
    tags: tuple[str, ...] = ("serve",)
    file_system_poll_wait_seconds: float = 1.0
    file_system_settle_seconds: float = 0.5
    file_system_watch: bool = True
    num_load_threads: int = 0
    max_num_load_retries: int = 5
    load_retry_interval_s: float = 60.0
    enable_model_warmup: bool = True
    num_request_iterations_for_warmup: int = 0  # 0: warmup's own default (1)
    allow_version_labels_for_unavailable_models: bool = False
    # --enable_batching: the server's batching parameters (None: no batching).
    batching: BatchingParams | None = None
    # --enable_per_model_batching_parameters: a version batches only with its own
    # batching_params.pbtxt; only the thread count comes from ``batching``.
    per_model_batching: bool = False
    # --prefer_tflite_model: only changes the error a TFLite-only version fails with.
    prefer_tflite_model: bool = False
    # Where versions on object storage are downloaded to ("" : a new temporary directory).
    model_cache_dir: str = ""
    # --workers: the run directory's weight store, where every worker maps one copy of each
    # version's large constants (None: a single process keeps its own).
    weight_store: Path | None = None

    @classmethod
    def from_server_options(cls, options: ServerOptions) -> CoreOptions:
        """Raises InvalidArgumentError for an unreadable or invalid batching parameters file."""
        batching = None
        if options.enable_batching:
            # Values are checked when a version loads (a bad value fails the load, as
            # upstream); only the shared thread pool's size must be right at start.
            batching = (
                read_batching_parameters(options.batching_parameters_file, validate=False)
                if options.batching_parameters_file
                else BatchingParams(thread_pool_name=DEFAULT_BATCH_THREAD_POOL)
            )
            if batching.num_batch_threads < 1:
                raise InvalidArgumentError(
                    f"num_batch_threads must be positive; was {batching.num_batch_threads}"
                )
        return cls(
            tags=options.tags,
            file_system_poll_wait_seconds=options.file_system_poll_wait_seconds,
            file_system_settle_seconds=options.file_system_settle_seconds,
            file_system_watch=options.file_system_watch,
            num_load_threads=options.num_load_threads,
            max_num_load_retries=options.max_num_load_retries,
            # TensorFlow Serving: a negative interval means no wait between attempts.
            load_retry_interval_s=max(options.load_retry_interval_micros, 0) / 1e6,
            enable_model_warmup=options.enable_model_warmup,
            num_request_iterations_for_warmup=options.num_request_iterations_for_warmup,
            allow_version_labels_for_unavailable_models=(
                options.allow_version_labels_for_unavailable_models
            ),
            batching=batching,
            per_model_batching=options.enable_per_model_batching_parameters,
            prefer_tflite_model=options.prefer_tflite_model,
        )


def _version_batching(options: CoreOptions, path: Path) -> BatchingParams | None:
    """The parameters a version batches with (None: it does not), as TensorFlow Serving picks
    them: the server's, or with per-model parameters only the version's own file."""
    if options.batching is None:
        return None
    if not options.per_model_batching:
        return options.batching.validated()
    own = path / PER_MODEL_BATCHING_FILE
    return read_batching_parameters(own) if own.exists() else None


def _check_model_format(id: ServableId, path: Path, *, prefer_tflite: bool) -> None:
    """Fail a version that holds a TensorFlow Lite model and no SavedModel, saying so."""
    try:
        names = set(os.listdir(path))
    except OSError:
        return  # the SavedModel loader reports what is wrong with the directory
    error = unservable_model(path, names, prefer_tflite=prefer_tflite)
    if error is not None:
        raise error
    if tflite_passed_over(names, prefer_tflite=prefer_tflite):
        log.warning(
            "--prefer_tflite_model: TensorFlow Lite models are not supported; serving %s from "
            "the SavedModel in %s, not its %s", id, path, TFLITE_MODEL_FILE,
        )


def saved_model_loader(
    options: CoreOptions,
    scheduler: SharedBatchScheduler | None = None,
    stopping: threading.Event | None = None,
) -> VersionLoader:
    """Loads one version from its directory, wraps it in the batcher when it batches, and
    replays its warmup requests (through the batcher, as upstream) before it is published; a
    warmup failure fails the load. Warmup stops once ``stopping`` is set (shutdown)."""

    store = WeightStore(options.weight_store) if options.weight_store is not None else None

    def load(id: ServableId, path: Path) -> Servable:
        from runtime.saved_model import load_saved_model
        from serving.core.warmup import run_warmup
        from serving.metrics.load_metrics import timed_load, timed_warmup

        _check_model_format(id, path, prefer_tflite=options.prefer_tflite_model)
        params = _version_batching(options, path) if scheduler is not None else None
        loaded = timed_load(path, lambda: load_saved_model(path, options.tags))
        if store is not None:
            _share_weights(store, loaded, id)
        model: Servable
        if params is not None:
            assert scheduler is not None
            model = BatchingServable(loaded, scheduler, params, f"{id.name}/{id.version}")
        else:
            model = PlainServable(loaded)
        if options.enable_model_warmup:
            try:
                timed_warmup(path, lambda: run_warmup(
                    model, path, model_name=id.name, version=id.version,
                    iterations=options.num_request_iterations_for_warmup or 1,
                    stop=stopping,
                ))
            except BaseException:
                model.close()
                raise
        return model

    return load


def _share_weights(store: WeightStore, loaded: LoadedModel, id: ServableId) -> None:
    """Serve the version's large constants from the workers' store; a store that cannot be
    used leaves them private (more memory, same answers)."""
    try:
        shared = store.share(loaded)
    except OSError as err:
        log.warning("Weight store unusable for %s, its weights stay private: %s", id, err)
        return
    log.info(
        "%s: %d constants (%.1f MB) served from the workers' shared weight store%s", id,
        shared.constants, shared.bytes / 1e6,
        f"; {shared.private} kept private" if shared.private else "",
    )


class ServerCore:
    """Sources, manager and labels for every configured model. Thread-safe."""

    def __init__(self, options: CoreOptions, loader: VersionLoader | None = None) -> None:
        self.options = options
        self.monitor = ServableStateMonitor()
        self.monitor.add_listener(LifecycleLog())  # a log line per state change
        self._stopping = threading.Event()  # set once shutdown begins: warmups stop
        # One pool of batch threads for every model that batches, as upstream.
        self.batch_scheduler = (
            SharedBatchScheduler(options.batching.num_batch_threads, thread_name_prefix="batch")
            if options.batching is not None
            else None
        )
        self.manager = AspiredVersionsManager(
            loader or saved_model_loader(options, self.batch_scheduler, self._stopping),
            self.monitor,
            num_load_threads=options.num_load_threads,
            max_num_load_retries=options.max_num_load_retries,
            load_retry_interval_s=options.load_retry_interval_s,
            should_retry_model_load=should_retry_load,
        )
        self.source = FileSystemSource(
            self.manager.set_aspired_versions,
            poll_wait_seconds=options.file_system_poll_wait_seconds,
            settle_seconds=options.file_system_settle_seconds,
            use_watchdog=options.file_system_watch,
            on_unservable=self.manager.report_unservable,
        )
        # Versions on object storage are downloaded here; a temporary directory of ours unless
        # one is given, removed at close.
        self._own_cache = (
            None if options.model_cache_dir else Path(tempfile.mkdtemp(prefix="graphserve-models-"))
        )
        self.mirrors = RemoteMirrors(
            self._own_cache or Path(options.model_cache_dir),
            options.file_system_poll_wait_seconds,
            on_unservable=self.manager.report_unservable,
        )
        self._reload_lock = threading.Lock()
        self._configs: dict[str, ModelConfig] = {}
        self._started = False

    # -- configuration ----------------------------------------------------------------------

    def reload_config(self, configs: Sequence[ModelConfig]) -> None:
        """Apply a model list: it replaces the previous one (models absent are unloaded).
        Raises FailedPreconditionError, changing nothing, when a label is not allowed, and
        UnavailableError once shutdown has begun."""
        with self._reload_lock:
            if self._stopping.is_set():
                raise UnavailableError("The server is shutting down; the model config is kept")
            labels = {c.name: self._checked_labels(c) for c in configs}
            removed = [name for name in self._configs if name not in labels]
            self._configs = {c.name: c for c in configs}
            for name in removed:
                self.manager.set_version_labels(name, {})
            for name, model_labels in labels.items():
                self.manager.set_version_labels(name, model_labels)
            self.source.set_models(self.mirrors.localize(configs))
            if not self._started:
                self.source.start()
                self._started = True
        log.info("Model config applied: %s", ", ".join(sorted(labels)) or "(no models)")

    def _checked_labels(self, config: ModelConfig) -> dict[str, int]:
        """TensorFlow Serving's label rule: a label must name an AVAILABLE version; with
        --allow_version_labels_for_unavailable_models a new or unchanged label may name one
        that is not available yet, but an existing label still cannot move to one."""
        current = self.manager.version_labels(config.name)
        available = set(self.manager.available_versions(config.name))
        for label, version in config.version_labels.items():
            if version in available:
                continue
            unchanged_or_new = current.get(label, version) == version
            if self.options.allow_version_labels_for_unavailable_models and unchanged_or_new:
                continue
            raise FailedPreconditionError(
                f"Request to assign label to version {version} of model {config.name}, which "
                "is not currently available for inference"
            )
        return dict(config.version_labels)

    def configs(self) -> Mapping[str, ModelConfig]:
        return dict(self._configs)

    # -- ServableManager ----------------------------------------------------------------------

    def handle(self, request: ServableRequest) -> ServableHandle:
        return self.manager.handle(request)

    def version_states(self, name: str) -> list[ServableState]:
        return self.manager.version_states(name)

    def model_names(self) -> list[str]:
        return self.manager.model_names()

    # -- readiness ------------------------------------------------------------------------------

    def readiness(self) -> list[str]:
        """Configured models that have no AVAILABLE version yet ([] = ready)."""
        return [n for n in sorted(self._configs) if not self.manager.available_versions(n)]

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        return self.monitor.wait_for(lambda _: not self.readiness(), timeout)

    def draining(self) -> bool:
        """Whether shutdown has begun: the server is not ready, whatever its models are."""
        return self._stopping.is_set()

    def begin_shutdown(self) -> None:
        """The first step of the drain: stop watching for versions, stop warmups and abandon
        the loads in progress; the versions serving keep serving until ``close``."""
        self._stopping.set()
        self.source.close()
        self.manager.abandon_loads()

    def close(self) -> None:
        """Stop watching, then unload every version (in-flight requests finish first); loads
        still running a few seconds on are abandoned."""
        self._stopping.set()
        self.source.close()
        self.manager.close()
        self.mirrors.close()  # after the unloads: removes the downloaded copies
        if self._own_cache is not None:
            shutil.rmtree(self._own_cache, ignore_errors=True)
        if self.batch_scheduler is not None:
            self.batch_scheduler.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
