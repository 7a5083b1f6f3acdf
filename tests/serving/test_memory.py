"""serving.memory: when the releaser returns memory and collects garbage, and glibc's part."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from serving.memory import (
    BUSY_RELEASE_GROWTH_BYTES,
    CHECK_INTERVAL_S,
    IDLE_CPU_FRACTION,
    RELEASE_GROWTH_BYTES,
    Glibc,
    MemoryReleaser,
)
from tests.serving.support import REPO

MIB = 1 << 20
BUSY_CPU_S = 2 * IDLE_CPU_FRACTION * CHECK_INTERVAL_S


class FakeGlibc(Glibc):
    def __init__(self) -> None:  # no libc: only what the releaser calls
        self.trims = 0

    def trim(self) -> None:
        self.trims += 1


class Process:
    """A releaser over a fake resident size and CPU clock, counting collections and trims;
    a release gives back ``releasable`` bytes."""

    def __init__(self, glibc: FakeGlibc | None = None) -> None:
        self.glibc = glibc
        self.rss = 100 * MIB
        self.cpu = 0.0
        self.releasable = 0
        self.collections = 0
        self.releaser = MemoryReleaser(glibc, lambda: self.rss, lambda: self.cpu, self._collect)

    def _collect(self) -> None:
        self.collections += 1
        self.rss -= self.releasable
        self.releasable = 0

    def check(self, busy: bool = False) -> None:
        if busy:
            self.cpu += BUSY_CPU_S
        self.releaser.check()


def test_grown_memory_is_released_once_the_idle_process_settles() -> None:
    process = Process(FakeGlibc())
    process.rss += RELEASE_GROWTH_BYTES - MIB
    process.check()
    process.check()
    assert process.collections == 0  # not enough
    process.rss += 40 * MIB
    process.releasable = RELEASE_GROWTH_BYTES + 39 * MIB
    process.check()
    assert process.collections == 0  # still moving
    process.check(busy=True)
    assert process.collections == 0  # requests are being served
    process.check()
    assert process.collections == 1
    assert process.glibc is not None and process.glibc.trims == 1
    assert process.rss == 100 * MIB
    process.check()
    assert process.collections == 1  # nothing new


def test_memory_in_use_is_not_released_again_until_the_process_grows_again() -> None:
    process = Process()
    process.rss += RELEASE_GROWTH_BYTES
    process.check()
    process.check()
    assert process.collections == 1  # freed nothing: in use
    for _ in range(3):
        process.check()
    assert process.collections == 1
    process.rss += RELEASE_GROWTH_BYTES
    process.check()
    process.check()
    assert process.collections == 2


def test_while_busy_only_large_growth_is_released() -> None:
    process = Process()
    process.rss += BUSY_RELEASE_GROWTH_BYTES - MIB  # a model run's reused temporaries
    for _ in range(3):
        process.check(busy=True)
    assert process.collections == 0
    process.rss += 2 * MIB
    process.check(busy=True)
    assert process.collections == 1
    # Shrinking lowers the mark: growing back by as much releases again.
    process.rss = 100 * MIB
    process.check()
    process.rss += RELEASE_GROWTH_BYTES
    process.check()
    process.check()
    assert process.collections == 2


def test_a_release_while_busy_does_not_hide_what_is_left_once_idle() -> None:
    process = Process()
    process.rss += BUSY_RELEASE_GROWTH_BYTES + 100 * MIB  # large requests in progress
    process.check(busy=True)
    process.check(busy=True)
    assert process.collections == 1  # all in use
    process.rss = 400 * MIB  # they ended: part unmapped, part left in malloc's free lists
    process.releasable = 300 * MIB
    process.check()
    process.check()
    assert (process.collections, process.rss) == (2, 100 * MIB)


@pytest.mark.skipif(Glibc.find() is None, reason="needs glibc")
def test_trim_returns_freed_heap_memory_and_configure_starts_one_thread() -> None:
    script = textwrap.dedent(
        """
        import threading
        from serving.memory import Glibc, configure_allocator, resident_bytes

        configure_allocator()
        configure_allocator()
        names = [t.name for t in threading.enumerate()]
        assert names.count("graphserve-memory") == 1, names
        glibc = Glibc.find()
        # Heap chunks (below the mmap threshold), every tenth kept: the freed ones cannot
        # go back by shrinking the heap.
        chunks = [bytearray(100_000) for _ in range(3000)]
        kept = chunks[::10]
        del chunks
        before = resident_bytes()
        glibc.trim()
        after = resident_bytes()
        assert before - after > 150 << 20, (before >> 20, after >> 20)
        print("ok", len(kept))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
