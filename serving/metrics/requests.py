"""One record per finished request, from either transport, to whoever observes requests.

The transports build a ``RequestRecord`` once a request is answered (or abandoned) and hand it
to ``RequestObservers.emit``; the request metrics and the access log subscribe. Records are
tuples (cheap to build on the request path) and flow one way: observers never answer back.

Contract for observers: ``observe`` is called on the transport's event loop thread, once per
request, after the response went out; it must be quick and must not raise (an observer that
raises is logged and the request is unaffected).
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import NamedTuple, Protocol

from runtime.errors import Code, OpError
from serving.batching.scheduler import QUEUE_FULL_MESSAGE

log = logging.getLogger("graphserve")

REST, GRPC = "REST", "GRPC"  # upstream's entrypoint label values


class RequestRecord(NamedTuple):
    transport: str  # REST | GRPC
    api: str  # upstream's API label: Predict/Classify/... (gRPC), predict/classify/... or ""
    model: str  # "" when the request names none (or could not be parsed that far)
    status: str  # canonical code name: OK, NOT_FOUND, ...
    latency_s: float  # from the request's arrival to its answer
    request_bytes: int
    response_bytes: int
    method: str  # the HTTP method, or "" (gRPC)
    target: str  # the URL path (no query), or the gRPC method path
    http_status: int  # the HTTP status, or 0 (gRPC)
    dropped: str = ""  # why the request was not run: deadline | cancelled | queue_full | ""


class RequestObserver(Protocol):
    def observe(self, record: RequestRecord) -> None: ...


def status_name(code: Code) -> str:
    return code.name


def drop_reason(err: BaseException) -> str:
    """Why a failed request was dropped rather than run to an error, or ``""``."""
    if isinstance(err, OpError):
        if err.code is Code.DEADLINE_EXCEEDED:
            return "deadline"
        if err.code is Code.CANCELLED:
            return "cancelled"
        if err.code is Code.UNAVAILABLE and err.message.startswith(QUEUE_FULL_MESSAGE):
            return "queue_full"
    return ""


class RequestObservers:
    """The subscribers of request records, and the requests in flight per model.

    ``subscribe`` at start-up, before traffic (it copies the tuple, so emitting never locks).
    With no subscriber, ``emit`` is one attribute read; transports skip building a record when
    ``active`` is false.

    In flight is counted without a lock on the request path: per model, one counter of requests
    begun and one of requests ended (``next`` on an ``itertools.count`` is atomic), and a scrape
    takes the difference."""

    def __init__(self) -> None:
        self._observers: tuple[RequestObserver, ...] = ()
        self.active = False
        self._lock = threading.Lock()
        self._begun: dict[str, itertools.count[int]] = {}
        self._ended: dict[str, itertools.count[int]] = {}

    def subscribe(self, observer: RequestObserver) -> None:
        with self._lock:
            self._observers = (*self._observers, observer)
            self.active = True

    def unsubscribe(self, observer: RequestObserver) -> None:
        with self._lock:
            self._observers = tuple(o for o in self._observers if o is not observer)
            self.active = bool(self._observers)

    def _counters(self, model: str) -> tuple[itertools.count[int], itertools.count[int]]:
        with self._lock:
            if model not in self._begun:
                self._ended[model] = itertools.count()
                self._begun[model] = itertools.count()  # last: the request path reads it first
            return self._begun[model], self._ended[model]

    def begin(self, model: str) -> None:
        counter = self._begun.get(model)
        next(counter if counter is not None else self._counters(model)[0])

    def end(self, model: str) -> None:
        next(self._ended[model])  # begin() made it

    def in_flight(self) -> dict[str, int]:
        with self._lock:
            counters = [(m, self._begun[m], self._ended[m]) for m in self._begun]
        # A count's repr shows its next value; read ended first so a request ending in between
        # is not counted twice.
        flying = {}
        for model, begun, ended in counters:
            done = _peek(ended)
            started = _peek(begun)
            if started > done:
                flying[model] = started - done
        return flying

    def emit(self, record: RequestRecord) -> None:
        for observer in self._observers:
            try:
                observer.observe(record)
            except Exception:  # an observer never fails a request
                log.exception("Request observer %r failed", observer)


def _peek(counter: itertools.count[int]) -> int:
    """The value ``next(counter)`` would return, without taking it."""
    return int(repr(counter)[6:-1])


# Process-wide, as the metrics are: both transports emit here; the server subscribes.
OBSERVERS = RequestObservers()
