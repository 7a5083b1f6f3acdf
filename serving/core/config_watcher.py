"""Re-reads ``--model_config_file`` every ``--model_config_file_poll_wait_seconds``.

A file that cannot be read, does not parse or is refused by the core (e.g. a label on an
unavailable version) is logged and the running config stays, as in TensorFlow Serving; a file
that does not parse is logged with TensorFlow Serving's words (the parser's error, then
``Failed to read ModelServerConfig file: Invalid protobuf file: '<path>'``) and not parsed again
until it changes. A refused file is tried again on later polls (a label may become valid once its
version loads) but logged once; an applied file is not re-applied until it changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from protos.tensorflow_serving.config import model_server_config_pb2
from runtime.errors import OpError
from serving.config import ModelConfig, models_from_proto
from serving.proto_text import parse_proto_text

log = logging.getLogger("graphserve")


class ConfigFileWatcher:
    def __init__(
        self,
        path: Path,
        apply: Callable[[Sequence[ModelConfig]], None],
        poll_wait_seconds: float,
        base_dir: Path | None = None,
    ) -> None:
        self._path = path
        self._apply = apply
        self._poll_wait_seconds = poll_wait_seconds
        self._base_dir = base_dir or Path.cwd()
        self._applied_text: str | None = None
        self._refused_text: str | None = None
        self._unparsable_text: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def mark_applied(self, text: str) -> None:
        """Record the text the server started with, so the first poll does not re-apply it."""
        self._applied_text = text

    def check(self) -> bool:
        """Read the file once; apply it when it changed. Returns whether it was applied."""
        try:
            text = self._path.read_text()
        except OSError as err:
            log.error("Could not read model config file %s: %s", self._path, err)
            return False
        if text in (self._applied_text, self._unparsable_text):
            return False
        try:
            proto = parse_proto_text(
                text, model_server_config_pb2.ModelServerConfig(), source=str(self._path)
            )
        except OpError as err:
            # Text that does not parse never will: it is not parsed again until it changes, so
            # the parser's error is logged once.
            log.error("Failed to read ModelServerConfig file: %s", err.message)
            log.info("Model config file %s not applied; keeping the running config", self._path)
            self._unparsable_text = text
            return False
        try:
            self._apply(models_from_proto(proto, self._base_dir))
        except OpError as err:
            level = logging.DEBUG if text == self._refused_text else logging.ERROR
            log.log(level, "Model config file %s not applied; keeping the running config: %s",
                    self._path, err.status_text())
            self._refused_text = text
            return False
        self._applied_text, self._refused_text, self._unparsable_text = text, None, None
        log.info("Applied model config file %s", self._path)
        return True

    def start(self) -> None:
        if self._poll_wait_seconds <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="config-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll_wait_seconds):
            try:
                self.check()
            except Exception:  # keep polling whatever one bad read did
                log.exception("Model config poll failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
