"""File-system events for the source: one watchdog observer, one recursive watch per base path.

Events only tell the source which paths changed; it decides what to rescan. Opens and reads are
not watched (the source's own scans and the loader reading a model would otherwise trigger
rescans forever).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

log = logging.getLogger("graphserve")

# Events that can change what a base path holds. Opens and reads are left out on purpose (our own
# scans and the loader reading a model would otherwise trigger rescans forever), and so are
# in-place writes: each ends in a close-after-write event, and a settling version is rescanned
# when its settle time is up anyway.
_WATCHED_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileMovedEvent,
    DirMovedEvent,
    FileClosedEvent,
]



class _EventHandler(FileSystemEventHandler):
    def __init__(self, on_paths: Callable[[tuple[str, ...]], None]) -> None:
        self._on_paths = on_paths

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._on_paths((os.fsdecode(event.src_path), os.fsdecode(event.dest_path)))


class BasePathWatches:
    """The watchdog observer and one recursive watch per existing base path.

    A base path that appears later is watched from the scan that finds it; one that is replaced
    (new inode) is watched again. Failing to watch (inotify limits) is logged once per path and
    left to polling. Not thread-safe: used under the source's scan lock."""

    def __init__(self, on_paths: Callable[[tuple[str, ...]], None], poll_wait: float) -> None:
        self._handler = _EventHandler(on_paths)
        self._poll_wait = poll_wait
        self._observer: BaseObserver | None = None
        self._watches: dict[str, tuple[ObservedWatch, tuple[int, int]]] = {}
        self._failed: set[str] = set()

    def start(self) -> bool:
        observer = Observer()
        try:
            observer.start()
        except (OSError, RuntimeError) as err:
            log.warning(
                "File-system events unavailable (%s); relying on polling every %gs",
                err,
                self._poll_wait,
            )
            return False
        self._observer = observer
        return True

    def sync(self, base_paths: Iterable[str]) -> None:
        if self._observer is None:
            return
        wanted: dict[str, tuple[int, int]] = {}
        for path in base_paths:
            try:
                info = os.stat(path)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                wanted[path] = (info.st_dev, info.st_ino)
        for path, (watch, identity) in list(self._watches.items()):
            if wanted.get(path) != identity:
                self._unschedule(path, watch)
        for path in wanted.keys() - self._watches.keys():
            try:
                watch = self._observer.schedule(
                    self._handler, path, recursive=True, event_filter=_WATCHED_EVENTS
                )
            except OSError as err:
                if path not in self._failed:
                    log.warning(
                        "Cannot watch %s for changes (%s); relying on polling every %gs",
                        path,
                        err,
                        self._poll_wait,
                    )
                    self._failed.add(path)
                continue
            self._failed.discard(path)
            self._watches[path] = (watch, wanted[path])

    def paths(self) -> list[str]:
        return sorted(self._watches)

    def stop(self) -> None:
        if self._observer is None:
            return
        self._observer.stop()
        self._observer.join()
        self._observer = None
        self._watches.clear()

    def _unschedule(self, path: str, watch: ObservedWatch) -> None:
        del self._watches[path]
        assert self._observer is not None
        try:
            self._observer.unschedule(watch)
        except KeyError:
            pass  # the observer already dropped it
