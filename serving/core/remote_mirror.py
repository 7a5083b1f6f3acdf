"""Model base paths on object storage, mirrored into local directories the file-system source
watches.

Object stores have no events and no directories to rename into place, so each remote base path
is polled (every ``--file_system_poll_wait_seconds``): its numeric children are versions, as on
a disk. A version is downloaded only once it is whole (``settle.missing_parts`` on its object
list, reading ``saved_model.pb`` when no variables are listed yet) and its object list (names, sizes, ETags) is the same on two polls in a row, so a version
still being uploaded is never loaded; and only the versions the model's policy wants are
downloaded. A download goes to a staging directory the source ignores and is renamed into
place whole; a version whose objects change is downloaded again and renamed over the old copy,
which the manager sees as a directory replaced in place (a swap without a gap). A version the
policy no longer wants, or that is gone from the store, has its local copy removed, and the
source unloads it. A failed listing keeps what is there; a failed download is reported for the
version's status (``on_unservable``), with credentials taken out of the message, and retried at
the next poll, while the copy already there (or, for a newer version, the older one) serves.

The local copies live under one cache directory per server, emptied at start.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from runtime.errors import OpError, UnavailableError
from runtime.saved_model import parse_saved_model, restores_variables
from serving.config import LatestVersions, ModelConfig, SpecificVersions, VersionPolicy
from serving.core.aspired import UnservableCallback
from serving.core.settle import SAVED_MODEL_FILES, missing_parts
from serving.object_storage import open_filesystem, redact
from serving.storage_path import parse_version

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
    # The last failed download of each version: what it was of, and why (logged once).
    failed: dict[int, tuple[Listing, str]] = field(default_factory=dict)
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

    def close(self, wait_s: float = 5.0) -> None:
        """Stop polling and remove the local copies; a poll stuck on an unreachable store (the
        clients retry for half a minute) is left behind after ``wait_s``, with its copies,
        which the next start empties."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait_s)
        if not self._lock.acquire(timeout=wait_s):
            log.warning("Left the model cache as it is: a poll of object storage is still running")
            return
        try:
            for model in self._models.values():
                shutil.rmtree(model.local, ignore_errors=True)
            self._models = {}
        finally:
            self._lock.release()

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
        # Highest first, each version is made local (downloaded if its objects changed) until
        # the policy has enough; a version that cannot be, or whose download fails, is passed
        # over, so an older one keeps serving in its place.
        policy = model.config.version_policy
        enough = max(policy.num_versions, 1) if isinstance(policy, LatestVersions) else None
        wanted: set[int] = set()
        for version in candidates(policy, list(versions)):
            if enough is not None and len(wanted) >= enough:
                break
            if self._make_local(model, fs, version, versions[version]):
                wanted.add(version)
        for known in (model.seen, model.failed):
            for version in [v for v in known if v not in versions]:
                del known[version]
        for version in [v for v in model.copied if v not in wanted]:
            shutil.rmtree(model.local / str(version), ignore_errors=True)
            del model.copied[version]
            log.info("Removed the local copy of version %d of servable %s", version,
                     model.config.name)

    def _make_local(self, model: RemoteModel, fs: Any, version: int, path: str) -> bool:
        """Whether version ``version`` (at ``path`` in the store) has a local copy after this
        poll: its current objects once whole and unchanged since the last poll, downloaded
        if need be; else the copy there is."""
        listing = _listing(fs, path)
        settled = model.seen.get(version) == listing
        model.seen[version] = listing
        if model.copied.get(version) == listing:
            return True
        if settled and _whole(fs, path, listing) and self._download(
            model, fs, version, path, listing
        ):
            return True
        return version in model.copied  # keep serving the older copy meanwhile

    def _download(
        self, model: RemoteModel, fs: Any, version: int, path: str, listing: Listing
    ) -> bool:
        shown = f"{model.config.remote.rstrip('/')}/{version}"  # as configured, with its scheme
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
                f"{shown}: {message}"
            )
            if model.failed.get(version) != (listing, error.message):  # once, not every retry
                model.failed[version] = (listing, error.message)
                log.error("%s", error.message)
                if self._on_unservable is not None:
                    self._on_unservable(model.config.name, version, error)
            return False
        old = model.local / f".old-{version}"
        if target.exists():
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        model.copied[version] = listing
        model.failed.pop(version, None)
        log.info("Downloaded version %d of servable %s from %s", version, model.config.name,
                 shown)
        return True


def _whole(fs: Any, path: str, listing: Listing) -> bool:
    names = {rel for rel, _, _ in listing}
    return missing_parts(names, partial(_restores_variables, fs, path, names)) is None


def _restores_variables(fs: Any, path: str, names: set[str]) -> bool:
    """Whether the version's SavedModel file restores variables (so a version whose
    ``saved_model.pb`` was uploaded first waits for them). Asked only while no variables file
    is listed, and the file is small then; one that cannot be read or parsed says no, so the
    download and the loader report what is wrong."""
    for name in SAVED_MODEL_FILES:
        if name in names:
            try:
                data = fs.cat_file(f"{path}/{name}")
                return restores_variables(parse_saved_model(data, name, path))
            except Exception:  # noqa: BLE001 - any client or parse error: let the load tell
                return False
    return False


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
