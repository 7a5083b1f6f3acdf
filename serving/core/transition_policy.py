"""Version transition policies: pure functions choosing a model's next load or unload.

A policy sees a snapshot of every version the manager holds for one model (its harness state
and whether the latest aspired list names it) and returns at most one action. The manager
carries the action out; the policy never touches a harness. Both policies follow TensorFlow
Serving's rules:

* ``availability_preserving`` (the model server's): unload the lowest un-aspired READY version
  when nothing is aspired, or an aspired version is READY, or more than one un-aspired version
  is READY -- so the last serving version stays until its replacement is READY. Otherwise load
  the highest aspired NEW version. New before old: memory peaks at two versions.
* ``resource_preserving``: unload any un-aspired READY version first; load nothing while an
  un-aspired version is still on its way out (not DISABLED/ERROR); then load the highest aspired
  NEW version. Old before new: a gap in availability, never two versions in memory.

Only NEW versions are ever loaded, so a version that failed (ERROR) and stays aspired is not
retried; a version leaving the aspired list and coming back gets a fresh harness from the
manager, hence a fresh load.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from serving.core.harness import HarnessState


class ActionKind(enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    version: int


@dataclass(frozen=True)
class VersionSnapshot:
    """One managed version of a model as a policy sees it."""

    version: int
    state: HarnessState
    aspired: bool


TransitionPolicy = Callable[[Sequence[VersionSnapshot]], Action | None]

_FINISHED = (HarnessState.DISABLED, HarnessState.ERROR)


def highest_aspired_new(versions: Sequence[VersionSnapshot]) -> int | None:
    candidates = [v.version for v in versions if v.aspired and v.state is HarnessState.NEW]
    return max(candidates, default=None)


def availability_preserving(versions: Sequence[VersionSnapshot]) -> Action | None:
    has_aspired = any(v.aspired for v in versions)
    aspired_ready = any(v.aspired and v.state is HarnessState.READY for v in versions)
    unaspired_ready = [
        v.version for v in versions if not v.aspired and v.state is HarnessState.READY
    ]
    if unaspired_ready and (not has_aspired or aspired_ready or len(unaspired_ready) > 1):
        return Action(ActionKind.UNLOAD, min(unaspired_ready))
    to_load = highest_aspired_new(versions)
    return None if to_load is None else Action(ActionKind.LOAD, to_load)


def resource_preserving(versions: Sequence[VersionSnapshot]) -> Action | None:
    unaspired_ready = [
        v.version for v in versions if not v.aspired and v.state is HarnessState.READY
    ]
    if unaspired_ready:
        # TensorFlow takes the first in its map's order; the lowest is the deterministic pick.
        return Action(ActionKind.UNLOAD, min(unaspired_ready))
    if any(not v.aspired and v.state not in _FINISHED for v in versions):
        return None
    to_load = highest_aspired_new(versions)
    return None if to_load is None else Action(ActionKind.LOAD, to_load)
