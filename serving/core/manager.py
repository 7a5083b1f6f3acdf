"""The AspiredVersionsManager: reconciles each model's aspired versions with what is loaded.

A source calls ``set_aspired_versions`` with a model's complete version list; that only records
the list. Each ``step`` (the manage thread runs one every ``manage_interval_s``, and at once when
a list arrives or a load/unload finishes) does what TensorFlow Serving's manage-state pass does:

1. forget harnesses that are no longer aspired and hold nothing (NEW, DISABLED, ERROR), so a
   version that comes back later is loaded afresh;
2. apply the latest list per model: new versions get a harness (START), versions left out are
   marked un-aspired (their load retries were cancelled when the list arrived). A list naming
   again a version that is still on its way out waits until that version is gone, then loads it
   afresh; one that is still READY is simply kept (where TensorFlow Serving would unload it and
   load it again);
3. ask the transition policy for each model's next action and carry it out, unloads before
   loads, on the model's lane (``load_lanes.py``): each model's actions run in order, different
   models' side by side, so one model's slow or hung load never holds back another's. (A
   manager driven by hand with ``inline_actions`` runs them in the thread calling ``step``.)

Published states: START when a version is first aspired, LOADING (with the last attempt's error
while a failed load waits to be retried, so an operator sees why at once), then AVAILABLE once
``handle()`` can return it, or END with the error; for unloads UNLOADING while it is still
handed out, END once its servable is closed.

A version directory replaced in place (a new identity under the same number, see
``AspiredVersion``) is loaded afresh beside the serving one, which is swapped out once the new
content is AVAILABLE; if the new content fails to load, the old keeps serving and the version
shows AVAILABLE with that error. Versions a source cannot aspire (``report_unservable``) show as
END with the reason, or, while an older content of theirs still serves, AVAILABLE with it.

``handle()`` takes no manager lock: it reads an immutable serving map that loads and unloads
replace whole, and counts the handle on the version's harness. An unload first publishes a map
without the version, then stops the harness handing it out, then waits for every outstanding
handle before closing the servable, so in-flight requests finish on the version they started
on.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from runtime.errors import InvalidArgumentError, NotFoundError, OpError
from serving.core.aspired import AspiredVersion
from serving.core.harness import HarnessState, LoaderHarness, VersionLoader
from serving.core.load_lanes import LOAD_STALL_SECONDS, LoadLanes
from serving.core.state_monitor import ServableStateMonitor
from serving.core.transition_policy import (
    ActionKind,
    TransitionPolicy,
    VersionSnapshot,
    availability_preserving,
)
from serving.servable import (
    ManagerState,
    ServableHandle,
    ServableId,
    ServableRequest,
    ServableState,
)

log = logging.getLogger("graphserve")

__all__ = ["AspiredVersionsManager", "VersionLoader"]

# Harnesses holding nothing: once un-aspired they can be forgotten.
_FORGETTABLE = (HarnessState.NEW, HarnessState.DISABLED, HarnessState.ERROR)

# How long ``close`` waits for loads in progress before abandoning them.
CLOSE_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class _ModelServing:
    """The versions of one model that ``handle()`` may return (never mutated once built)."""

    versions: Mapping[int, LoaderHarness]
    latest: LoaderHarness


class AspiredVersionsManager:
    """Loads, serves and unloads every model's aspired versions. Thread-safe."""

    def __init__(
        self,
        loader: VersionLoader,
        monitor: ServableStateMonitor,
        *,
        num_load_threads: int = 0,
        max_num_load_retries: int = 5,
        load_retry_interval_s: float = 60.0,
        should_retry_model_load: Callable[[OpError], bool] | None = None,
        policy: TransitionPolicy = availability_preserving,
        manage_interval_s: float = 0.1,
        autostart: bool = True,
        inline_actions: bool = False,
        load_stall_s: float = LOAD_STALL_SECONDS,
    ) -> None:
        self._loader = loader
        self._monitor = monitor
        self._max_num_load_retries = max_num_load_retries
        self._load_retry_interval_s = load_retry_interval_s
        self._should_retry = should_retry_model_load  # None: every failed load is retried
        self._policy = policy
        self._manage_interval_s = manage_interval_s
        # At most num_load_threads loads at once (0: one, TensorFlow Serving's serial loads).
        self._lanes = None if inline_actions else LoadLanes(num_load_threads, stall_s=load_stall_s)
        # Guards harnesses, aspired flags, pending lists and the building of the serving map.
        self._lock = threading.Lock()
        self._harnesses: dict[str, dict[int, LoaderHarness]] = {}
        # The new content of a version replaced in place, loading beside the serving harness.
        self._replacing: dict[ServableId, LoaderHarness] = {}
        self._listed: set[LoaderHarness] = set()  # harnesses in the serving map
        self._pending: dict[str, list[AspiredVersion]] = {}
        self._received: dict[str, tuple[AspiredVersion, ...]] = {}
        # Read without the lock by handle(); replaced whole, never mutated.
        self._serving: dict[str, _ModelServing] = {}
        self._labels: dict[str, dict[str, int]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        if autostart:
            self.start()

    # -- the source's side ------------------------------------------------------------------

    def set_aspired_versions(self, name: str, versions: Sequence[AspiredVersion]) -> None:
        """Record ``name``'s complete aspired list (the source callback). Never blocks on a load.

        The list supersedes any earlier one not yet applied; an unchanged list is a no-op.
        """
        unique: dict[int, AspiredVersion] = {}
        for v in versions:
            if v.version in unique:
                log.error("Aspired versions of %s name version %d twice", name, v.version)
                continue
            unique[v.version] = v
        key = tuple(sorted(unique.values(), reverse=True))
        with self._lock:
            if self._closed or self._received.get(name) == key:
                return
            self._received[name] = key
            self._pending[name] = list(key)
            for version, harness in self._harnesses.get(name, {}).items():
                # At once, not at the next pass: a load retrying inline holds up that pass.
                if version not in unique:
                    harness.cancel_load_retries()
            for id, replacement in self._replacing.items():
                wanted = unique.get(id.version)
                if id.name == name and (wanted is None or wanted.identity != replacement.identity):
                    replacement.cancel_load_retries()
        self._wake.set()

    # -- reconciling ------------------------------------------------------------------------

    def step(self) -> bool:
        """One manage-state pass; True if it changed anything.

        At most one action per model. With no thread pools the actions run here, so a test
        stepping by hand sees each one complete before ``step`` returns.
        """
        with self._lock:
            if self._closed:
                return False
            flushed = self._flush()
            started, replacements = self._apply_pending()
            loads, unloads = self._choose_actions()
        for harness in started:
            self._publish(harness.id, ManagerState.START)
        for harness in unloads:
            self._submit(self._execute_unload, harness, load=False)
        for harness in loads:
            self._submit(self._execute_load, harness, load=True)
        for harness in replacements:
            self._submit(self._execute_replacement, harness, load=True)
        return flushed or bool(started or loads or unloads or replacements)

    def _flush(self) -> bool:
        flushed = False
        for name in list(self._harnesses):
            harnesses = self._harnesses[name]
            for version, harness in list(harnesses.items()):
                if not harness.aspired and harness.state in _FORGETTABLE:
                    del harnesses[version]
                    flushed = True
            if not harnesses:
                del self._harnesses[name]
        return flushed

    def _apply_pending(self) -> tuple[list[LoaderHarness], list[LoaderHarness]]:
        """Apply the lists received; returns the new harnesses and the replacements to load."""
        started: list[LoaderHarness] = []
        replacements: list[LoaderHarness] = []
        for name in list(self._pending):
            if any(id.name == name for id in self._replacing):
                continue  # the list waits for the swap in progress
            wanted = {v.version: v for v in self._pending[name]}
            harnesses = self._harnesses.setdefault(name, {})
            # Versions named again after leaving a list: one still READY is kept as it is; one
            # that stopped (or whose load was cancelled) gets a fresh harness; one still on its
            # way in or out holds the list back until it settles. A version whose directory
            # was replaced is the same: new content, loaded afresh (beside it when READY).
            returning = [
                h
                for v, h in harnesses.items()
                if v in wanted
                and (not h.aspired or h.load_cancelled or _replaced(h, wanted[v]))
                and h.state is not HarnessState.READY
            ]
            if any(h.state not in _FORGETTABLE for h in returning):
                continue
            del self._pending[name]
            for harness in returning:
                del harnesses[harness.id.version]
            for version, harness in harnesses.items():
                if version in wanted:
                    harness.aspired = True
                elif harness.aspired:
                    harness.aspired = False
                    harness.cancel_load_retries()
            for version, harness in harnesses.items():
                if version in wanted and _replaced(harness, wanted[version]):
                    replacement = self._new_harness(harness.id, wanted[version])
                    replacement.request_load()
                    self._replacing[harness.id] = replacement
                    replacements.append(replacement)
            for version, aspired in sorted(wanted.items()):
                if version not in harnesses:
                    harness = self._new_harness(ServableId(name, version), aspired)
                    harnesses[version] = harness
                    started.append(harness)
            if not harnesses:
                del self._harnesses[name]
        return started, replacements

    def _new_harness(self, id: ServableId, aspired: AspiredVersion) -> LoaderHarness:
        return LoaderHarness(
            id,
            aspired.path,
            max_num_load_retries=self._max_num_load_retries,
            load_retry_interval_s=self._load_retry_interval_s,
            should_retry=self._should_retry,
            identity=aspired.identity,
        )

    def _choose_actions(self) -> tuple[list[LoaderHarness], list[LoaderHarness]]:
        loads: list[LoaderHarness] = []
        unloads: list[LoaderHarness] = []
        for name, harnesses in self._harnesses.items():
            if any(id.name == name for id in self._replacing):
                continue  # nothing moves while a version's new content loads beside it
            snapshot = [VersionSnapshot(v, h.state, h.aspired) for v, h in harnesses.items()]
            action = self._policy(snapshot)
            if action is None:
                continue
            harness = harnesses.get(action.version)
            try:
                if harness is None:
                    raise NotFoundError(f"no version {action.version} of {name} is managed")
                # Requested here, under the lock, so the next pass cannot pick it again.
                if action.kind is ActionKind.LOAD:
                    harness.request_load()
                    loads.append(harness)
                else:
                    harness.request_unload()
                    unloads.append(harness)
            except OpError as err:
                log.error("Transition policy chose %s for %s: %s", action, name, err)
        return loads, unloads

    def _submit(
        self, work: Callable[[LoaderHarness], None], harness: LoaderHarness, *, load: bool
    ) -> None:
        if self._lanes is None:
            work(harness)
        else:
            self._lanes.submit(harness.id.name, functools.partial(work, harness), load=load)

    def _execute_load(self, harness: LoaderHarness) -> None:
        try:
            self._publish(harness.id, ManagerState.LOADING)
            error = harness.load(
                self._loader,
                lambda err: self._publish(harness.id, ManagerState.LOADING, err),
            )
            if error is not None:
                self._publish(harness.id, ManagerState.END, error)
                return
            with self._lock:
                self._listed.add(harness)
                self._rebuild_serving()
            # READY only after AVAILABLE is out: the policy may unload older versions on READY.
            self._publish(harness.id, ManagerState.AVAILABLE)
            harness.mark_ready()
        except Exception:  # a failure here is a bug; it must not kill a worker thread silently
            log.exception("Loading servable %s failed unexpectedly", harness.id)
        finally:
            self._wake.set()

    def _execute_unload(self, harness: LoaderHarness) -> None:
        try:
            self._publish(harness.id, ManagerState.UNLOADING)
            with self._lock:
                harness.start_quiescing()
                self._listed.discard(harness)
                self._rebuild_serving()
                # Only after the new map is visible: handle() retries with it when refused.
                harness.stop_handing_out()
            harness.unload()
            self._publish(harness.id, ManagerState.END)
        except Exception:
            log.exception("Unloading servable %s failed unexpectedly", harness.id)
        finally:
            self._wake.set()

    def _execute_replacement(self, new: LoaderHarness) -> None:
        """Load a replaced directory's new content beside the serving version, then swap it in
        and unload the old content once its handles are back."""
        id = new.id
        try:
            log.info("Servable %s was replaced at %s; loading its new content", id, new.path)
            error = new.load(
                self._loader, lambda err: self._publish(id, ManagerState.AVAILABLE, err)
            )
            with self._lock:
                del self._replacing[id]
                old = self._harnesses.get(id.name, {}).get(id.version)
                swap = error is None and old is not None and old.state is HarnessState.READY
                if swap:
                    assert old is not None
                    self._harnesses[id.name][id.version] = new
                    old.aspired = False
                    old.request_unload()
                    old.start_quiescing()
                    self._listed.discard(old)
                    self._listed.add(new)
                    self._rebuild_serving()
                    old.stop_handing_out()
            if not swap:
                if error is not None and not new.load_cancelled:
                    log.error("The new content of %s failed to load; the old keeps serving", id)
                    self._publish(id, ManagerState.AVAILABLE, error)
                elif error is None:
                    new.discard()
                return
            assert old is not None
            new.mark_ready()
            self._publish(id, ManagerState.AVAILABLE)
            old.unload()
            log.info("Servable %s now serves the new content from %s", id, new.path)
        except Exception:
            log.exception("Replacing servable %s failed unexpectedly", id)
        finally:
            self._wake.set()

    def report_unservable(self, name: str, version: int, error: OpError | None) -> None:
        """A source found this version's directory but cannot aspire it (see the module doc);
        ``error`` None: it no longer says so."""
        id = ServableId(name, version)
        with self._lock:
            harness = self._harnesses.get(name, {}).get(version)
            serving = harness is not None and harness.state is HarnessState.READY
            managed = harness is not None and harness.state not in _FORGETTABLE
        if error is None:
            # Fixed in place: the content serving is the directory's again.
            shown = self._monitor.state(id)
            if serving and shown is not None and shown.error is not None:
                self._publish(id, ManagerState.AVAILABLE)
        elif serving:
            self._publish(id, ManagerState.AVAILABLE, error)
        elif not managed:
            self._publish(id, ManagerState.END, error)

    def _rebuild_serving(self) -> None:
        by_name: dict[str, dict[int, LoaderHarness]] = {}
        for harness in self._listed:
            by_name.setdefault(harness.id.name, {})[harness.id.version] = harness
        self._serving = {
            name: _ModelServing(versions, versions[max(versions)])
            for name, versions in by_name.items()
        }

    def _publish(self, id: ServableId, state: ManagerState, error: OpError | None = None) -> None:
        self._monitor.publish(ServableState(id, state, error))

    # -- the manage thread ------------------------------------------------------------------

    def start(self) -> None:
        """Start the manage thread (idempotent)."""
        with self._lock:
            if self._closed or self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._run, name="AspiredVersionsManager_ManageState", daemon=True
            )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # keep managing; the next pass may succeed
                log.exception("Managing servable versions failed")
            if self._wake.wait(self._manage_interval_s):
                self._wake.clear()

    def abandon_loads(self) -> None:
        """Cancel every load queued, waiting to retry or in progress (shutdown has begun): none
        of them will be served, and one that finishes closes what it loaded. Versions already
        serving keep serving until ``close``."""
        with self._lock:
            for harness in [
                *(h for hs in self._harnesses.values() for h in hs.values()),
                *self._replacing.values(),
            ]:
                if harness.state is not HarnessState.READY:
                    harness.cancel_load_retries()

    def close(self, wait_s: float = CLOSE_WAIT_SECONDS) -> None:
        """Stop managing and unload every version, waiting for their handles. Idempotent.

        Loads still running after ``wait_s`` (a hung read) are abandoned, not waited for: they
        were cancelled, so one that finishes later closes what it loaded."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._pending.clear()
            harnesses = [h for hs in self._harnesses.values() for h in hs.values()]
            for harness in [*harnesses, *self._replacing.values()]:
                # Ends retry waits and skips queued loads, so closing does not wait on them.
                harness.cancel_load_retries()
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._lanes is not None and not self._lanes.close(wait_s):
            log.warning("Abandoning loads still running after %gs at shutdown", wait_s)
        with self._lock:
            harnesses = [h for hs in self._harnesses.values() for h in hs.values()]
        for harness in sorted(harnesses, key=lambda h: h.id):
            if harness.state is HarnessState.READY:
                harness.aspired = False
                harness.request_unload()
                self._execute_unload(harness)

    # -- ServableManager --------------------------------------------------------------------

    def handle(self, request: ServableRequest) -> ServableHandle:
        """A counted handle on the requested version; raises as ``ServableManager`` documents."""
        if request.label is not None:
            version = self._labels.get(request.name, {}).get(request.label)
            if version is None:
                raise InvalidArgumentError(f"Unrecognized servable version label: {request.label}")
            request = ServableRequest(request.name, version)
        while True:
            serving = self._serving
            model = serving.get(request.name)
            harness: LoaderHarness | None = None
            if model is not None:
                if request.version is None:
                    harness = model.latest
                else:
                    harness = model.versions.get(request.version)
            if harness is None:
                raise NotFoundError(f"Servable not found for request: {request}")
            servable = harness.acquire()
            if servable is not None:
                # ServableHandle is typed for SavedModels; the manager serves any servable.
                return ServableHandle(harness.id, cast(Any, servable), harness.release)
            if self._serving is serving:
                # Refused although still listed: only a concurrent close() does this.
                raise NotFoundError(f"Servable not found for request: {request}")
            # The version just stopped being handed out; the map replacing it is already set.

    def version_states(self, name: str) -> list[ServableState]:
        return self._monitor.states(name)

    def model_names(self) -> list[str]:
        with self._lock:
            names = set(self._received)
        return sorted(names.union(self._monitor.model_names()))

    def available_versions(self, name: str) -> list[int]:
        """Versions ``handle()`` can return now, newest first."""
        model = self._serving.get(name)
        return [] if model is None else sorted(model.versions, reverse=True)

    def set_version_labels(self, name: str, labels: Mapping[str, int]) -> None:
        """Replace ``name``'s labels (no validation: the caller applies the label rules)."""
        with self._lock:
            updated = dict(self._labels)
            if labels:
                updated[name] = dict(labels)
            else:
                updated.pop(name, None)
            self._labels = updated

    def version_labels(self, name: str) -> dict[str, int]:
        return dict(self._labels.get(name, {}))


def _replaced(harness: LoaderHarness, aspired: AspiredVersion) -> bool:
    """Whether the version's directory is another one than the harness was made for."""
    return (
        harness.identity is not None
        and aspired.identity is not None
        and harness.identity != aspired.identity
    )
