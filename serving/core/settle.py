"""When a version directory is safe to load: every required file present, and nothing changing.

TensorFlow Serving loads a version directory the moment its name appears, so a model copied in
file by file is loaded half-written unless the operator renames it into place atomically. Here a
version directory only counts once it is *complete*:

* ``saved_model.pb`` (or ``saved_model.pbtxt``) is present, or else a TensorFlow Lite
  ``model.tflite``: such a directory is whole as it is, and its load fails with a clear error
  (``model_format.py``) instead of the version waiting for a ``saved_model.pb`` that never comes;
* if ``variables/`` holds any variables files, ``variables.index`` and every data shard
  ``variables.data-0000i-of-0000M`` for i in 0..M-1 are present (the count M is in the names);
* a snapshot of everything under it (relative path, size, mtime_ns) has not changed for
  ``settle_seconds``, which covers files still being written and extras such as ``assets/``.

A directory whose files and own mtime are all older than the settle time when it is first seen
(a model renamed into place, or already there at start-up) is quiet at once; one being copied
has fresh mtimes and waits.

Once seen complete, a directory stays complete for as long as the same directory (``Identity``)
exists at that path, so touching a loaded model never takes it away. A directory that is
replaced (removed and recreated, or a symlink pointed elsewhere) settles again from scratch, and
its identity tells the manager it holds new content.

A directory that cannot become complete as it stands (a dangling symlink or a symlink loop at or
under it, an unreadable directory, a file where a directory belongs, required files still absent)
is *unservable* once that has held unchanged for ``report_after_s``: the source reports it, with
the reason, so the version shows in the status API instead of waiting silently.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import (
    FailedPreconditionError,
    NotFoundError,
    OpError,
    PermissionDeniedError,
)
from runtime.saved_model import read_saved_model, restores_variables

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
TFLITE_MODEL_FILE = "model.tflite"  # TensorFlow Serving's name for a version's TFLite model
VARIABLES_INDEX = "variables/variables.index"
_SHARD = re.compile(r"variables/variables\.data-(\d+)-of-(\d+)")

# (relative posix path, size, mtime_ns); directories carry size -1 so an empty one still counts.
Entry = tuple[str, int, int]
Snapshot = frozenset[Entry]
# Which directory a version path is: (st_dev, st_ino, st_ctime_ns). The inode alone is not enough:
# a directory removed and made again under the same name often gets the freed inode back, but
# never the old ctime. (A change to the directory's own entries, or its mode, changes the ctime
# too, and then counts as new content: harmless, as new content swaps in without a gap.)
Identity = tuple[int, int, int]


def identity_of(info: os.stat_result) -> Identity:
    return (info.st_dev, info.st_ino, info.st_ctime_ns)

# An incomplete directory is reported unservable once unchanged this long (and never sooner than
# the settle time): long enough that a copy pausing between files is not reported.
REPORT_AFTER_SECONDS = 3.0


@dataclass(frozen=True)
class Fault:
    """Why a version directory cannot be loaded as it stands; unlike a change in progress it
    persists until someone fixes the directory."""

    kind: type[OpError]
    reason: str

    def error(self, where: str) -> OpError:
        return self.kind(f"{where}: {self.reason}")


def missing_parts(files: Collection[str], restores_variables: Callable[[], bool]) -> str | None:
    """Why a version directory holding ``files`` (relative posix paths of regular files) is not
    a whole SavedModel yet, or None when every required file is there (or it is a TFLite model,
    which is a single file). ``restores_variables`` tells, from the SavedModel file, whether
    variables are to come; it is asked only when no variables file is there yet."""
    if not any(name in files for name in SAVED_MODEL_FILES):
        return None if TFLITE_MODEL_FILE in files else "no saved_model.pb"
    shards: dict[int, set[int]] = {}
    for name in files:
        match = _SHARD.fullmatch(name)
        if match is not None:
            shards.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if VARIABLES_INDEX not in files:
        # A SavedModel without variables has no index and no shards; shards alone mean the
        # index (written last by TensorFlow, copied in any order) is still to come, and so does
        # a graph with a restore op whose variables have not started arriving.
        if shards or restores_variables():
            return f"no {VARIABLES_INDEX}"
        return None
    if not shards:
        return "no variables data shard"
    if len(shards) > 1:
        counts = ", ".join(str(n) for n in sorted(shards))
        return f"variables data shards disagree on the shard count ({counts})"
    ((count, present),) = shards.items()
    absent = sorted(set(range(count)) - present)
    if absent:
        return f"no variables/variables.data-{absent[0]:05d}-of-{count:05d}"
    return None


def _restores_variables(version_dir: Path) -> bool:
    """Whether the SavedModel file in ``version_dir`` restores variables; one that cannot be
    read or parsed says no, so the loader reports what is wrong with it."""
    try:
        return restores_variables(read_saved_model(version_dir))
    except (OSError, OpError):
        return False


def path_fault(path: Path, err: OSError, rel: str = "") -> Fault | None:
    """The lasting fault behind a failed stat/listing of ``path`` (shown as ``rel``), or None
    when it simply is not there (any more): a walk racing a removal."""
    shown = rel or path.name
    if isinstance(err, PermissionError):
        return Fault(PermissionDeniedError, f"cannot read {shown}: Permission denied")
    if err.errno == errno.ELOOP:
        return Fault(FailedPreconditionError, f"symbolic link loop at {shown}")
    if isinstance(err, FileNotFoundError | NotADirectoryError):
        try:
            target = os.readlink(path)
        except OSError:
            return None  # gone: not a link, so nothing dangles
        return Fault(NotFoundError, f"{shown} is a dangling symbolic link (to {target})")
    return Fault(FailedPreconditionError, f"cannot read {shown}: {os.strerror(err.errno or 0)}")


def snapshot(version_dir: Path) -> Snapshot | Fault | None:
    """Every file and directory under ``version_dir``; a Fault when something under it cannot
    be read; None when the walk raced a change.

    Symlinks are followed (a symlinked ``variables/`` is common); a directory reached twice is
    walked once, so a symlink cycle through directories cannot loop."""
    entries: list[Entry] = []
    seen: set[tuple[int, int]] = set()
    pending = [(version_dir, "")]
    while pending:
        directory, prefix = pending.pop()
        rel = prefix.removesuffix("/")
        try:
            info = directory.stat()
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(directory) as listing:
                children = list(listing)
        except OSError as err:
            return path_fault(directory, err, rel or ".")
        for child in children:
            rel = prefix + child.name
            try:
                info = child.stat()
            except OSError as err:
                return path_fault(Path(child.path), err, rel)
            if stat.S_ISDIR(info.st_mode):
                entries.append((rel, -1, 0))
                pending.append((Path(child.path), rel + "/"))
            else:
                entries.append((rel, info.st_size, info.st_mtime_ns))
    return frozenset(entries)


@dataclass(frozen=True)
class Readiness:
    """Whether a version directory may be loaded (and which directory it is); when not, why,
    when to look again should nothing change before then (the moment it turns complete or is to
    be reported), and the fault that makes it unservable once that has lasted."""

    complete: bool
    reason: str = ""
    ready_at: float | None = None
    identity: Identity | None = None
    unservable: Fault | None = None


@dataclass(frozen=True)
class _Observed:
    identity: Identity
    state: Snapshot | Fault
    since: float  # clock time this exact state was first seen


class SettleTracker:
    """Tracks the version directories of one base path between scans.

    Not thread-safe: the file-system source calls it under its scan lock."""

    def __init__(
        self,
        settle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        report_after_s: float = REPORT_AFTER_SECONDS,
    ) -> None:
        self._settle_seconds = max(settle_seconds, 0.0)
        self._report_after_s = max(report_after_s, self._settle_seconds)
        self._clock = clock
        self._wall_clock = wall_clock
        self._complete: dict[Path, Identity] = {}
        self._observed: dict[Path, _Observed] = {}

    def check(self, path: Path) -> Readiness:
        now = self._clock()
        try:
            info = path.stat()
        except OSError as err:
            fault = path_fault(path, err)
            if fault is None:
                self._forget(path)
                return Readiness(False, "gone")
            self._complete.pop(path, None)
            try:
                link = path.lstat()  # the broken link itself stands for the directory
            except OSError:
                link = None
            identity = (0, 0, 0) if link is None else identity_of(link)
            return self._faulty(path, identity, fault, now)
        identity = identity_of(info)
        if self._complete.get(path) == identity:
            return Readiness(True, identity=identity)
        self._complete.pop(path, None)
        if not stat.S_ISDIR(info.st_mode):
            fault = Fault(FailedPreconditionError, "not a directory")
            return self._faulty(path, identity, fault, now)
        snap = snapshot(path)
        if snap is None:
            # Something moved while we looked: surely not quiet. Look again after a settle time.
            self._observed.pop(path, None)
            return Readiness(False, "changing", now + self._settle_seconds)
        if isinstance(snap, Fault):
            return self._faulty(path, identity, snap, now)
        seen = self._observe(path, identity, snap, now, info.st_mtime_ns)
        missing = missing_parts(
            {rel for rel, size, _ in snap if size >= 0}, lambda: _restores_variables(path)
        )
        if missing is not None:
            return self._unservable_after(seen, Fault(NotFoundError, missing), now)
        ready_at = seen.since + self._settle_seconds
        if now < ready_at:
            return Readiness(False, f"changed less than {self._settle_seconds:g}s ago", ready_at)
        del self._observed[path]
        self._complete[path] = identity
        return Readiness(True, identity=identity)

    def _observe(
        self, path: Path, identity: Identity, state: Snapshot | Fault, now: float, mtime_ns: int
    ) -> _Observed:
        """The observation of ``path``, restarted whenever what is seen there changes."""
        seen = self._observed.get(path)
        if seen is None or seen.identity != identity or seen.state != state:
            since = now
            if (
                seen is None
                and not isinstance(state, Fault)
                and self._untouched_for(mtime_ns, state) >= self._settle_seconds
            ):
                since = now - self._settle_seconds
            seen = _Observed(identity, state, since)
            self._observed[path] = seen
        return seen

    def _faulty(self, path: Path, identity: Identity, fault: Fault, now: float) -> Readiness:
        return self._unservable_after(self._observe(path, identity, fault, now, 0), fault, now)

    def _unservable_after(self, seen: _Observed, fault: Fault, now: float) -> Readiness:
        """Waiting on ``fault``; unservable once it has lasted ``report_after_s``."""
        report_at = seen.since + self._report_after_s
        if now < report_at:
            return Readiness(False, fault.reason, report_at, seen.identity)
        return Readiness(False, fault.reason, None, seen.identity, unservable=fault)

    def _untouched_for(self, dir_mtime_ns: int, snap: Snapshot) -> float:
        """Seconds since anything in the directory (or the directory itself) was modified."""
        newest_ns = max([dir_mtime_ns, *(mtime for _, size, mtime in snap if size >= 0)])
        return self._wall_clock() - newest_ns / 1e9

    def retain(self, paths: Iterable[Path]) -> None:
        """Forget every directory not in ``paths`` (it disappeared from the base path)."""
        keep = set(paths)
        for path in [p for p in self._complete if p not in keep]:
            del self._complete[path]
        for path in [p for p in self._observed if p not in keep]:
            del self._observed[path]

    def _forget(self, path: Path) -> None:
        self._complete.pop(path, None)
        self._observed.pop(path, None)
