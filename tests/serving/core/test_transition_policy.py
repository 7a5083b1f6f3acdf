"""Transition policies: TensorFlow Serving's rules, case by case and as properties."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.core.harness import HarnessState
from serving.core.transition_policy import (
    Action,
    ActionKind,
    VersionSnapshot,
    availability_preserving,
    resource_preserving,
)

S = HarnessState
NEW, LOADING, READY, ERROR, DISABLED = S.NEW, S.LOADING, S.READY, S.ERROR, S.DISABLED


def snap(*versions: tuple[int, HarnessState, bool]) -> list[VersionSnapshot]:
    return [VersionSnapshot(v, state, aspired) for v, state, aspired in versions]


def load(version: int) -> Action:
    return Action(ActionKind.LOAD, version)


def unload(version: int) -> Action:
    return Action(ActionKind.UNLOAD, version)


AVAILABILITY_CASES = [
    pytest.param(snap(), None, id="nothing-managed"),
    pytest.param(snap((1, NEW, True)), load(1), id="first-version"),
    pytest.param(snap((1, NEW, True), (3, NEW, True), (2, NEW, True)), load(3), id="highest-first"),
    pytest.param(snap((1, READY, False), (2, NEW, True)), load(2), id="new-loads-before-old-goes"),
    pytest.param(snap((1, READY, False), (2, LOADING, True)), None, id="old-kept-while-new-loads"),
    pytest.param(
        snap((1, READY, False), (2, READY, True)), unload(1), id="old-goes-once-new-ready"
    ),
    pytest.param(snap((1, READY, False), (2, ERROR, True)), None, id="old-kept-when-new-failed"),
    pytest.param(snap((1, READY, False)), unload(1), id="nothing-aspired-unloads"),
    pytest.param(
        snap((1, READY, False), (2, READY, False), (3, LOADING, True)),
        unload(1),
        id="two-unaspired-ready-lowest-goes",
    ),
    pytest.param(
        snap((1, READY, False), (2, NEW, True), (3, READY, True)),
        unload(1),
        id="unload-preferred-over-load",
    ),
    pytest.param(snap((1, ERROR, True)), None, id="failed-version-not-retried"),
    pytest.param(snap((1, DISABLED, False), (2, NEW, True)), load(2), id="disabled-ignored"),
    pytest.param(snap((1, S.QUIESCING, False), (2, READY, True)), None, id="unloading-left-alone"),
]


@pytest.mark.parametrize(("versions", "expected"), AVAILABILITY_CASES)
def test_availability_preserving(versions: list[VersionSnapshot], expected: Action | None) -> None:
    assert availability_preserving(versions) == expected


RESOURCE_CASES = [
    pytest.param(snap(), None, id="nothing-managed"),
    pytest.param(snap((1, NEW, True), (2, NEW, True)), load(2), id="highest-first"),
    pytest.param(snap((1, READY, False), (2, NEW, True)), unload(1), id="old-goes-first"),
    pytest.param(snap((1, S.UNLOADING, False), (2, NEW, True)), None, id="wait-for-old-to-go"),
    pytest.param(snap((1, S.LOADING, False), (2, NEW, True)), None, id="wait-for-cancelled"),
    pytest.param(snap((1, DISABLED, False), (2, NEW, True)), load(2), id="then-new-loads"),
    pytest.param(snap((1, ERROR, False), (2, NEW, True)), load(2), id="errored-old-is-gone"),
    pytest.param(
        snap((3, READY, False), (1, READY, False), (2, NEW, True)), unload(1), id="lowest-first"
    ),
    pytest.param(snap((1, ERROR, True)), None, id="failed-version-not-retried"),
]


@pytest.mark.parametrize(("versions", "expected"), RESOURCE_CASES)
def test_resource_preserving(versions: list[VersionSnapshot], expected: Action | None) -> None:
    assert resource_preserving(versions) == expected


snapshots = st.dictionaries(
    st.integers(min_value=1, max_value=20),
    st.tuples(st.sampled_from(list(HarnessState)), st.booleans()),
    max_size=8,
).map(lambda d: [VersionSnapshot(v, state, aspired) for v, (state, aspired) in d.items()])


def check_action_is_legal(versions: Sequence[VersionSnapshot], action: Action | None) -> None:
    by_version = {v.version: v for v in versions}
    if action is None:
        return
    chosen = by_version[action.version]
    if action.kind is ActionKind.LOAD:
        # Only a NEW aspired version is ever loaded, the highest of them.
        assert chosen.aspired and chosen.state is NEW
        assert action.version == max(v.version for v in versions if v.aspired and v.state is NEW)
    else:
        assert not chosen.aspired and chosen.state is READY


@given(snapshots)
def test_availability_preserving_never_drops_the_last_serving_version(
    versions: list[VersionSnapshot],
) -> None:
    action = availability_preserving(versions)
    check_action_is_legal(versions, action)
    if action is not None and action.kind is ActionKind.UNLOAD:
        ready = [v for v in versions if v.state is READY]
        aspired = [v for v in versions if v.aspired]
        # Something else keeps serving, or nothing is wanted at all.
        assert len(ready) > 1 or not aspired
        assert action.version == min(v.version for v in ready if not v.aspired)
    unaspired_ready = [v for v in versions if not v.aspired and v.state is READY]
    if any(v.aspired and v.state is READY for v in versions) and unaspired_ready:
        assert action == unload(min(v.version for v in unaspired_ready))


@given(snapshots)
def test_resource_preserving_never_loads_beside_a_leaving_version(
    versions: list[VersionSnapshot],
) -> None:
    action = resource_preserving(versions)
    check_action_is_legal(versions, action)
    if action is not None and action.kind is ActionKind.LOAD:
        assert all(v.aspired or v.state in (DISABLED, ERROR) for v in versions)
    if any(not v.aspired and v.state is READY for v in versions):
        assert action is not None and action.kind is ActionKind.UNLOAD
