"""Threads inside one run: a big kernel splits its independent blocks of work over a small pool.

TensorFlow's ``intra_op_parallelism``: numpy's heavy loops and BLAS release the interpreter
lock, so blocks of a convolution (patch copies and matrix products on separate rows of the
output) run truly in parallel. ``set_threads(n)`` sets how many threads one kernel may use, the
caller's own included; 1 (the default) runs every block on the caller.

The pool is shared by every run in the process, so requests that fan out at once do not
multiply the threads. No block ever waits for the pool: the caller works through its own
blocks too, taking any that no worker has started, and waits only for blocks already running.
A busy pool therefore costs a fanned-out kernel nothing beyond running serially.

BLAS itself stays single-threaded (see ``serving/__init__.py``): its own threads spin while
they wait and stall a loaded machine, where these workers sleep.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
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
# to another thread and waiting for it costs tens of microseconds, a few hundred thousand
# multiply-adds' worth.
PARALLEL_MIN_MACS = 2_000_000


def worth_threads(macs: int) -> bool:
    """Whether work of ``macs`` multiply-adds should be spread over the threads."""
    return _threads > 1 and macs >= PARALLEL_MIN_MACS


class _Share:
    """A contiguous run of blocks, taken by whoever gets to it first."""

    __slots__ = ("_taken", "blocks", "done", "error")

    def __init__(self, blocks: Sequence[int]) -> None:
        self.blocks = blocks
        self._taken = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def take(self) -> bool:
        return self._taken.acquire(blocking=False)

    def run(self, work: Callable[[int], None]) -> None:
        try:
            for block in self.blocks:
                work(block)
        except BaseException as err:  # noqa: BLE001 - raised again on the caller
            self.error = err
        finally:
            self.done.set()


def _offered(share: _Share, work: Callable[[int], None]) -> None:
    if share.take():
        share.run(work)


def run_blocks(work: Callable[[int], None], count: int) -> None:
    """``work(i)`` for every ``i`` in ``range(count)``; blocks must be independent (separate
    outputs, per-thread scratch). Returns when all have run; raises the first error."""
    pool = _pool
    shares = min(_threads, count)
    if pool is None or shares <= 1:
        for block in range(count):
            work(block)
        return
    bounds = [count * i // shares for i in range(shares + 1)]
    parts = [_Share(range(bounds[i], bounds[i + 1])) for i in range(shares)]
    for part in parts[1:]:
        try:
            pool.submit(_offered, part, work)
        except RuntimeError:  # the pool was replaced meanwhile: the caller runs it
            break
    for part in parts:  # the caller's own, then any a worker has not started
        if part.take():
            part.run(work)
    for part in parts:
        part.done.wait()
    for part in parts:
        if part.error is not None:
            raise part.error
