"""What a source tells the manager: the complete list of versions a model should have loaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class AspiredVersion:
    """One version a source wants served, and the directory it loads from."""

    version: int
    path: Path


# (model name, every version that model should now have). Each call supersedes the previous
# list for that name; an empty list asks for all of the model's versions to be unloaded.
AspiredVersionsCallback = Callable[[str, Sequence[AspiredVersion]], None]
