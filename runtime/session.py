"""``Session``: runs a graph for (feeds, fetches, targets), compiling each distinct call once.

One session per loaded model version, shared by all requests: ``run`` is thread-safe, and plans
are immutable once built. Fetches and feeds are tensor names (``node:port``; a bare node name is
port 0); targets are node names run for their effects.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runtime.cancellation import Cancellation
from runtime.compiler import compile_plan
from runtime.errors import InvalidArgumentError
from runtime.graph import Graph, TensorRef
from runtime.plan import Plan
from runtime.resources import ResourceManager

PlanKey = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]

# glibc's malloc hands blocks of 128 KiB and more back to the kernel when they are freed (unmapped,
# or trimmed off the heap), so every large intermediate tensor of a run is faulted in afresh, page
# by page: at batch 256 that costs more than the arithmetic. Serving allocates the same sizes on
# every call, so freed memory is kept for reuse instead: blocks up to 64 MiB come from the heap,
# and up to 256 MiB of free heap is kept. Operators who set glibc's own MALLOC_*_ variables keep
# their settings.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 64 << 20
_TRIM_THRESHOLD_BYTES = 256 << 20
_allocator_tuned = False


def _tune_allocator() -> None:
    global _allocator_tuned
    if _allocator_tuned:
        return
    _allocator_tuned = True
    if not sys.platform.startswith("linux"):
        return
    if any(k in os.environ for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)


class Session:
    def __init__(self, graph: Graph, resources: ResourceManager | None = None) -> None:
        _tune_allocator()
        self.graph = graph
        self.resources = resources if resources is not None else ResourceManager()
        self._plans: dict[PlanKey, Plan] = {}
        self._lock = threading.Lock()
        self._closed = False

    def plan(
        self, feeds: Sequence[str], fetches: Sequence[str], targets: Sequence[str] = ()
    ) -> Plan:
        """The compiled plan for this call shape, built on first use and cached."""
        key = (tuple(feeds), tuple(fetches), tuple(targets))
        plan = self._plans.get(key)
        if plan is None:
            if self._closed:
                raise InvalidArgumentError("Session has been closed")
            for name in targets:
                if name not in self.graph:
                    raise InvalidArgumentError(f"Target node '{name}' is not in the graph")
            feed_refs = [self._tensor(name, "feed") for name in feeds]
            if len(set(feed_refs)) != len(feed_refs):
                raise InvalidArgumentError(f"The same tensor is fed more than once: {list(feeds)}")
            built = compile_plan(
                self.graph,
                feed_refs,
                [self._tensor(name, "fetch") for name in fetches],
                list(targets),
                self.resources,
            )
            with self._lock:
                plan = self._plans.setdefault(key, built)
        return plan

    def _tensor(self, name: str, role: str) -> TensorRef:
        ref = TensorRef.parse(name)
        if ref.node not in self.graph:
            raise InvalidArgumentError(
                f"Tensor {name}, specified in {role}, was not found in the graph"
            )
        return ref

    def run(
        self,
        fetches: str | Sequence[str],
        feeds: Mapping[str, Any] | None = None,
        targets: Sequence[str] = (),
        cancellation: Cancellation | None = None,
    ) -> Any:
        """Fetch tensors. A single name returns one array; a list returns a list. A cancelled
        ``cancellation`` stops the run between kernels with its error."""
        if isinstance(fetches, str):
            fetch_key: tuple[str, ...] = (fetches,)
        else:
            fetch_key = tuple(fetches)
        feeds = feeds or {}
        plan = self._plans.get((tuple(feeds), fetch_key, tuple(targets)))
        if plan is None:
            plan = self.plan(list(feeds), fetch_key, targets)
        results = plan.run(tuple(feeds.values()), cancellation=cancellation)
        return results[0] if isinstance(fetches, str) else results

    def make_callable(
        self, feeds: Sequence[str], fetches: Sequence[str], targets: Sequence[str] = ()
    ) -> Callable[..., list[Any]]:
        """A function taking the feed values positionally and returning the fetched list."""
        return self.plan(feeds, fetches, targets)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._plans.clear()
        self.resources.clear()
