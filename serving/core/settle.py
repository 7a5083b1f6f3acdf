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

Once seen complete, a directory stays complete for as long as the same directory (same device and
inode) exists at that path, so touching a loaded model never takes it away. A directory that is
replaced (removed and recreated, or a symlink pointed elsewhere) settles again from scratch.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
TFLITE_MODEL_FILE = "model.tflite"  # TensorFlow Serving's name for a version's TFLite model
VARIABLES_INDEX = "variables/variables.index"
_SHARD = re.compile(r"variables/variables\.data-(\d+)-of-(\d+)")

# (relative posix path, size, mtime_ns); directories carry size -1 so an empty one still counts.
Entry = tuple[str, int, int]
Snapshot = frozenset[Entry]
_Identity = tuple[int, int]


def missing_parts(files: Collection[str]) -> str | None:
    """Why a version directory holding ``files`` (relative posix paths of regular files) is not
    a whole SavedModel yet, or None when every required file is there (or it is a TFLite model,
    which is a single file)."""
    if not any(name in files for name in SAVED_MODEL_FILES):
        return None if TFLITE_MODEL_FILE in files else "no saved_model.pb"
    shards: dict[int, set[int]] = {}
    for name in files:
        match = _SHARD.fullmatch(name)
        if match is not None:
            shards.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if VARIABLES_INDEX not in files:
        # A SavedModel without variables has no index and no shards; shards alone mean the
        # index (written last by TensorFlow, copied in any order) is still to come.
        return f"no {VARIABLES_INDEX}" if shards else None
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


def snapshot(version_dir: Path) -> Snapshot | None:
    """Every file and directory under ``version_dir``, or None when the walk raced a change.

    Symlinks are followed (a symlinked ``variables/`` is common); a directory reached twice is
    walked once, so a symlink cycle cannot loop."""
    entries: list[Entry] = []
    seen: set[_Identity] = set()
    pending = [(version_dir, "")]
    try:
        while pending:
            directory, prefix = pending.pop()
            info = directory.stat()
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(directory) as children:
                for child in children:
                    rel = prefix + child.name
                    info = child.stat()
                    if stat.S_ISDIR(info.st_mode):
                        entries.append((rel, -1, 0))
                        pending.append((Path(child.path), rel + "/"))
                    else:
                        entries.append((rel, info.st_size, info.st_mtime_ns))
    except OSError:
        return None
    return frozenset(entries)


@dataclass(frozen=True)
class Readiness:
    """Whether a version directory may be loaded; when not, why, and (if only waiting for
    quiet) the clock time at which it becomes complete should nothing change before then."""

    complete: bool
    reason: str = ""
    ready_at: float | None = None


COMPLETE = Readiness(True)


@dataclass(frozen=True)
class _Observed:
    identity: _Identity
    snapshot: Snapshot
    since: float  # clock time this exact snapshot was first seen


class SettleTracker:
    """Tracks the version directories of one base path between scans.

    Not thread-safe: the file-system source calls it under its scan lock."""

    def __init__(
        self,
        settle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._settle_seconds = max(settle_seconds, 0.0)
        self._clock = clock
        self._wall_clock = wall_clock
        self._complete: dict[Path, _Identity] = {}
        self._observed: dict[Path, _Observed] = {}

    def check(self, path: Path) -> Readiness:
        now = self._clock()
        try:
            info = path.stat()
        except OSError:
            self._forget(path)
            return Readiness(False, "gone")
        identity = (info.st_dev, info.st_ino)
        if self._complete.get(path) == identity:
            return COMPLETE
        self._complete.pop(path, None)
        if not stat.S_ISDIR(info.st_mode):
            self._observed.pop(path, None)
            return Readiness(False, "not a directory")
        snap = snapshot(path)
        if snap is None:
            # Something moved while we looked: surely not quiet. Look again after a settle time.
            self._observed.pop(path, None)
            return Readiness(False, "changing", now + self._settle_seconds)
        seen = self._observed.get(path)
        if seen is None or seen.identity != identity or seen.snapshot != snap:
            since = now
            if seen is None and self._untouched_for(info.st_mtime_ns, snap) >= self._settle_seconds:
                since = now - self._settle_seconds
            seen = _Observed(identity, snap, since)
            self._observed[path] = seen
        missing = missing_parts({rel for rel, size, _ in snap if size >= 0})
        if missing is not None:
            return Readiness(False, missing)
        ready_at = seen.since + self._settle_seconds
        if now < ready_at:
            return Readiness(False, f"changed less than {self._settle_seconds:g}s ago", ready_at)
        del self._observed[path]
        self._complete[path] = identity
        return COMPLETE

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
