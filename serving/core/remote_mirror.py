"""Model base paths on object storage, mirrored into local directories the file-system source
watches.

Object stores have no events and no directories to rename into place, so each remote base path
is polled (every ``--file_system_poll_wait_seconds``): its numeric children are versions, as on
a disk. A version is downloaded only once it is whole (``settle.missing_parts`` on its object
list) and its object list (names, sizes, ETags) is the same on two polls in a row, so a version
still being uploaded is never loaded; and only the versions the model's policy wants are
downloaded. A download goes to a staging directory the source ignores and is renamed into
place whole; a version whose objects change is downloaded again and renamed over the old copy,
which the manager sees as a directory replaced in place (a swap without a gap). A version the
policy no longer wants, or that is gone from the store, has its local copy removed, and the
source unloads it. A failed listing keeps what is there; a failed download is reported for the
version's status (``on_unservable``), with credentials taken out of the message.

The local copies live under one cache directory per server, emptied at start.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runtime.errors import OpError, UnavailableError
from serving.config import LatestVersions, ModelConfig, SpecificVersions, VersionPolicy
from serving.core.aspired import UnservableCallback
from serving.core.settle import missing_parts
from serving.object_storage import open_filesystem, redact
from serving.storage_path import aspired_versions, parse_version

log = logging.getLogger("graphserve")

Listing = frozenset[tuple[str, int, str]]  # (relative path, size, ETag or mtime)


def candidates(policy: VersionPolicy, versions: Sequence[int]) -> list[int]:
    """Versions worth listing, highest first: the policy's (specific ones only), all of them
    otherwise (a newer one may be incomplete, so ``latest`` may need an older one)."""
    ordered = sorted(versions, reverse=True)
    if isinstance(policy, SpecificVersions):
        listed = set(policy.versions)
        return [v for v in ordered if v in listed]
    return ordered


@dataclass
class RemoteModel:
    """One model's remote base path and what is known of it between polls."""

    config: ModelConfig  # the remote config (``remote`` set)
    local: Path
    seen: dict[int, Listing]  # each version's object list at the last poll
    copied: dict[int, Listing]  # what each local copy was downloaded from
    missing: bool = False  # the base path was not found (logged once until it is back)


