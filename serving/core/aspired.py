"""What a source tells the manager: the complete list of versions a model should have loaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import OpError
from serving.core.settle import Identity


@dataclass(frozen=True, order=True)
class AspiredVersion:
    """One version a source wants served, the directory it loads from and which directory that
    is (``settle.Identity``), so a directory replaced in place under the same number is new
    content (None: the source does not tell)."""

    version: int
    path: Path
    identity: Identity | None = None


# (model name, every version that model should now have). Each call supersedes the previous
# list for that name; an empty list asks for all of the model's versions to be unloaded.
AspiredVersionsCallback = Callable[[str, Sequence[AspiredVersion]], None]

# (model name, version, why it cannot be loaded as it stands): a version directory a source found
# but cannot aspire, reported so that it shows in the model's status; None once that is over.
UnservableCallback = Callable[[str, int, OpError | None], None]
