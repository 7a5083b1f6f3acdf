"""ServerCore with batching on: which versions batch, load failures, swaps with queued tasks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from runtime.errors import Code
from serving.batching.params import BatchingParams
from serving.batching.session import BatchingServable
from serving.config import ModelConfig
from serving.core.server_core import PER_MODEL_BATCHING_FILE, CoreOptions, ServerCore
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import ArrayInputs, PredictRequest, predict
from serving.servable import ManagerState, PlainServable, ServableRequest
from tests.serving.core.test_server_core import versions_dir
from tests.serving.e2e.support import HALF_PLUS_THREE_V, HALF_PLUS_TWO_V

WAIT_S = 60.0


def _core(batching: BatchingParams, per_model: bool = False) -> ServerCore:
    return ServerCore(
        CoreOptions(
            file_system_poll_wait_seconds=-1, file_system_settle_seconds=0,
            max_num_load_retries=0, batching=batching, per_model_batching=per_model,
        )
    )


@pytest.fixture
def slow_window_core() -> Iterator[ServerCore]:
    # A wide window, so requests sent together wait in one batch.
    with _core(BatchingParams(batch_timeout_micros=400_000, num_batch_threads=1)) as core:
        yield core


def _y(core: ServerCore, x: float) -> tuple[int, float]:
    inputs = ArrayInputs({"x": np.array([[x]], np.float32)})
    response = predict(core, PredictRequest(ModelSpec("m"), inputs))
    return response.model_spec.version or 0, float(response.outputs["y"][0][0])


def test_every_version_batches_and_answers(slow_window_core: ServerCore, tmp_path: Path) -> None:
    base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V})
    slow_window_core.reload_config([ModelConfig("m", base)])
    assert slow_window_core.wait_until_ready(WAIT_S)
    with slow_window_core.handle(ServableRequest("m")) as handle:
        assert isinstance(handle.servable, BatchingServable)
    answers: list[tuple[int, float]] = []
    threads = [
        threading.Thread(target=lambda x=x: answers.append(_y(slow_window_core, x)))
        for x in (1.0, 2.0, 3.0)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert sorted(answers) == [(1, 2.5), (1, 3.0), (1, 3.5)]
    with slow_window_core.handle(ServableRequest("m")) as handle:
        stats = handle.servable.batch_stats()["serving_default"]
    assert stats["tasks"] == 3 and stats["batches"] == 1


def test_queued_requests_finish_on_the_version_being_replaced(
    slow_window_core: ServerCore, tmp_path: Path
) -> None:
    base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V})
    slow_window_core.reload_config([ModelConfig("m", base)])
    assert slow_window_core.wait_until_ready(WAIT_S)
    queued: list[tuple[int, float]] = []
    senders = [
        threading.Thread(target=lambda x=x: queued.append(_y(slow_window_core, x)))
        for x in (1.0, 2.0)
    ]
    for sender in senders:
        sender.start()
    time.sleep(0.1)  # both are in v1's open batch now
    (base / "2").symlink_to(HALF_PLUS_THREE_V, target_is_directory=True)
    slow_window_core.source.scan()
    assert slow_window_core.monitor.wait_until_available("m", 2, WAIT_S)
    for sender in senders:
        sender.join(WAIT_S)
    assert sorted(queued) == [(1, 2.5), (1, 3.0)]  # y = 0.5x + 2: version 1 answered
    assert slow_window_core.monitor.wait_for(
        lambda _: {s.id.version: s.state for s in slow_window_core.version_states("m")}
        == {1: ManagerState.END, 2: ManagerState.AVAILABLE},
        WAIT_S,
    )
    assert _y(slow_window_core, 1.0) == (2, 3.5)


def test_invalid_parameters_fail_each_load_with_upstreams_message(tmp_path: Path) -> None:
    params = BatchingParams(max_batch_size=8, allowed_batch_sizes=(2, 4))
    with _core(params) as core:
        base = versions_dir(tmp_path, "m", {"1": HALF_PLUS_TWO_V})
        core.reload_config([ModelConfig("m", base)])
        assert core.monitor.wait_for(
            lambda _: bool(core.version_states("m"))
            and core.version_states("m")[0].state == ManagerState.END,
            WAIT_S,
        )
        (state,) = core.version_states("m")
        assert state.error is not None and state.error.code == Code.INVALID_ARGUMENT
        assert state.error.message.startswith(
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; "
            "expected 8"
        )


def test_per_model_parameters_batch_only_versions_that_ship_them(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for child in HALF_PLUS_TWO_V.iterdir():
        (shipped / child.name).symlink_to(child)
    (shipped / PER_MODEL_BATCHING_FILE).write_text("max_batch_size { value: 7 }\n")
    with _core(BatchingParams(num_batch_threads=1), per_model=True) as core:
        core.reload_config([
            ModelConfig("own", versions_dir(tmp_path, "own", {"1": shipped})),
            ModelConfig("plain", versions_dir(tmp_path, "plain", {"1": HALF_PLUS_TWO_V})),
        ])
        assert core.wait_until_ready(WAIT_S)
        with core.handle(ServableRequest("own")) as handle:
            assert isinstance(handle.servable, BatchingServable)
            assert handle.servable.params.max_batch_size == 7
        with core.handle(ServableRequest("plain")) as handle:
            assert isinstance(handle.servable, PlainServable)


def test_a_per_model_file_that_does_not_parse_fails_its_version_as_upstream(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for child in HALF_PLUS_TWO_V.iterdir():
        (shipped / child.name).symlink_to(child)
    (shipped / PER_MODEL_BATCHING_FILE).write_text("max_batch_size { value: seven }\n")
    with _core(BatchingParams(num_batch_threads=1), per_model=True) as core:
        base = versions_dir(tmp_path, "m", {"1": shipped})
        core.reload_config([ModelConfig("m", base)])
        assert core.monitor.wait_for(
            lambda m: [s.state for s in m.states("m")] == [ManagerState.END], WAIT_S
        )
        (state,) = core.version_states("m")
    assert state.error is not None and state.error.code == Code.INVALID_ARGUMENT
    assert state.error.message == f"Invalid protobuf file: '{base / '1' / PER_MODEL_BATCHING_FILE}'"
    assert ("Error parsing text-format tensorflow.serving.BatchingParameters: 1:25: "
            "Couldn't parse integer: seven") in caplog.messages
