"""Version directories under a model's base path, and which of them a policy wants loaded.

TensorFlow Serving's rules: a child of the base path is a version when its whole name parses as
an int64 (``007`` is 7, ``-1`` is -1; ``v1`` and ``1.0`` are ignored). Pure functions, shared by
the start-up loader and the file-system watcher.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

from runtime.errors import InvalidArgumentError
from serving.config import AllVersions, LatestVersions, SpecificVersions, VersionPolicy

log = logging.getLogger("graphserve")
# (base path, version) pairs already warned about, so a poll does not repeat the warning.
_duplicates_warned: set[tuple[Path, int]] = set()
_VERSION = re.compile(r"[+-]?[0-9]+")


def parse_version(name: str) -> int | None:
    if _VERSION.fullmatch(name) is None:
        return None
    value = int(name)
    return value if -(2**63) <= value < 2**63 else None


def list_versions(servable: str, base_path: Path) -> dict[int, Path]:
    """Version number -> directory for every numeric child of ``base_path``."""
    try:
        children = sorted(base_path.iterdir())
    except OSError as err:
        raise InvalidArgumentError(
            f"Could not find base path {base_path} for servable {servable} with error {err}"
        ) from err
    versions: dict[int, Path] = {}
    for child in children:
        version = parse_version(child.name)
        if version is None:
            continue
        if version in versions:
            if (base_path, version) in _duplicates_warned:
                continue
            _duplicates_warned.add((base_path, version))
            log.warning(
                "Duplicate version directories detected. Version %d will be loaded from %s, "
                "%s will be ignored.", version, versions[version], child
            )
            continue
        versions[version] = child
    return versions


def aspired_versions(policy: VersionPolicy, available: Iterable[int]) -> list[int]:
    """The versions ``policy`` wants, highest first."""
    ordered = sorted(set(available), reverse=True)
    if isinstance(policy, LatestVersions):
        return ordered[: max(policy.num_versions, 1)]
    if isinstance(policy, AllVersions):
        return ordered
    if isinstance(policy, SpecificVersions):
        wanted = set(policy.versions)
        return [v for v in ordered if v in wanted]
    raise TypeError(f"unknown version policy {policy!r}")
