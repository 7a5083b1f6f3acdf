"""One managed version: its load/unload state machine, load retries and outstanding handles.

A harness moves through TensorFlow Serving's LoaderHarness states::

    NEW -> LOAD_REQUESTED -> LOADING -> READY -> UNLOAD_REQUESTED -> QUIESCING -> UNLOADING
        -> DISABLED                      (ERROR from a failed load; DISABLED too after a load
                                          that finished once the version was no longer aspired)

The manager publishes them as START (NEW, LOAD_REQUESTED), LOADING, AVAILABLE (READY,
UNLOAD_REQUESTED), UNLOADING (QUIESCING, UNLOADING) and END (DISABLED, ERROR with its error).

Thread safety: the manager drives the transitions; ``acquire``/``release`` (the request path)
and ``cancel_load_retries`` may be called from any thread at any time. Ownership: the harness
owns the servable from a successful load until ``unload`` closes it and drops the reference, so
its memory can be freed once the last handle is gone.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from runtime.errors import CancelledError, InternalError, OpError, UnknownError
from serving.core.settle import Identity
from serving.servable import ServableId

log = logging.getLogger("graphserve")


class Servable(Protocol):
    """Anything a version loads into; ``close`` releases what it holds."""

    def close(self) -> None: ...


VersionLoader = Callable[[ServableId, Path], Servable]


class HarnessState(enum.Enum):
    NEW = "new"
    LOAD_REQUESTED = "load-requested"
    LOADING = "loading"
    READY = "ready"
    UNLOAD_REQUESTED = "unload-requested"
    QUIESCING = "quiescing"
    UNLOADING = "unloading"
    DISABLED = "disabled"
    ERROR = "error"


class LoaderHarness:
    """Loads, serves and unloads one (model, version)."""

    def __init__(
        self,
        id: ServableId,
        path: Path,
        *,
        max_num_load_retries: int = 5,
        load_retry_interval_s: float = 60.0,
        should_retry: Callable[[OpError], bool] | None = None,
        identity: Identity | None = None,
    ) -> None:
        self.id = id
        self.path = path
        # Which directory ``path`` was when this harness was made (see AspiredVersion).
        self.identity = identity
        # TensorFlow Serving's should_retry_model_load: whether a failed attempt is tried again.
        self._should_retry = should_retry
        # Whether the latest aspired list still names this version (the manager's to set).
        self.aspired = True
        self._max_retries = max(0, max_num_load_retries)
        self._retry_interval_s = load_retry_interval_s
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)
        self._state = HarnessState.NEW
        self._error: OpError | None = None
        self._servable: Servable | None = None
        self._open = False  # whether acquire() may hand the servable out
        self._refs = 0
        self._cancelled = threading.Event()

    def __repr__(self) -> str:
        return f"LoaderHarness({self.id}, {self._state.value})"

    @property
    def state(self) -> HarnessState:
        return self._state

    @property
    def error(self) -> OpError | None:
        return self._error

    @property
    def load_cancelled(self) -> bool:
        return self._cancelled.is_set()

    # -- load -------------------------------------------------------------------------------

    def request_load(self) -> None:
        self._transition(HarnessState.NEW, HarnessState.LOAD_REQUESTED)

    def cancel_load_retries(self) -> None:
        """Stop retrying (and waiting to retry); a load that then succeeds is undone."""
        self._cancelled.set()

    def load(
        self, loader: VersionLoader, on_retry: Callable[[OpError], None] | None = None
    ) -> OpError | None:
        """Try the load up to 1 + max_num_load_retries times (an error ``should_retry`` turns
        down ends it at once); None on success. ``on_retry`` hears each failed attempt that is
        to be tried again, before the wait.

        On success the servable is held and handed out by ``acquire``, but the state stays
        LOADING until ``mark_ready``: the manager publishes AVAILABLE in between, so nothing
        acting on READY can overtake that event. On failure the state is ERROR with the last
        error; if retries were cancelled and the load still succeeded, the servable is closed at
        once and the state is DISABLED (the version is about to go anyway).
        """
        self._transition(HarnessState.LOAD_REQUESTED, HarnessState.LOADING)
        if self._cancelled.is_set():
            # Un-aspired (or the manager closing) while queued: skip a load nobody wants.
            with self._lock:
                self._state = HarnessState.DISABLED
            return CancelledError("Loading of servable cancelled")
        error: OpError | None = None
        servable: Servable | None = None
        attempt = 0
        while True:
            if attempt > 0:
                log.info("Retrying of loading servable: %s retry: %d", self.id, attempt)
            attempt += 1
            try:
                servable = loader(self.id, self.path)
                error = None
                break
            except OpError as err:
                error = _without_frames(err)
                log.error("Loading servable: %s failed: %s", self.id, err.status_text())
            except Exception as err:  # an unexpected bug or file: it becomes the version's status
                log.exception("Loading servable: %s failed", self.id)
                error = UnknownError(f"{type(err).__name__}: {err}")
            if attempt > self._max_retries or self._cancelled.is_set():
                break
            if self._should_retry is not None and error is not None and not self._should_retry(error):
                break
            if on_retry is not None and error is not None:
                on_retry(error)
            if self._retry_interval_s > 0 and self._cancelled.wait(self._retry_interval_s):
                break
        if error is not None:
            if self._cancelled.is_set() and attempt <= self._max_retries:
                log.info("Retrying of loading servable: %s was cancelled.", self.id)
            self._fail(error)
            return error
        assert servable is not None
        if self._cancelled.is_set():
            self._close_servable(servable)
            with self._lock:
                self._state = HarnessState.DISABLED
            return CancelledError("Loading of servable cancelled")
        with self._lock:
            self._servable = servable
            self._open = True
        log.info("Successfully loaded servable version %s", self.id)
        return None

    def mark_ready(self) -> None:
        self._transition(HarnessState.LOADING, HarnessState.READY)

    def _fail(self, error: OpError) -> None:
        with self._lock:
            self._state = HarnessState.ERROR
            self._error = error

    # -- handles ----------------------------------------------------------------------------

    def acquire(self) -> Servable | None:
        """Count one more handle, or None once the version stopped being handed out."""
        with self._lock:
            if not self._open or self._servable is None:
                return None
            self._refs += 1
            return self._servable

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            if self._refs == 0:
                self._released.notify_all()

    # -- unload -----------------------------------------------------------------------------

    def request_unload(self) -> None:
        self._transition(HarnessState.READY, HarnessState.UNLOAD_REQUESTED)

    def start_quiescing(self) -> None:
        self._transition(HarnessState.UNLOAD_REQUESTED, HarnessState.QUIESCING)

    def stop_handing_out(self) -> None:
        """From now on ``acquire`` refuses; handles already out stay valid."""
        with self._lock:
            self._open = False

    def wait_until_released(self, timeout: float | None = None) -> bool:
        with self._lock:
            return self._released.wait_for(lambda: self._refs == 0, timeout)

    def unload(self) -> None:
        """Close the servable once every handle is back, then drop it."""
        self.stop_handing_out()
        self.wait_until_released()
        with self._lock:
            if self._state not in (HarnessState.QUIESCING, HarnessState.UNLOAD_REQUESTED):
                raise InternalError(
                    f"Illegal request to unload servable {self.id} in state {self._state.value}"
                )
            self._state = HarnessState.UNLOADING
            servable, self._servable = self._servable, None
        if servable is not None:
            self._close_servable(servable)
        with self._lock:
            self._state = HarnessState.DISABLED
        log.info("Done unloading servable version %s", self.id)

    def discard(self) -> None:
        """Close what a load returned that will never be served (its swap was overtaken)."""
        with self._lock:
            servable, self._servable = self._servable, None
            self._open = False
            self._state = HarnessState.DISABLED
        if servable is not None:
            self._close_servable(servable)

    def _close_servable(self, servable: Servable) -> None:
        try:
            servable.close()
        except Exception:  # the version is going regardless; keep the manager running
            log.exception("Closing servable %s failed", self.id)

    def _transition(self, from_state: HarnessState, to_state: HarnessState) -> None:
        with self._lock:
            if self._state is not from_state:
                raise InternalError(
                    f"Illegal request to transition servable {self.id} from state "
                    f"{self._state.value} to {to_state.value}"
                )
            self._state = to_state


def _without_frames(err: OpError) -> OpError:
    """Drop the tracebacks the error chain holds: the status outlives the load (END states are
    kept for good), and the frames of a failed load can pin much of a half-loaded model."""
    seen: set[int] = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return err
