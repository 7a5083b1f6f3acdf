"""One copy of a version's weights for every worker: large constants live in a file that each
worker maps read-only, so the page cache holds them once however many workers serve them.

After a worker loads and optimizes a version, its serving graph's large constants (frozen
variables, folded batch norms, embedded tables: every ``Const`` of at least
``MIN_SHARED_BYTES`` without Python objects) are looked up in the store by the version's key
(its directory, the files in it, and the constants' names, dtypes and shapes). The first worker
to get there writes them, aligned, into ``<key>.weights``; every worker, the first included,
then swaps each constant (and the variable it was frozen from) for a read-only view of that
file, after checking the bytes are the ones it computed: the private copies are freed and the
PSS of N workers stays near one's. A constant that differs is kept private (and logged).

Entries are guarded by file locks: ``<key>.lock`` (exclusive) while an entry is written or
opened, and a shared lock on ``<key>.weights`` for as long as a worker serves from it. Before
writing, a worker removes the entries nobody holds (versions every worker has unloaded).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import mmap
import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from runtime.graph import Node
    from runtime.saved_model import LoadedModel

log = logging.getLogger("graphserve")

MIN_SHARED_BYTES = 64 << 10  # smaller constants are not worth a page-aligned slot
_ALIGN = 4096  # page-aligned slots: a view never shares a page with its neighbour


@dataclass(frozen=True)
class Shared:
    """What sharing did for one version."""

    constants: int  # constants now served from the store
    bytes: int
    private: int  # large constants kept private (their bytes differed from the store's)


def large_constants(
    model: LoadedModel, min_bytes: int = MIN_SHARED_BYTES
) -> list[tuple[Node, np.ndarray]]:
    """The serving graph's constants worth sharing, by node name."""
    found = []
    for node in model.session.graph:
        value = node.attrs.get("value") if node.op == "Const" else None
        if (
            isinstance(value, np.ndarray)
            and not value.dtype.hasobject
            and value.nbytes >= min_bytes
        ):
            found.append((node, value))
    return sorted(found, key=lambda pair: pair[0].name)


def version_key(path: Path, constants: list[tuple[Node, np.ndarray]]) -> str:
    """Names one version's weights: its directory and files as they are on disk, and what its
    optimized graph made of them."""
    digest = hashlib.sha256(str(path.resolve()).encode())
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for node, value in constants:
        digest.update(f"{node.name}:{value.dtype.str}:{value.shape}".encode())
    return digest.hexdigest()[:32]


@contextlib.contextmanager
def _locked(path: Path, operation: int) -> Iterator[bool]:
    """Hold ``flock(operation)`` on ``path`` (created if absent); yields False when a
    non-blocking request was refused."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _slots(constants: list[tuple[Node, np.ndarray]]) -> list[dict[str, object]]:
    """Each distinct array's place in the file (an array several nodes share is stored once)."""
    entries: list[dict[str, object]] = []
    seen: dict[int, int] = {}
    offset = 0
    for node, value in constants:
        if id(value) in seen:
            entries.append({**entries[seen[id(value)]], "node": node.name})
            continue
        seen[id(value)] = len(entries)
        entries.append({
            "node": node.name, "dtype": value.dtype.str, "shape": list(value.shape),
            "offset": offset, "bytes": value.nbytes,
        })
        offset += -(-value.nbytes // _ALIGN) * _ALIGN
    return entries


def _as_bytes(value: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(value).reshape(-1).view(np.uint8)


class WeightStore:
    """The run directory's store (``serving.workers.role``); thread-safe across processes."""

    def __init__(self, directory: Path, min_bytes: int = MIN_SHARED_BYTES) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.min_bytes = min_bytes

    def share(self, model: LoadedModel) -> Shared:
        """Serve ``model``'s large constants from the store, writing them there if no worker
        has yet. Raises OSError when the store cannot be written or read."""
        constants = large_constants(model, self.min_bytes)
        if not constants:
            return Shared(0, 0, 0)
        key = version_key(model.export_dir, constants)
        data, index = self.directory / f"{key}.weights", self.directory / f"{key}.json"
        with _locked(self.directory / f"{key}.lock", fcntl.LOCK_EX):
            if not index.exists():
                self._collect(keep=key)
                self._write(data, index, constants)
            fd = os.open(data, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_SH)  # held while the version serves: not collected
            entries = json.loads(index.read_text())
        try:
            mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ) if os.fstat(fd).st_size else None
            shared = _swap(model, constants, entries, mapped)
        except BaseException:
            os.close(fd)
            raise
        weakref.finalize(model, os.close, fd)
        return shared

    def _write(
        self, data: Path, index: Path, constants: list[tuple[Node, np.ndarray]]
    ) -> None:
        entries = _slots(constants)
        temp = data.with_suffix(".partial")
        written: set[object] = set()
        with open(temp, "wb") as out:
            for (_, value), entry in zip(constants, entries):
                if entry["offset"] in written:  # an array several nodes share: stored once
                    continue
                written.add(entry["offset"])
                out.seek(int(entry["offset"]))  # type: ignore[call-overload]
                out.write(_as_bytes(value).data)
        os.replace(temp, data)
        index.with_suffix(".partial-index").write_text(json.dumps(entries))
        os.replace(index.with_suffix(".partial-index"), index)

    def _collect(self, keep: str) -> None:
        """Remove the entries no worker serves from (nobody holds their shared lock)."""
        for data in self.directory.glob("*.weights"):
            key = data.stem
            if key == keep:
                continue
            with (
                _locked(self.directory / f"{key}.lock", fcntl.LOCK_EX | fcntl.LOCK_NB) as mine,
                contextlib.ExitStack() as held,
            ):
                if not mine:
                    continue
                if not held.enter_context(_locked(data, fcntl.LOCK_EX | fcntl.LOCK_NB)):
                    continue
                data.unlink(missing_ok=True)
                (self.directory / f"{key}.json").unlink(missing_ok=True)
                log.info("Weight store: removed %s (no worker serves it)", key)


def _swap(
    model: LoadedModel,
    constants: list[tuple[Node, np.ndarray]],
    entries: list[dict[str, object]],
    mapped: mmap.mmap | None,
) -> Shared:
    """Point each constant, and the variable it was frozen from, at its bytes in the file."""
    variables = {
        id(var.value): var for var in model.session.resources.variables() if var.value is not None
    }
    count = size = private = 0
    for (node, value), entry in zip(constants, entries, strict=True):
        if mapped is None or entry["node"] != node.name or entry["dtype"] != value.dtype.str:
            private += 1
            continue
        view = np.frombuffer(
            mapped, dtype=value.dtype, count=value.size, offset=int(entry["offset"])  # type: ignore[call-overload]
        ).reshape(value.shape)
        if not np.array_equal(_as_bytes(value), _as_bytes(view)):
            log.warning("Weight store: %s differs from the stored copy; kept private", node.name)
            private += 1
            continue
        node.attrs["value"] = view
        variable = variables.get(id(value))
        if variable is not None:
            variable.value = view
        count += 1
        size += value.nbytes
    return Shared(count, size, private)
