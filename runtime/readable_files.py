"""Which files a loaded model's kernels may open: the version's own, never the server's.

A graph can name a file to read (a vocabulary for a table, the checkpoint), and a request can feed
such a name: a table initialized from ``/etc/passwd`` and exported would hand its lines to the
caller. So every kernel that opens a path asks its session's ``ReadableFiles`` first. The path's
real path (symlinks resolved, ``..`` normalized) must lie under a root for what the file is for:

- a data file (``FileUse.ASSET``, e.g. a table's text file): ``assets/`` or ``assets.extra/``;
- a checkpoint (``FileUse.CHECKPOINT``, RestoreV2): those or ``variables/``.

The roots are the real paths of those directories of the version: whoever deploys a model may make
the version directory, or its ``variables/``, a symlink (a shared checkpoint), and that keeps
working; a path below a root that leads out of it is refused.

``load_saved_model`` always sets the roots. A graph built in code (tests, tools) has no version
directory: its resource manager carries ``UNRESTRICTED`` and its kernels read whatever the code
that built the graph could read.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runtime.errors import PermissionDeniedError


class FileUse(enum.Enum):
    """What a kernel reads a file for; the value is how messages name such a file."""

    ASSET = "data file"
    CHECKPOINT = "checkpoint"


_ASSET_DIRS = ("assets", "assets.extra")
ROOT_DIRS: Mapping[FileUse, tuple[str, ...]] = {
    FileUse.ASSET: _ASSET_DIRS,
    FileUse.CHECKPOINT: (*_ASSET_DIRS, "variables"),
}


def dirs_text(use: FileUse) -> str:
    """Where a file for ``use`` may be, for messages: ``its version directory's assets/ or ...``."""
    dirs = [f"{name}/" for name in ROOT_DIRS[use]]
    listed = (", ".join(dirs[:-1]) + f" or {dirs[-1]}") if len(dirs) > 1 else dirs[0]
    return f"its version directory's {listed}"


def within(real_path: str, real_roots: Iterable[str]) -> bool:
    """Whether ``real_path`` is one of ``real_roots`` or lies below one (both already real
    paths: comparing unresolved paths would let ``..`` and symlinks through)."""
    for root in real_roots:
        if real_path == root or real_path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


@dataclass(frozen=True)
class ReadableFiles:
    """The real roots kernels may read under, by use; ``roots`` None means unrestricted."""

    roots: Mapping[FileUse, tuple[str, ...]] | None

    @classmethod
    def of_version(cls, export_dir: str | os.PathLike[str]) -> ReadableFiles:
        base = os.path.realpath(export_dir)
        return cls({
            use: tuple(os.path.realpath(os.path.join(base, name)) for name in names)
            for use, names in ROOT_DIRS.items()
        })

    def allows(self, path: str, use: FileUse) -> bool:
        if self.roots is None:
            return True
        return within(os.path.realpath(path), self.roots[use])

    def check(self, path: str, use: FileUse, op: str) -> None:
        """Raise PERMISSION_DENIED unless ``path`` may be read for ``use``. Called before the
        file is opened, so a refused path is never read, nor is its existence revealed."""
        if not self.allows(path, use):
            # The path as given, never where it resolves to: that would tell a caller where
            # the server's links lead.
            raise PermissionDeniedError(
                f"{op} may not read '{path}': a served model reads {use.value}s only from "
                f"{dirs_text(use)}",
                op=op,
            )


UNRESTRICTED = ReadableFiles(None)


__all__ = ["ROOT_DIRS", "UNRESTRICTED", "FileUse", "ReadableFiles", "dirs_text", "within"]
