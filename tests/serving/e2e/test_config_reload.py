"""The model config file re-read while serving: models added and removed, labels routed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.serving.e2e.support import (
    HALF_PLUS_THREE_V,
    HALF_PLUS_TWO_V,
    state_is,
    version_states,
    wait_until,
)
from tests.serving.rest.server_process import GRAPHSERVE, ServerProcess


def model_entry(name: str, base: Path, extra: str = "") -> str:
    return f'config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" {extra} }}'


def write_config(path: Path, *entries: str) -> None:
    # Write then rename, so a poll never reads a half-written file.
    staging = path.with_suffix(".tmp")
    staging.write_text("model_config_list {\n" + "\n".join(entries) + "\n}\n")
    staging.rename(path)


def versions_dir(root: Path, name: str, versions: dict[int, Path]) -> Path:
    base = root / name
    base.mkdir()
    for number, source in versions.items():
        (base / str(number)).symlink_to(source, target_is_directory=True)
    return base


def predict(server: ServerProcess, path: str) -> tuple[int, object]:
    response = server.client.post(f"/v1/models/{path}:predict", json={"instances": [[1.0]]})
    return response.status_code, response.json()


def test_models_added_and_removed_by_editing_the_config_file(tmp_path: Path) -> None:
    a = versions_dir(tmp_path, "a", {1: HALF_PLUS_TWO_V})
    b = versions_dir(tmp_path, "b", {1: HALF_PLUS_THREE_V})
    config = tmp_path / "models.config"
    write_config(config, model_entry("a", a))
    server = ServerProcess([f"--model_config_file={config}", "--port=0",
                            "--model_config_file_poll_wait_seconds=1"], ["a"])
    try:
        write_config(config, model_entry("a", a), model_entry("b", b))
        wait_until(state_is(server.client, "b", 1, "AVAILABLE"), "model b")
        assert predict(server, "b") == (200, {"predictions": [[3.5]]})

        write_config(config, model_entry("b", b))
        wait_until(state_is(server.client, "a", 1, "END"), "model a to unload")
        status, body = predict(server, "a")
        assert status == 404
        assert body == {"error": "Servable not found for request: Latest(a)"}

        # A config that does not parse is logged with TensorFlow Serving's words; the running
        # one stays.
        config.write_text("model_config_list { config { name: ")
        wait_until(lambda: "not applied; keeping the running config" in server.output(),
                   "the bad config to be refused")
        assert ("Error parsing text-format tensorflow.serving.ModelServerConfig: 1:36: "
                "Expected string but found: ''") in server.output()
        assert f"Failed to read ModelServerConfig file: Invalid protobuf file: '{config}'" \
            in server.output()
        assert predict(server, "b") == (200, {"predictions": [[3.5]]})
        assert server.client.get("/readyz").status_code == 200
    finally:
        assert server.stop() == 0, server.output()


def test_labels_route_requests_and_bad_moves_are_refused(tmp_path: Path) -> None:
    base = versions_dir(tmp_path, "m", {1: HALF_PLUS_TWO_V, 2: HALF_PLUS_THREE_V})
    config = tmp_path / "models.config"
    policy = "model_version_policy { all {} }"
    labels = 'version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 2 }'
    write_config(config, model_entry("m", base, f"{policy} {labels}"))
    server = ServerProcess([f"--model_config_file={config}", "--port=0",
                            "--model_config_file_poll_wait_seconds=1",
                            "--allow_version_labels_for_unavailable_models"], ["m"])
    try:
        wait_until(state_is(server.client, "m", 1, "AVAILABLE"), "version 1")
        wait_until(state_is(server.client, "m", 2, "AVAILABLE"), "version 2")
        assert predict(server, "m/labels/stable") == (200, {"predictions": [[2.5]]})
        assert predict(server, "m/labels/canary") == (200, {"predictions": [[3.5]]})
        assert predict(server, "m/labels/nope") == (
            400, {"error": "Unrecognized servable version label: nope"})

        # Moving an existing label to a version that is not available is refused.
        moved = 'version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 7 }'
        write_config(config, model_entry("m", base, f"{policy} {moved}"))
        wait_until(lambda: "to version 7 of model m, which is not currently available"
                   in server.output(), "the label move to be refused")
        assert predict(server, "m/labels/canary") == (200, {"predictions": [[3.5]]})

        # Promote: stable moves to the available version 2.
        promoted = ('version_labels { key: "stable" value: 2 } '
                    'version_labels { key: "canary" value: 2 }')
        write_config(config, model_entry("m", base, f"{policy} {promoted}"))
        wait_until(lambda: predict(server, "m/labels/stable") == (200, {"predictions": [[3.5]]}),
                   "stable to move to version 2")
        assert set(version_states(server.client, "m")) == {1, 2}
    finally:
        assert server.stop() == 0, server.output()


def test_start_up_labels_on_unavailable_versions_need_the_flag(tmp_path: Path) -> None:
    base = versions_dir(tmp_path, "m", {1: HALF_PLUS_TWO_V})
    config = tmp_path / "models.config"
    write_config(config, model_entry("m", base, 'version_labels { key: "stable" value: 1 }'))
    result = subprocess.run(
        [str(GRAPHSERVE), "--rest_api_port=0", f"--model_config_file={config}"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 255, result.stdout + result.stderr
    assert ("Failed to start server. Error: FAILED_PRECONDITION: Request to assign label to "
            "version 1 of model m, which is not currently available for inference") \
        in result.stdout
