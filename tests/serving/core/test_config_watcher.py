"""ConfigFileWatcher: applies a changed config file; keeps the running one on any failure."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.errors import FailedPreconditionError
from serving.config import ModelConfig
from serving.core.config_watcher import ConfigFileWatcher

ONE = 'model_config_list { config { name: "a" base_path: "/models/a" } }'
TWO = ONE[:-2] + ' config { name: "b" base_path: "/models/b" } }'


class Recorder:
    def __init__(self) -> None:
        self.applied: list[list[str]] = []
        self.refuse = False

    def __call__(self, configs: Sequence[ModelConfig]) -> None:
        if self.refuse:
            raise FailedPreconditionError("label on an unavailable version")
        self.applied.append([c.name for c in configs])


def test_applies_only_changes(tmp_path: Path) -> None:
    path = tmp_path / "models.config"
    path.write_text(ONE)
    recorder = Recorder()
    watcher = ConfigFileWatcher(path, recorder, 1, base_dir=tmp_path)
    watcher.mark_applied(ONE)
    assert not watcher.check()
    path.write_text(TWO)
    assert watcher.check()
    assert not watcher.check()
    assert recorder.applied == [["a", "b"]]


def test_unparsable_file_keeps_the_running_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "models.config"
    path.write_text("model_config_list { config { name: ")
    recorder = Recorder()
    watcher = ConfigFileWatcher(path, recorder, 1, base_dir=tmp_path)
    with caplog.at_level(logging.ERROR, "graphserve"):
        assert not watcher.check()
    assert recorder.applied == []
    # TensorFlow Serving's two lines: protobuf's parser error, then the poll's failure.
    assert caplog.messages == [
        (
            "Error parsing text-format tensorflow.serving.ModelServerConfig: 1:36: "
            "Expected string but found: ''"
        ),
        f"Failed to read ModelServerConfig file: Invalid protobuf file: '{path}'",
    ]
    # The same text is not parsed (nor logged) again on later polls; a change is.
    caplog.clear()
    with caplog.at_level(logging.ERROR, "graphserve"):
        assert not watcher.check()
        assert caplog.messages == []
        path.write_text("model_config_list { bogus: 1 }")
        assert not watcher.check()
    assert len(caplog.messages) == 2 and 'no field named "bogus"' in caplog.messages[0]
    path.write_text(ONE)
    assert watcher.check()
    assert recorder.applied == [["a"]]
    path.unlink()
    assert not watcher.check()  # unreadable: logged too
    assert "Could not read model config file" in caplog.text


def test_refused_config_is_retried_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "models.config"
    path.write_text(TWO)
    recorder = Recorder()
    recorder.refuse = True
    watcher = ConfigFileWatcher(path, recorder, 1, base_dir=tmp_path)
    with caplog.at_level(logging.ERROR, "graphserve"):
        assert not watcher.check()
        assert not watcher.check()
    assert caplog.text.count("FAILED_PRECONDITION: label on an unavailable version") == 1
    recorder.refuse = False  # e.g. the labelled version has loaded meanwhile
    assert watcher.check()
    assert recorder.applied == [["a", "b"]]


def test_poll_thread_applies_a_change(tmp_path: Path) -> None:
    path = tmp_path / "models.config"
    path.write_text(ONE)
    applied = threading.Event()
    watcher = ConfigFileWatcher(path, lambda configs: applied.set(), 0.05, base_dir=tmp_path)
    watcher.mark_applied(ONE)
    watcher.start()
    try:
        path.write_text(TWO)
        assert applied.wait(30)
    finally:
        watcher.close()
