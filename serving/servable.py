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

A loaded version is a ``Servable``: its signatures and MetaGraphDef, a blocking ``run``, and
``submit``, the run that answers through a callback (a batching version queues it; a plain one
runs it at once). ``PlainServable`` is the version that does not batch;
``serving.batching.session.BatchingServable`` the one that does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Self

import numpy as np

from runtime.cancellation import Cancellation
from runtime.cancellation import current as current_run
from runtime.errors import Code, OpError

if TYPE_CHECKING:
    from protos.tensorflow.core.protobuf.meta_graph_pb2 import MetaGraphDef
    from runtime.saved_model import LoadedModel, Signature

Outputs = dict[str, np.ndarray]
OnDone = Callable[[Outputs | None, BaseException | None], None]


class Caller(Protocol):
    """What a queue reads of the caller of a run: its deadline (``time.monotonic()``; None:
    none) and whether it has stopped waiting."""

    @property
    def deadline(self) -> float | None: ...

    def cancelled(self) -> bool: ...


class Servable(Protocol):
    """One loaded version, as every request path sees it."""

    @property
    def signatures(self) -> Mapping[str, Signature]: ...

    @property
    def meta_graph(self) -> MetaGraphDef: ...

    @property
    def bounded(self) -> bool:
        """Whether a run's time is bounded by its inputs' size (its graph has no loops): only
        such runs may go inline on an event loop, where nothing could stop them."""
        ...

    def run(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None = None,
        cancellation: Cancellation | None = None,
    ) -> Outputs:
        """Run signature ``key`` on inputs as ``requests.predict.checked_inputs`` gives them
        (exactly the signature's aliases, arrays of its dtypes: not checked again); blocks (a
        batching version: until its batch has run). Raises ``OpError``."""
        ...

    def batches(self, key: str, output_aliases: Sequence[str] | None) -> bool:
        """Whether such a run is queued for a batch (``submit`` then holds no thread)."""
        ...

    def admits(self, key: str) -> bool:
        """False when the queue such a run would join is full: refuse before decoding."""
        ...

    def submit(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None,
        on_done: OnDone,
        caller: Caller | None,
    ) -> None:
        """Start the run; ``on_done(outputs, None)`` or ``on_done(None, error)`` follows once,
        from any thread (this one when the run is refused or does not batch)."""
        ...

    def close(self) -> None: ...


# Ops whose run time depends on their inputs' values: functional loops, and TF1 loop frames.
LOOP_OPS = frozenset({"While", "StatelessWhile", "Enter", "RefEnter"})


def has_loops(model: LoadedModel) -> bool:
    return any(node.op in LOOP_OPS for node in model.session.graph)


class PlainServable:
    """A version that does not batch: every run is the model's own, on the caller's thread."""

    def __init__(self, model: LoadedModel) -> None:
        self.model = model
        self.signatures = model.signatures
        self.meta_graph = model.meta_graph
        self.bounded = not has_loops(model)

    def run(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None = None,
        cancellation: Cancellation | None = None,
    ) -> Outputs:
        # Blocking work run for a request (Classify on a worker) has its run's cancellation
        # as the thread's current one.
        return self.model.run(
            key, inputs, output_aliases, cancellation or current_run(), checked=True
        )

    def batches(self, key: str, output_aliases: Sequence[str] | None) -> bool:
        return False

    def admits(self, key: str) -> bool:
        return True

    def submit(
        self,
        key: str,
        inputs: Mapping[str, np.ndarray],
        output_aliases: Sequence[str] | None,
        on_done: OnDone,
        caller: Caller | None,
    ) -> None:
        try:
            outputs = self.model.run(key, inputs, output_aliases, checked=True)
        except Exception as err:  # noqa: BLE001 - the caller hears every failure
            on_done(None, err)
            return
        on_done(outputs, None)

    def close(self) -> None:
        self.model.close()


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
        self, id: ServableId, servable: Servable, release: Callable[[], None] | None = None
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
