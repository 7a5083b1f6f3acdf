"""File-system source: each model's complete aspired-version list, from its base path.

TensorFlow Serving's FileSystemStoragePathSource, with three changes:

* a version directory is only aspired once it is complete and quiet (``settle.py``), so a model
  copied in file by file is never loaded half-written, and with ``latest`` the previous version
  stays aspired until its successor is whole;
* watchdog events make changes visible at once; polling every ``poll_wait_seconds`` stays as the
  fallback and safety net (events can be lost, watches can fail to start);
* a missing base path only affects its own model: the others are still scanned and emitted;
* a version directory that cannot be loaded as it stands (a dangling symlink, a loop, required
  files that never come) is reported to ``on_unservable`` with the reason, so it shows in the
  status API, and each aspired version carries its directory's identity, so a directory replaced
  in place under the same number reaches the manager as new content.

Threads and ordering: scans (the poll thread, watchdog-triggered rescans, ``scan()`` and
``set_models()``) are serialized by one lock, and the callback is called under it, so the calls
for one model are never concurrent and always in the order the scans happened. The callback must
not call back into the source. Watchdog events only mark a model for a rescan; they never scan.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runtime.errors import InvalidArgumentError
from serving.config import LatestVersions, ModelConfig, SpecificVersions
from serving.core.aspired import AspiredVersion, AspiredVersionsCallback, UnservableCallback
from serving.core.fs_watch import BasePathWatches
from serving.core.settle import Fault, Identity, Readiness, SettleTracker
from serving.storage_path import aspired_versions, list_versions

log = logging.getLogger("graphserve")

# A copy raises a burst of events; rescanning this long after the first one lets a single scan
# see most of the burst.
EVENT_DELAY_SECONDS = 0.05

@dataclass
class _Model:
    config: ModelConfig
    settle: SettleTracker
    emitted: tuple[AspiredVersion, ...] | None = None
    # What has been logged already, so a state that persists is reported once, not every poll.
    base_missing: bool = False
    no_versions: bool = False
    missing_specific: frozenset[int] = frozenset()
    waiting: dict[int, str] = field(default_factory=dict)
    reported: dict[int, Fault] = field(default_factory=dict)  # unservable versions told of


class FileSystemSource:
    """Watches each configured model's base path and reports its aspired versions.

    ``poll_wait_seconds`` > 0: poll that often and react to watchdog events; 0: scan once at
    ``start()`` (plus the rescans that let versions found then finish settling); < 0: never scan
    by itself (tests call ``scan()``). ``clock`` times the settle period.

    A model is only emitted for when its list changes. While its base path is missing, or while
    nothing it wants is complete yet but something is still being written, nothing is emitted
    for it, so whatever it serves keeps serving."""

    def __init__(
        self,
        callback: AspiredVersionsCallback,
        *,
        poll_wait_seconds: float = 1.0,
        settle_seconds: float = 0.5,
        use_watchdog: bool = True,
        clock: Callable[[], float] = time.monotonic,
        on_unservable: UnservableCallback | None = None,
    ) -> None:
        self._callback = callback
        self._on_unservable = on_unservable
        self._poll_wait = poll_wait_seconds
        self._settle_seconds = settle_seconds
        self._use_watchdog = use_watchdog
        self._clock = clock
        self._scan_lock = threading.Lock()
        self._models: dict[str, _Model] = {}  # config order; guarded by _scan_lock
        self._watches = BasePathWatches(self._on_fs_event, poll_wait_seconds)  # guarded by _scan_lock
        self._wake = threading.Condition()
        self._due: dict[str, float] = {}  # model -> clock time of a pending rescan; under _wake
        # Resolved base path -> model names, to route watchdog events; under _wake.
        self._routes: dict[str, tuple[str, ...]] = {}
        self._started = False
        self._closed = False
        self._thread: threading.Thread | None = None

    # -- public interface --------------------------------------------------------------------

    def set_models(self, configs: Sequence[ModelConfig]) -> None:
        """Replace the watched set. Removed models get an empty list (unload all); new and
        changed ones are scanned before this returns."""
        names = [config.name for config in configs]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique, got {names}")
        with self._scan_lock:
            models: dict[str, _Model] = {}
            changed: list[_Model] = []
            for config in configs:
                model = self._models.get(config.name)
                if model is None or model.config.base_path != config.base_path:
                    fresh = _Model(config, SettleTracker(self._settle_seconds, self._clock))
                    fresh.emitted = model.emitted if model is not None else None
                    model = fresh
                    changed.append(model)
                elif model.config != config:
                    model.config = config
                    changed.append(model)
                models[config.name] = model
            removed = [name for name in self._models if name not in models]
            self._models = models
            with self._wake:
                for name in removed:
                    self._due.pop(name, None)
            for name in removed:
                log.info("Servable %s is no longer configured; aspiring no versions", name)
                self._callback(name, [])
            for model in changed:
                self._scan_and_schedule(model)
            self._refresh_watches()

    def scan(self) -> None:
        """One synchronous pass over every model."""
        self._scan_pass(None)

    def start(self) -> None:
        """Scan every model once (before returning), then start the poll thread, and the
        watchdog observer when ``poll_wait_seconds`` > 0."""
        if self._closed:
            raise RuntimeError("FileSystemSource is closed")
        if self._started or self._poll_wait < 0:
            return
        self._started = True
        if self._poll_wait > 0 and self._use_watchdog:
            # Watches go up before the first scan so nothing written in between is missed.
            with self._scan_lock:
                if self._watches.start():
                    self._refresh_watches()
        self.scan()
        self._thread = threading.Thread(
            target=self._run, name="FileSystemSource_polling_thread", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the poll thread and the observer; idempotent."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._scan_lock:
            self._watches.stop()

    @property
    def watched_paths(self) -> list[str]:
        """Base paths with a live watchdog watch (introspection for logs and tests)."""
        with self._scan_lock:
            return self._watches.paths()

    # -- scanning ----------------------------------------------------------------------------

    def _scan_pass(self, names: Iterable[str] | None, *, contain_errors: bool = False) -> None:
        with self._scan_lock:
            selected = self._models if names is None else set(names)
            for name, model in self._models.items():
                if name not in selected:
                    continue
                if not contain_errors:
                    self._scan_and_schedule(model)
                    continue
                try:
                    self._scan_and_schedule(model)
                except Exception:
                    # The poll thread must outlive a failing callback; the list is not marked
                    # emitted, so the next scan tries again.
                    log.exception("Scanning servable %s failed", name)
            self._refresh_watches()

    def _refresh_watches(self) -> None:
        # Watches and event routes use the resolved path, so a symlinked base path is watched
        # where its files really change (and watched anew when the link is repointed).
        routes: dict[str, list[str]] = {}
        for name, model in self._models.items():
            routes.setdefault(os.path.realpath(model.config.base_path), []).append(name)
        with self._wake:
            self._routes = {path: tuple(names) for path, names in routes.items()}
        self._watches.sync(routes)

    def _scan_and_schedule(self, model: _Model) -> None:
        ready_at = self._scan_model(model)
        if ready_at is not None:
            # A version waiting only for quiet: look again the moment its settle time is up
            # rather than at the next poll.
            self._schedule(model.config.name, ready_at)

    def _scan_model(self, model: _Model) -> float | None:
        """Scan one model, emit its list if it changed; returns when a settling version of it
        will be complete if nothing changes (None when none is)."""
        config = model.config
        try:
            found = list_versions(config.name, config.base_path)
        except InvalidArgumentError as err:
            # Emit nothing: the versions already loaded keep serving until the path is back.
            if not model.base_missing:
                log.error("%s; will retry", err)
                model.base_missing = True
            else:
                log.debug("%s", err)
            return None
        if model.base_missing:
            log.info("Found base path %s for servable %s", config.base_path, config.name)
            model.base_missing = False
        model.settle.retain(found.values())
        complete, waiting, ready_at = self._complete_versions(model, found)
        self._log_findings(model, found, {v: r.reason for v, r in waiting.items()})
        self._report_unservable(model, found, waiting)
        wanted = aspired_versions(config.version_policy, complete)
        versions = tuple(AspiredVersion(v, found[v], complete[v]) for v in wanted)
        if not versions and waiting:
            # Nothing whole yet but something on its way: an empty list would unload what is
            # serving (a replaced directory, a changed base path) for no gain.
            return ready_at
        if versions != model.emitted:
            listed = ", ".join(str(v.version) for v in versions) or "none"
            log.info("Servable %s: aspired versions now [%s]", config.name, listed)
            self._callback(config.name, list(versions))
            model.emitted = versions
        return ready_at

    def _complete_versions(
        self, model: _Model, found: dict[int, Path]
    ) -> tuple[dict[int, Identity | None], dict[int, Readiness], float | None]:
        """The complete versions the policy could want (with their directories' identities), the
        incomplete ones it could want, and the earliest time one of those is to be looked at
        again. Checks highest first and stops once ``latest`` has enough, so old versions are
        not walked on every scan.

        A version already aspired stays so, as the directory it was, while its directory is
        there but not complete: being rewritten or broken under a loaded model does not unload
        it (removing it does)."""
        aspired = {v.version: v for v in model.emitted or ()}
        policy = model.config.version_policy
        candidates = sorted(found, reverse=True)
        if isinstance(policy, SpecificVersions):
            listed = set(policy.versions)
            candidates = [v for v in candidates if v in listed]
        limit = max(policy.num_versions, 1) if isinstance(policy, LatestVersions) else None
        complete: dict[int, Identity | None] = {}
        waiting: dict[int, Readiness] = {}
        ready_at: float | None = None
        for version in candidates:
            if limit is not None and len(complete) >= limit:
                break
            readiness = model.settle.check(found[version])
            if readiness.complete:
                complete[version] = readiness.identity
                continue
            waiting[version] = readiness
            before = aspired.get(version)
            if before is not None and before.path == found[version]:
                complete[version] = before.identity
            if readiness.ready_at is not None and (
                ready_at is None or readiness.ready_at < ready_at
            ):
                ready_at = readiness.ready_at
        return complete, waiting, ready_at

    def _report_unservable(
        self, model: _Model, found: dict[int, Path], waiting: dict[int, Readiness]
    ) -> None:
        """Tell of each version that became unservable, or whose fault changed, once; and of
        each that stopped being so while its directory is still there."""
        faults = {v: r.unservable for v, r in waiting.items() if r.unservable is not None}
        if self._on_unservable is not None:
            for version in sorted(model.reported.keys() - faults.keys()):
                if version in found:
                    self._on_unservable(model.config.name, version, None)
        for version, fault in sorted(faults.items()):
            if model.reported.get(version) == fault:
                continue
            name = model.config.name
            error = fault.error(
                f"Version {version} of servable {name} at {found[version]} cannot be loaded"
            )
            log.error("%s", error.message)
            if self._on_unservable is not None:
                self._on_unservable(name, version, error)
        model.reported = faults

    def _log_findings(self, model: _Model, found: dict[int, Path], waiting: dict[int, str]) -> None:
        config = model.config
        policy = config.version_policy
        if isinstance(policy, SpecificVersions):
            none_found = not any(v in found for v in policy.versions)
            missing = frozenset(policy.versions) - found.keys()
            for version in sorted(missing - model.missing_specific):
                log.warning(
                    "Version %d of servable %s, which was requested to be served as a 'specific' "
                    "version in the servable's version policy, was not found in the file system",
                    version,
                    config.name,
                )
            model.missing_specific = missing
        else:
            none_found = not found
        if none_found and not model.no_versions:
            log.warning(
                "No versions of servable %s found under base path %s. Did you forget to name "
                "your leaf directory as a number (eg. '/1/')?",
                config.name,
                config.base_path,
            )
        model.no_versions = none_found
        for version, reason in waiting.items():
            if version not in model.waiting:
                log.info(
                    "Version %d of servable %s at %s is not complete yet (%s); it will be aspired "
                    "once whole and unchanged for %gs",
                    version,
                    config.name,
                    found[version],
                    reason,
                    self._settle_seconds,
                )
            elif model.waiting[version] != reason:
                log.debug("Version %d of servable %s: %s", version, config.name, reason)
        model.waiting = waiting

    # -- the poll thread and events ----------------------------------------------------------

    def _schedule(self, name: str, at: float) -> None:
        with self._wake:
            self._due[name] = min(self._due.get(name, at), at)
            self._wake.notify()

    def _on_fs_event(self, paths: tuple[str, ...]) -> None:
        """Watchdog thread: mark the models whose base path holds ``paths`` for a rescan."""
        with self._wake:
            names = {
                name
                for base, names in self._routes.items()
                for path in paths
                if path and (path == base or path.startswith(os.path.join(base, "")))
                for name in names
            }
            at = self._clock() + EVENT_DELAY_SECONDS
            for name in names:
                self._due[name] = min(self._due.get(name, at), at)
            if names:
                self._wake.notify()

    def _run(self) -> None:
        # start() ran the first full scan.
        next_poll = self._clock() + self._poll_wait if self._poll_wait > 0 else None
        while True:
            with self._wake:
                while True:
                    if self._closed:
                        return
                    now = self._clock()
                    full = next_poll is not None and now >= next_poll
                    due = [name for name, at in self._due.items() if at <= now]
                    if full or due:
                        for name in due:
                            del self._due[name]
                        break
                    deadlines = list(self._due.values())
                    if next_poll is not None:
                        deadlines.append(next_poll)
                    if not deadlines:
                        if self._poll_wait == 0:
                            return  # the one-shot scan and its settling are done
                        self._wake.wait()
                    else:
                        self._wake.wait(min(deadlines) - now)
            if full:
                next_poll = now + self._poll_wait if self._poll_wait > 0 else None
                self._scan_pass(None, contain_errors=True)
            else:
                self._scan_pass(due, contain_errors=True)
