"""Faults in the model lifecycle, seen from outside the real daemon on loopback.

A load that hangs for good (its variables file is a FIFO nobody writes) holds back neither the
other models' loads nor the shutdown; version directories that cannot be loaded as they stand
(a dangling symlink, a symlink loop) show in the status API with the reason while the version
already serving keeps serving; a version directory replaced in place is swapped in without a
failed request; a load waiting to be retried shows its error; and the model management RPC can
be turned off.

Version answers tell the content apart: for x = 1, half_plus_two answers 2.5 and half_plus_three
3.5. Every wait is bounded; none is a timed assertion.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from protos.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
)
from tests.serving.e2e.support import (
    HALF_PLUS_THREE_V,
    HALF_PLUS_TWO_V,
    Traffic,
    copy_atomically,
    serve_models,
    state_is,
    version_states,
    wait_until,
)
from tests.serving.rest.server_process import ServerProcess

X = 1.0
TWO = 2.5  # half_plus_two at X
THREE = 3.5  # half_plus_three at X
STATE_NAMES = get_model_status_pb2.ModelVersionStatus.State.Name
CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def predict(client: httpx.Client, model: str) -> tuple[int, Any]:
    response = client.post(f"/v1/models/{model}:predict", json={"instances": [[X]]})
    return response.status_code, response.json()


def answers(client: httpx.Client, model: str, value: float) -> bool:
    return predict(client, model) == (200, {"predictions": [[value]]})


def write_config(path: Path, models: dict[str, Path]) -> None:
    """A model config file, renamed into place so a poll never reads it half-written."""
    entries = "".join(
        f'  config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" }}\n'
        for name, base in models.items()
    )
    staging = path.with_name(f".{path.name}.staging")
    staging.write_text(f"model_config_list {{\n{entries}}}\n")
    staging.rename(path)


def grpc_status(server: ServerProcess, model: str) -> dict[int, tuple[str, str, str]]:
    """version -> (state, error code, error message) from gRPC GetModelStatus."""
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = model
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
            request, timeout=60
        )
    return {
        v.version: (STATE_NAMES(v.state), CODE_NAMES[v.status.error_code], v.status.error_message)
        for v in response.model_version_status
    }


def status_shows(client: httpx.Client, model: str, version: int, state: str, code: str) -> bool:
    status = version_states(client, model).get(version, {})
    return (status.get("state"), status.get("error_code")) == (state, code)


# --- a load that never finishes ------------------------------------------------------------


def test_a_hung_load_holds_back_neither_other_models_nor_shutdown(tmp_path: Path) -> None:
    stuck = tmp_path / "stuck"
    shutil.copytree(HALF_PLUS_TWO_V, stuck / "1")
    # Opening a FIFO for reading blocks until a writer comes, and none ever does: the load of
    # "stuck" hangs for good in a system call, as on a dead network mount. The shard is still
    # there by name, so the directory counts as complete.
    shard = stuck / "1" / "variables" / "variables.data-00000-of-00001"
    shard.unlink()
    os.mkfifo(shard)
    ok = tmp_path / "ok"
    shutil.copytree(HALF_PLUS_TWO_V, ok / "1")

    # "stuck" alone first, so its hung load surely holds the only load slot (the default
    # --num_load_threads=0 runs one load at a time) before "ok" is configured.
    config = tmp_path / "models.config"
    write_config(config, {"stuck": stuck})
    server = ServerProcess(
        [
            f"--model_config_file={config}",
            "--model_config_file_poll_wait_seconds=1",
            "--file_system_poll_wait_seconds=1",
        ],
        [],
    )
    client = server.client
    try:
        # LOADING is published once the load has its slot and has begun.
        wait_until(state_is(client, "stuck", 1, "LOADING"), "the load of stuck to begin")

        write_config(config, {"stuck": stuck, "ok": ok})
        wait_until(state_is(client, "ok", 1, "AVAILABLE"), "ok to load beside the hung load")
        assert predict(client, "ok") == (200, {"predictions": [[TWO]]})
        assert version_states(client, "stuck")[1]["state"] == "LOADING"
        code, _ = predict(client, "stuck")
        assert code == 404
    finally:
        # SIGTERM; stop() kills the process (exit status -9) if it has not exited in 60 s.
        status = server.stop()
    assert status == 0, server.output()
    assert "Abandoning loads still running" in server.output()


# --- unservable and replaced version directories -------------------------------------------


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """One daemon serving "unservable" and "replaced", both half_plus_two as version 1 (real
    directories, so they can be moved aside), with the default latest policy; and the folder
    their base paths are in."""
    root = tmp_path_factory.mktemp("models")
    for name in ("unservable", "replaced"):
        shutil.copytree(HALF_PLUS_TWO_V, root / name / "1")
    server = serve_models(tmp_path_factory, {n: root / n for n in ("unservable", "replaced")})
    try:
        yield server, root
    finally:
        status = server.stop()
        assert status == 0, server.output()


def test_unservable_version_directories_are_reported_while_the_old_one_serves(
    two_models: tuple[ServerProcess, Path],
) -> None:
    server, root = two_models
    client = server.client
    model = "unservable"
    base = root / model
    assert answers(client, model, TWO)

    with Traffic(server.base_url, model, {TWO}) as traffic:
        traffic.flowing()

        nowhere = root / "nowhere"
        (base / "2").symlink_to(nowhere, target_is_directory=True)
        wait_until(
            lambda: status_shows(client, model, 2, "END", "NOT_FOUND"),
            "version 2 to be reported as a dangling symlink",
        )
        states = version_states(client, model)
        assert "dangling symbolic link" in str(states[2]["error_message"])
        assert str(nowhere) in str(states[2]["error_message"])
        assert (states[1]["state"], states[1]["error_code"]) == ("AVAILABLE", "OK")
        # The same over gRPC.
        state, code, message = grpc_status(server, model)[2]
        assert (state, code) == ("END", "NOT_FOUND")
        assert "dangling symbolic link" in message
        traffic.flowing()

        (base / "2").unlink()
        os.symlink("3", base / "3")  # 3 -> 3
        wait_until(
            lambda: status_shows(client, model, 3, "END", "FAILED_PRECONDITION"),
            "version 3 to be reported as a symlink loop",
        )
        states = version_states(client, model)
        assert "symbolic link loop" in str(states[3]["error_message"])
        assert (states[1]["state"], states[1]["error_code"]) == ("AVAILABLE", "OK")
        traffic.flowing()

    assert traffic.failures == [], traffic.failures[:5]
    assert traffic.answers[TWO] > 0

    # Fixed: the broken link goes, a whole version 4 arrives, and is served next.
    with Traffic(server.base_url, model, {TWO, THREE}) as traffic:
        traffic.flowing()
        (base / "3").unlink()
        copy_atomically(HALF_PLUS_THREE_V, base / "4")
        wait_until(state_is(client, model, 4, "AVAILABLE"), "version 4")
        wait_until(lambda: answers(client, model, THREE), "version 4 to answer")
        traffic.flowing()

    assert traffic.failures == [], traffic.failures[:5]
    states = version_states(client, model)
    assert (states[4]["state"], states[4]["error_code"]) == ("AVAILABLE", "OK")
    wait_until(state_is(client, model, 1, "END"), "version 1 to unload")


def test_version_replaced_in_place_swaps_without_a_failed_request(
    two_models: tuple[ServerProcess, Path],
) -> None:
    server, root = two_models
    client = server.client
    model = "replaced"
    base = root / model
    assert answers(client, model, TWO)

    # During the swap either content is a right answer; anything else is a failure.
    with Traffic(server.base_url, model, {TWO, THREE}) as traffic:
        traffic.flowing()
        # New content staged first, so version 1 is missing from the base path only between
        # two renames: the old directory moved aside (its inode lives on under a name that is
        # not a version), the new one renamed into place under the same number.
        staging = base / ".1.staging"
        shutil.copytree(HALF_PLUS_THREE_V, staging)
        (base / "1").rename(base / "old1")
        staging.rename(base / "1")

        wait_until(lambda: answers(client, model, THREE), "the new content of version 1")
        traffic.flowing()
        # Version 1 shows AVAILABLE whenever it is looked at, from the swap on.
        for _ in range(20):
            assert status_shows(client, model, 1, "AVAILABLE", "OK"), version_states(client, model)

    assert traffic.failures == [], traffic.failures[:5]
    assert traffic.answers[TWO] > 0 and traffic.answers[THREE] > 0
    assert set(version_states(client, model)) == {1}
    assert answers(client, model, THREE)
    assert "now serves the new content" in server.output()


# --- retries and the model management RPC --------------------------------------------------


@pytest.fixture(scope="module")
def no_management(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A daemon with the model management RPC off and TensorFlow Serving's retry defaults,
    serving "m" (half_plus_two) and "corrupt", whose saved_model.pb is not one."""
    root = tmp_path_factory.mktemp("models")
    shutil.copytree(HALF_PLUS_TWO_V, root / "m" / "1")
    (root / "corrupt" / "1").mkdir(parents=True)
    (root / "corrupt" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    config = root / "models.config"
    write_config(config, {"m": root / "m", "corrupt": root / "corrupt"})
    server = ServerProcess(
        [
            f"--model_config_file={config}",
            "--enable_model_management_rpc=false",
            "--max_num_load_retries=5",
            "--load_retry_interval_micros=60000000",
        ],
        ["m"],
    )
    try:
        yield server
    finally:
        status = server.stop()
        assert status == 0, server.output()


def test_a_load_waiting_to_be_retried_shows_its_error(no_management: ServerProcess) -> None:
    client = no_management.client

    def loading_with_error() -> bool:
        status = version_states(client, "corrupt").get(1, {})
        return status.get("state") == "LOADING" and status.get("error_code") not in (None, "OK")

    # The first attempt fails at once and the next is a minute away (TensorFlow Serving shows
    # LOADING / OK all the while): well within this wait, the error is there to see.
    wait_until(loading_with_error, "corrupt to show its load error", deadline_s=30)
    status = version_states(client, "corrupt")[1]
    assert str(status["error_message"]).strip()
    state, code, message = grpc_status(no_management, "corrupt")[1]
    assert (state, code, message) == ("LOADING", status["error_code"], status["error_message"])


def test_reload_rpc_is_refused_when_model_management_is_off(
    no_management: ServerProcess,
) -> None:
    client = no_management.client
    assert answers(client, "m", TWO)
    request = model_management_pb2.ReloadConfigRequest()
    request.config.model_config_list.SetInParent()  # an empty list: would unload everything
    with grpc.insecure_channel(f"127.0.0.1:{no_management.grpc_port}") as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.HandleReloadConfigRequest(request, timeout=60)
    code, details = raised.value.code(), raised.value.details() or ""
    assert code == grpc.StatusCode.PERMISSION_DENIED, details
    assert "--enable_model_management_rpc=false" in details

    # Nothing changed: "m" keeps serving, both models keep their versions.
    for _ in range(20):
        assert answers(client, "m", TWO)
    assert status_shows(client, "m", 1, "AVAILABLE", "OK")
    assert version_states(client, "corrupt")[1]["state"] in ("START", "LOADING")
