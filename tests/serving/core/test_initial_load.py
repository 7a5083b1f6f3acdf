"""Where TensorFlow Serving's start-up wait stands, from the models' version states."""

from __future__ import annotations

from pathlib import Path

from runtime.errors import NotFoundError
from serving.config import LatestVersions, ModelConfig, SpecificVersions
from serving.core.initial_load import initial_load
from serving.servable import ManagerState, ServableId, ServableState

START, LOADING = ManagerState.START, ManagerState.LOADING
AVAILABLE, END = ManagerState.AVAILABLE, ManagerState.END


def _states(**by_model: list[tuple[int, ManagerState]]) -> dict[str, list[ServableState]]:
    broken = NotFoundError("no saved_model.pb")
    return {
        name: [
            ServableState(ServableId(name, v), state, broken if state is END else None)
            for v, state in sorted(versions, reverse=True)
        ]
        for name, versions in by_model.items()
    }


def _outcome(configs: list[ModelConfig], states: dict[str, list[ServableState]]) -> tuple[
    bool, list[tuple[str, int]]
]:
    result = initial_load(configs, lambda name: states.get(name, []))
    return result.finished, [(s.id.name, s.id.version) for s in result.failed]


A = ModelConfig("a", Path("/a"), LatestVersions())
B = ModelConfig("b", Path("/b"), LatestVersions())


def test_waits_for_every_model() -> None:
    assert _outcome([A, B], _states(a=[(1, AVAILABLE)], b=[(1, LOADING)])) == (False, [])
    assert _outcome([A, B], _states(a=[(1, AVAILABLE)], b=[(2, AVAILABLE)])) == (True, [])


def test_an_empty_base_path_is_waited_for() -> None:
    assert _outcome([A], {}) == (False, [])


def test_a_model_whose_versions_all_ended_has_failed() -> None:
    assert _outcome([A, B], _states(a=[(1, END)], b=[(1, AVAILABLE)])) == (True, [("a", 1)])


def test_a_failure_waits_for_the_others_to_finish() -> None:
    assert _outcome([A, B], _states(a=[(1, END)], b=[(1, LOADING)])) == (False, [("a", 1)])


def test_a_broken_newer_directory_does_not_end_the_wait_while_an_older_one_loads() -> None:
    assert _outcome([A], _states(a=[(2, END), (1, LOADING)])) == (False, [])
    assert _outcome([A], _states(a=[(2, END), (1, AVAILABLE)])) == (True, [])


def test_specific_versions_each_finish() -> None:
    config = ModelConfig("s", Path("/s"), SpecificVersions((1, 2)))
    assert _outcome([config], _states(s=[(1, AVAILABLE)])) == (False, [])
    assert _outcome([config], _states(s=[(1, AVAILABLE), (2, START)])) == (False, [])
    assert _outcome([config], _states(s=[(1, AVAILABLE), (2, END)])) == (True, [("s", 2)])


def test_the_error_is_tensorflow_servings() -> None:
    states = _states(a=[(1, END)])
    error = initial_load([A], lambda name: states.get(name, [])).error()
    assert error.status_text() == (
        "UNKNOWN: 1 servable(s) did not become available: "
        "{{{name: a version: 1} due to error: NOT_FOUND: no saved_model.pb}, }"
    )