class RemoteMirrors:
    """Mirrors every remote model; ``localize`` gives the configs the source should watch."""

    def __init__(
        self,
        cache_dir: Path,
        poll_wait_seconds: float,
        on_unservable: UnservableCallback | None = None,
        open_fs: Callable[[str], Any] = open_filesystem,
    ) -> None:
        self._cache = cache_dir
        self._poll = poll_wait_seconds
        self._on_unservable = on_unservable
        self._open_fs = open_fs
        self._lock = threading.Lock()  # one sync at a time
        self._models: dict[str, RemoteModel] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def localize(self, configs: Sequence[ModelConfig]) -> list[ModelConfig]:
        """The configs with each remote base path replaced by its local mirror, synced once
        before this returns (so the source finds what is already whole)."""
        with self._lock:
            models: dict[str, RemoteModel] = {}
            for config in configs:
                if not config.remote:
                    continue
                known = self._models.get(config.name)
                if known is not None and known.config == config:
                    models[config.name] = known
                    continue
                digest = hashlib.sha256(config.remote.encode()).hexdigest()[:16]
                local = self._cache / f"{config.name}-{digest}"
                shutil.rmtree(local, ignore_errors=True)
                local.mkdir(parents=True)
                models[config.name] = RemoteModel(config, local, {}, {})
            for name, model in self._models.items():
                if models.get(name) is not model:
                    shutil.rmtree(model.local, ignore_errors=True)
            self._models = models
            for model in models.values():
                self._sync(model)
            localized = [
                replace(c, base_path=models[c.name].local) if c.remote else c for c in configs
            ]
        if models and self._thread is None and self._poll > 0:
            self._thread = threading.Thread(target=self._run, name="remote-mirror", daemon=True)
            self._thread.start()
        return localized

    def sync(self) -> None:
        """One poll of every remote model."""
        with self._lock:
            for model in self._models.values():
                self._sync(model)

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.sync()
            except Exception:  # the next poll may succeed
                log.exception("Polling remote model base paths failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            for model in self._models.values():
                shutil.rmtree(model.local, ignore_errors=True)
            self._models = {}

    # -- one model --------------------------------------------------------------------------

    def _sync(self, model: RemoteModel) -> None:
        url = model.config.remote.rstrip("/")
        try:
            fs = self._open_fs(url)
            fs.invalidate_cache()  # listings are cached by the client; every poll looks afresh
            children = fs.ls(url, detail=False)
        except OpError as err:
            log.error("%s", err.message)
            return
        except FileNotFoundError:
            # On an object store an empty prefix does not exist either: as for a missing local
            # base path, what is serving keeps serving until versions appear again.
            if not model.missing:
                log.warning("Could not find base path %s for servable %s; will retry", url,
                            model.config.name)
            model.missing = True
            return
        except Exception as err:  # noqa: BLE001 - any client error: keep what is there
            log.error("Could not list %s for servable %s: %s", url, model.config.name,
                      redact(f"{type(err).__name__}: {err}"))
            return
        model.missing = False
        versions: dict[int, str] = {}
        for child in children:
            version = parse_version(str(child).rstrip("/").rsplit("/", 1)[-1])
            if version is not None:
                versions[version] = str(child).rstrip("/")
        complete: dict[int, Listing] = {}
        policy = model.config.version_policy
        enough = max(policy.num_versions, 1) if isinstance(policy, LatestVersions) else None
        for version in candidates(policy, list(versions)):
            if enough is not None and len(complete) >= enough:
                break
            listing = _listing(fs, versions[version])
            settled = model.seen.get(version) == listing
            model.seen[version] = listing
            whole = missing_parts({rel for rel, _, _ in listing}) is None
            if (whole and settled) or (version in model.copied and model.copied[version] == listing):
                complete[version] = listing
            elif version in model.copied:
                complete[version] = model.copied[version]  # keep serving the copy meanwhile
        for version in [v for v in model.seen if v not in versions]:
            del model.seen[version]
        wanted = set(aspired_versions(policy, complete))
        for version in sorted(wanted):
            if model.copied.get(version) != complete[version]:
                self._download(model, fs, version, versions[version], complete[version])
        for version in [v for v in model.copied if v not in wanted]:
            shutil.rmtree(model.local / str(version), ignore_errors=True)
            del model.copied[version]
            log.info("Removed the local copy of version %d of servable %s", version,
                     model.config.name)

    def _download(
        self, model: RemoteModel, fs: Any, version: int, path: str, listing: Listing
    ) -> None:
        staging = model.local / f".staging-{version}"
        target = model.local / str(version)
        shutil.rmtree(staging, ignore_errors=True)
        try:
            for rel, _, _ in sorted(listing):
                dest = staging / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(f"{path}/{rel}", str(dest))
        except Exception as err:  # noqa: BLE001 - any client error is the version's status
            shutil.rmtree(staging, ignore_errors=True)
            message = redact(f"{type(err).__name__}: {err}")
            error = UnavailableError(
                f"Could not download version {version} of servable {model.config.name} from "
                f"{path}: {message}"
            )
            log.error("%s", error.message)
            if self._on_unservable is not None:
                self._on_unservable(model.config.name, version, error)
            return
        old = model.local / f".old-{version}"
        if target.exists():
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        model.copied[version] = listing
        log.info("Downloaded version %d of servable %s from %s", version, model.config.name,
                 path)


def _listing(fs: Any, path: str) -> Listing:
    """Every object under ``path``: (relative path, size, ETag or modification time)."""
    found = fs.find(path, detail=True)
    entries = []
    for name, info in found.items():
        rel = str(name)[len(path.rstrip("/")) + 1:] if str(name).startswith(path) else str(name)
        if not rel or info.get("type") == "directory":
            continue
        tag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("mtime")
        entries.append((rel, int(info.get("size") or 0), str(tag or "")))
    return frozenset(entries)
