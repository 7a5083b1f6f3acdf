"""Threads inside one run: a big kernel splits its independent blocks of work over a small pool.

TensorFlow's ``intra_op_parallelism``: numpy's heavy loops and BLAS release the interpreter
lock, so blocks of a convolution (patch copies and matrix products on separate rows of the
output) run truly in parallel. ``set_threads(n)`` sets how many threads one kernel may use, the
caller's own included; 1 (the default) runs every block on the caller.

The pool is shared by every run in the process, so requests that fan out at once do not
multiply the threads. No block ever waits for the pool: the blocks are handed out one at a
time to whoever asks next, the caller included, and the caller waits only for blocks already
running when it runs out. A busy pool therefore costs a fanned-out kernel nothing beyond running
serially, and a pool thread that wakes late takes fewer blocks instead of finishing last.

BLAS itself stays single-threaded (see ``serving/__init__.py``): its own threads spin while
they wait and stall a loaded machine, where these workers sleep.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_threads = 1
_pool: ThreadPoolExecutor | None = None


def set_threads(n: int) -> None:
    """Threads per kernel from now on (the caller's included); 0 = every core, 1 = none extra."""
    global _threads, _pool
    wanted = (os.cpu_count() or 1) if n <= 0 else n
    with _lock:
        if wanted == _threads:
            return
        old, _pool = _pool, None
        _threads = wanted
        if wanted > 1:
            _pool = ThreadPoolExecutor(wanted - 1, thread_name_prefix="intra-op")
    if old is not None:
        old.shutdown(wait=False)


def threads() -> int:
    return _threads


def _blas_single_threaded(environ: dict[str, str] | os._Environ[str]) -> bool:
    # OpenBLAS takes the first of these that is set; unset, it runs one thread per core.
    for var in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        value = environ.get(var, "").strip()
        if value:
            return value == "1"
    return False


# Read once: BLAS reads its thread count when it is loaded, before any kernel runs.
BLAS_SINGLE_THREADED = _blas_single_threaded(os.environ)


# A kernel spreads its blocks over threads only from this many multiply-adds: handing a block
# to another thread and waiting for it costs about 0.1 ms on the 2-core machine measured, a few
# million multiply-adds' worth. (Raised to 6-12 million, EfficientNetB0's call on two threads
# was up to 15% slower; lowered to 0.5-1 million, nothing measurable changed.)
PARALLEL_MIN_MACS = 2_000_000


def worth_threads(macs: int) -> bool:
    """Whether work of ``macs`` multiply-adds should be spread over the threads."""
    return _threads > 1 and macs >= PARALLEL_MIN_MACS


class _Call:
    """One ``run_blocks`` call: its blocks, handed out one at a time to whoever asks next (the
    caller and any pool thread that joins), so all finish within about one block of each other
    even when a pool thread starts late."""

    __slots__ = ("_active", "_closed", "_lock", "_next", "_settled", "count", "error", "work")

    def __init__(self, work: Callable[[int], None], count: int) -> None:
        self.work = work
        self.count = count
        self._next = itertools.count()  # next() is atomic under the interpreter lock
        self._lock = threading.Lock()
        self._active = 0  # pool threads inside the call
        self._closed = False  # set once the caller runs out of blocks: no one joins after
        self._settled = threading.Event()  # the last active pool thread has left
        self.error: BaseException | None = None

    def _blocks(self) -> None:
        for block in iter(self._next.__next__, None):
            if block >= self.count or self.error is not None:
                return
            try:
                self.work(block)
            except BaseException as err:  # noqa: BLE001 - raised again on the caller
                if self.error is None:
                    self.error = err

    def join(self) -> None:
        """A pool thread's part: blocks until none is left, if the caller has not finished."""
        with self._lock:
            if self._closed:
                return
            self._active += 1
        try:
            self._blocks()
        finally:
            with self._lock:
                self._active -= 1
                if self._closed and not self._active:
                    self._settled.set()

    def run(self) -> None:
        """The caller's part: blocks until none is left, then waits only for pool threads
        still inside a block."""
        self._blocks()
        with self._lock:
            self._closed = True
            busy = self._active > 0
        if busy:
            self._settled.wait()
        if self.error is not None:
            raise self.error


def run_blocks(work: Callable[[int], None], count: int) -> None:
    """``work(i)`` for every ``i`` in ``range(count)``; blocks must be independent (separate
    outputs, per-thread scratch). Returns when all have run; raises the first error (blocks not
    yet started then do not run)."""
    pool = _pool
    helpers = min(_threads, count) - 1
    if pool is None or helpers <= 0:
        for block in range(count):
            work(block)
        return
    call = _Call(work, count)
    for _ in range(helpers):
        try:
            pool.submit(call.join)
        except RuntimeError:  # the pool was replaced meanwhile: the caller runs it all
            break
    call.run()
