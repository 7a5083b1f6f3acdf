"""ServerCore on real SavedModels: versions served, labels and their rules, failures, reloads.

The source scans only when told (``poll_wait_seconds=-1``; ``reload_config`` scans the models
it is given) and the settle time is zero, so each test sees exactly the versions it put on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.errors import (
    Code,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from serving.config import AllVersions, ModelConfig
from serving.core.server_core import CoreOptions, ServerCore
from serving.servable import ManagerState, ServableId, ServableRequest
from tests.serving.e2e.support import HALF_PLUS_THREE_V, HALF_PLUS_TWO_V

WAIT_S = 60.0


@pytest.fixture
def core() -> Iterator[ServerCore]:
    options = CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0,
                          load_retry_interval_s=0, max_num_load_retries=0)
    with ServerCore(options) as core:
        yield core


def versions_dir(tmp_path: Path, name: str, versions: dict[str, Path]) -> Path:
    base = tmp_path / name
    base.mkdir()
    for child, source in versions.items():
        (base / child).symlink_to(source, target_is_directory=True)
    return base


def predict_y(core: ServerCore, request: ServableRequest) -> float:
    with core.handle(request) as handle:
        outputs = handle.servable.run("serving_default", {"x": [[1.0]]})
    return float(outputs["y"][0][0])


def test_latest_version_is_served(core: ServerCore, tmp_path: Path) -> None:
    base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V, "007": HALF_PLUS_THREE_V,
                                        "v9": HALF_PLUS_TWO_V})
    assert core.readiness() == []  # nothing configured yet
    core.reload_config([ModelConfig("m", base)])
    assert core.wait_until_ready(WAIT_S)
    assert core.readiness() == []
    assert [s.id for s in core.version_states("m")] == [ServableId("m", 7)]
    assert predict_y(core, ServableRequest("m")) == 3.5
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Specific\(m, 1\)$"):
        core.handle(ServableRequest("m", 1))
    assert core.model_names() == ["m"]


def test_labels_route_and_follow_tensorflow_servings_rules(core: ServerCore,
                                                          tmp_path: Path) -> None:
    base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V, "2": HALF_PLUS_THREE_V})
    plain = ModelConfig("m", base, AllVersions())
    # Labels on versions not loaded yet are refused, and the refused config changes nothing.
    with pytest.raises(FailedPreconditionError) as info:
        core.reload_config([ModelConfig("m", base, AllVersions(), {"stable": 1})])
    assert info.value.message == (
        "Request to assign label to version 1 of model m, which is not currently available "
        "for inference"
    )
    assert core.configs() == {}
    core.reload_config([plain])
    assert core.wait_until_ready(WAIT_S)
    assert core.monitor.wait_until_available("m", 2, WAIT_S)
    assert core.monitor.wait_until_available("m", 1, WAIT_S)

    core.reload_config([ModelConfig("m", base, AllVersions(), {"stable": 1, "canary": 2})])
    assert predict_y(core, ServableRequest("m", label="stable")) == 2.5
    assert predict_y(core, ServableRequest("m", label="canary")) == 3.5
    with pytest.raises(InvalidArgumentError, match="^Unrecognized servable version label: x$"):
        core.handle(ServableRequest("m", label="x"))
    with pytest.raises(FailedPreconditionError, match="to version 5 of model m"):
        core.reload_config([ModelConfig("m", base, AllVersions(), {"stable": 1, "canary": 5})])
    assert core.manager.version_labels("m") == {"stable": 1, "canary": 2}


def test_allow_flag_permits_new_labels_but_not_moves_to_unavailable(tmp_path: Path) -> None:
    base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V})
    options = CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0,
                          allow_version_labels_for_unavailable_models=True)
    with ServerCore(options) as core:
        core.reload_config([ModelConfig("m", base, version_labels={"stable": 1, "next": 2})])
        assert core.wait_until_ready(WAIT_S)
        with pytest.raises(NotFoundError, match=r"Specific\(m, 2\)$"):
            core.handle(ServableRequest("m", label="next"))
        # Unchanged labels stay allowed; moving "stable" to the unloaded version 2 is not.
        core.reload_config([ModelConfig("m", base, version_labels={"stable": 1, "next": 2})])
        with pytest.raises(FailedPreconditionError, match="to version 2 of model m"):
            core.reload_config([ModelConfig("m", base, version_labels={"stable": 2})])


def test_a_failed_version_is_reported_and_the_others_keep_serving(core: ServerCore,
                                                                 tmp_path: Path) -> None:
    good = versions_dir(tmp_path, "good", {"1": HALF_PLUS_TWO_V})
    bad = tmp_path / "bad"
    (bad / "3").mkdir(parents=True)
    (bad / "3" / "saved_model.pb").write_bytes(b"\xff not a proto")
    core.reload_config([ModelConfig("good", good), ModelConfig("bad", bad)])
    assert core.monitor.wait_until_available("good", 1, WAIT_S)
    assert not core.monitor.wait_until_available("bad", 3, WAIT_S)
    [state] = core.version_states("bad")
    assert state.state == ManagerState.END and state.error_code == Code.DATA_LOSS
    assert core.readiness() == ["bad"]
    assert predict_y(core, ServableRequest("good")) == 2.5


def test_a_missing_base_path_waits_for_its_model(core: ServerCore, tmp_path: Path) -> None:
    base = tmp_path / "later"
    core.reload_config([ModelConfig("later", base)])
    assert core.readiness() == ["later"]
    assert core.version_states("later") == []
    base.mkdir()
    (base / "1").symlink_to(HALF_PLUS_TWO_V, target_is_directory=True)
    core.source.scan()
    assert core.wait_until_ready(WAIT_S)


def test_a_removed_model_is_unloaded(core: ServerCore, tmp_path: Path) -> None:
    a = versions_dir(tmp_path, "a", {"1": HALF_PLUS_TWO_V})
    b = versions_dir(tmp_path, "b", {"1": HALF_PLUS_THREE_V})
    core.reload_config([ModelConfig("a", a), ModelConfig("b", b)])
    assert core.wait_until_ready(WAIT_S)
    core.reload_config([ModelConfig("b", b)])
    assert core.monitor.wait_for(
        lambda m: m.states("a")[0].state == ManagerState.END, WAIT_S
    )
    assert core.readiness() == []
    with pytest.raises(NotFoundError, match=r"Latest\(a\)$"):
        core.handle(ServableRequest("a"))
    assert predict_y(core, ServableRequest("b")) == 3.5


@pytest.mark.parametrize(
    ("prefer_tflite", "code", "words"),
    [
        (True, Code.UNIMPLEMENTED,
         "TensorFlow Lite models are not supported (--prefer_tflite_model)"),
        (False, Code.NOT_FOUND, "SavedModel file does not exist at: "),
    ],
)
def test_a_tflite_only_version_fails_at_once_and_the_rest_keeps_serving(
    tmp_path: Path, prefer_tflite: bool, code: Code, words: str
) -> None:
    # Default retries (a minute apart): the version must end at once, not after five minutes.
    options = CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0,
                          prefer_tflite_model=prefer_tflite)
    with ServerCore(options) as core:
        base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V})
        (base / "2").mkdir()
        (base / "2" / "model.tflite").write_bytes(b"TFL3 not served")
        other = versions_dir(tmp_path, "other", {"1": HALF_PLUS_THREE_V})
        core.reload_config([ModelConfig("m", base, AllVersions()), ModelConfig("other", other)])
        assert core.monitor.wait_for(
            lambda m: [s.state for s in m.states("m")] == [ManagerState.END, ManagerState.AVAILABLE]
            and [s.state for s in m.states("other")] == [ManagerState.AVAILABLE],
            WAIT_S,
        )
        failed, serving = core.version_states("m")
        assert failed.id == ServableId("m", 2) and failed.error_code == code
        assert words in failed.error_message
        assert f"{base / '2'}" in failed.error_message and "SavedModel" in failed.error_message
        assert serving.id == ServableId("m", 1) and serving.error is None
        assert predict_y(core, ServableRequest("m")) == 2.5
        assert predict_y(core, ServableRequest("other")) == 3.5


def test_shutdown_begins_with_readiness_off_and_the_versions_serving(
    core: ServerCore, tmp_path: Path
) -> None:
    base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V})
    core.reload_config([ModelConfig("m", base)])
    assert core.wait_until_ready(WAIT_S) and not core.draining()
    core.begin_shutdown()
    assert core.draining()
    # Requests in flight during the drain are still answered by the loaded version.
    assert predict_y(core, ServableRequest("m")) == 2.5
    # No reload can start loads once the drain has begun.
    with pytest.raises(UnavailableError, match="^The server is shutting down"):
        core.reload_config([])
    assert predict_y(core, ServableRequest("m")) == 2.5
