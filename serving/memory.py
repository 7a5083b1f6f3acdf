"""Memory a large request used goes back to the operating system after the request.

Freed is not returned. After a large request has ended (answered or rejected), its memory (the
bytes received, the parsed message or JSON, the decoded tensors) can stay with the process in
two ways:

* in reference cycles. An exception's traceback holds the frames of the code it passed, and so
  what they held; where something on that path holds the exception (a frame, a future), the
  whole lot is a cycle, freed only by a full garbage collection. Python runs one when the
  objects created since the last one reach a quarter of all: after a request that created
  millions of objects (a large JSON body), an idle server never does.
* in malloc's free lists. glibc keeps freed memory for reuse (the runtime raises its thresholds
  so that a model's large temporaries are reused rather than faulted in afresh on every run,
  see ``runtime.session``), and ``malloc_trim`` returns the free pages of the main heap, but
  not the free top of the heaps glibc adds for other threads (up to the trim threshold each).

``configure_allocator`` (once, at start-up, before any other thread allocates) limits malloc to
the main heap (``M_ARENA_MAX`` 1: all of its free memory can be returned; sharing it costs
little, as most allocation happens under the interpreter lock, one thread at a time) and
starts a thread that, every ``CHECK_INTERVAL_S``, looks at the resident size. Once it has
grown by ``RELEASE_GROWTH_BYTES`` over what it was after the last release, has stopped moving,
and the process is idle (its other threads used less than ``IDLE_CPU_FRACTION`` of a CPU since
the last check), the thread runs a full garbage collection and returns malloc's free pages
(``malloc_trim``). While requests are being served, only growth by
``BUSY_RELEASE_GROWTH_BYTES`` is released: memory the model runs keep reusing stays theirs. A
release that frees nothing (the memory is in use) is not repeated until the process grows that
much again.

Settings an operator made through glibc's environment (``MALLOC_ARENA_MAX``,
``GLIBC_TUNABLES``) are kept. Where there is no glibc only the garbage is collected.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("graphserve")

CHECK_INTERVAL_S = 1.0
RELEASE_GROWTH_BYTES = 64 << 20
BUSY_RELEASE_GROWTH_BYTES = 512 << 20
# Resident size that moved less than this between two checks has stopped moving.
SETTLED_BYTES = 32 << 20
IDLE_CPU_FRACTION = 0.1

_M_ARENA_MAX = -8
_OPERATOR_SETTINGS = ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")


class Glibc:
    """The malloc controls of glibc, found in the running process."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._mallopt = libc.mallopt
        self._mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        self._mallopt.restype = ctypes.c_int
        self._malloc_trim = libc.malloc_trim
        self._malloc_trim.argtypes = (ctypes.c_size_t,)
        self._malloc_trim.restype = ctypes.c_int

    @classmethod
    def find(cls) -> Glibc | None:
        try:
            libc = ctypes.CDLL(None)
            libc.gnu_get_libc_version  # noqa: B018 - present only in glibc
            return cls(libc)
        except (OSError, AttributeError):
            return None

    def one_heap(self) -> bool:
        """Allocate from the main heap only (threads that have a heap of their own keep it)."""
        return bool(self._mallopt(_M_ARENA_MAX, 1))

    def trim(self) -> None:
        """Return the free pages of every heap to the system."""
        self._malloc_trim(0)


def resident_bytes() -> int | None:
    """This process's resident size; None where /proc does not say."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def others_cpu_seconds() -> float:
    """CPU time of the process's threads other than the calling one."""
    return time.process_time() - time.thread_time()


class MemoryReleaser:
    """What the thread does each check (see the module's docstring); ``check`` is one."""

    def __init__(
        self,
        glibc: Glibc | None,
        resident: Callable[[], int | None] = resident_bytes,
        cpu_seconds: Callable[[], float] = others_cpu_seconds,
        collect: Callable[[], object] = gc.collect,
    ) -> None:
        self._glibc = glibc
        self._resident = resident
        self._cpu_seconds = cpu_seconds
        self._collect = collect
        # Resident sizes after the last release, and after the last one while idle.
        self._rss = self._mark = self._idle_mark = resident() or 0
        self._cpu = cpu_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="graphserve-memory", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        self._cpu = self._cpu_seconds()  # as seen from this thread
        while not self._stop.wait(CHECK_INTERVAL_S):
            try:
                self.check()
            except Exception:  # the thread must go on
                log.exception("Returning memory to the system failed")

    def check(self) -> None:
        rss, cpu = self._resident(), self._cpu_seconds()
        if rss is None:
            return
        settled = abs(rss - self._rss) < SETTLED_BYTES
        idle = cpu - self._cpu < IDLE_CPU_FRACTION * CHECK_INTERVAL_S
        self._rss, self._cpu = rss, cpu
        self._mark = min(self._mark, rss)
        self._idle_mark = min(self._idle_mark, rss)
        if not settled:
            return
        if idle and rss - self._idle_mark >= RELEASE_GROWTH_BYTES:
            self._idle_mark = self._mark = self._release(rss)
        elif rss - self._mark >= BUSY_RELEASE_GROWTH_BYTES:
            # In use then, maybe, but not necessarily once idle: that mark stays.
            self._mark = self._release(rss)

    def _release(self, rss: int) -> int:
        """Collect, return free pages; the resident size after."""
        self._collect()
        if self._glibc is not None:
            self._glibc.trim()
        self._rss = self._resident() or rss
        return self._rss


_releaser: MemoryReleaser | None = None
_releaser_lock = threading.Lock()


def configure_allocator() -> None:
    """Limit malloc to one heap and start the thread that returns memory (see the module's
    docstring). Once per process; later calls do nothing."""
    global _releaser
    with _releaser_lock:
        if _releaser is not None:
            return
        glibc = Glibc.find()
        operator_set = any(name in os.environ for name in _OPERATOR_SETTINGS)
        if glibc is not None and not operator_set and not glibc.one_heap():
            log.warning("Could not limit malloc to one heap")
        _releaser = MemoryReleaser(glibc)
        _releaser.start()
