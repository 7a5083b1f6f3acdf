"""Helpers for end-to-end tests against the real daemon: copying versions in, waiting on states."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Self

import httpx
import pytest

from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO

HALF_PLUS_TWO_V = HALF_PLUS_TWO / "00000123"  # y = 0.5x + 2
HALF_PLUS_THREE_V = FIXTURE_MODELS / "half_plus_three" / "1"  # y = 0.5x + 3
DEADLINE_S = 120.0


def copy_slowly(source: Path, target: Path, pause_s: float = 0.05) -> None:
    """Copy a version directory file by file, directories first, pausing between files, the
    way a slow upload lands: the server must not load it half-written."""
    target.mkdir()
    for path in sorted(source.rglob("*")):
        dest = target / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        with dest.open("wb") as out:  # in two writes, so a reader can see a partial file
            out.write(data[: len(data) // 2])
            out.flush()
            time.sleep(pause_s)
            out.write(data[len(data) // 2:])
        time.sleep(pause_s)


def copy_atomically(source: Path, target: Path) -> None:
    """Copy next to the target, then rename into place (what TensorFlow Serving requires)."""
    staging = target.with_name(f".{target.name}.staging")
    shutil.copytree(source, staging)
    staging.rename(target)


def wait_until(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def version_states(client: httpx.Client, model: str) -> dict[int, dict[str, object]]:
    """version -> {"state": ..., "error_code": ..., "error_message": ...}; {} when unknown."""
    try:
        response = client.get(f"/v1/models/{model}")
    except httpx.TransportError:
        return {}
    if response.status_code != 200:
        return {}
    return {
        int(v["version"]): {"state": v["state"], **v["status"]}
        for v in response.json()["model_version_status"]
    }


def state_is(client: httpx.Client, model: str, version: int, state: str) -> Callable[[], bool]:
    return lambda: version_states(client, model).get(version, {}).get("state") == state


def serve_models(
    tmp_path_factory: pytest.TempPathFactory, models: Mapping[str, Path]
) -> ServerProcess:
    """The real daemon serving ``models`` (name -> base path) from a model config file, once
    every one of them is AVAILABLE."""
    config = tmp_path_factory.mktemp("config") / "models.config"
    entries = "".join(
        f'  config {{ name: "{name}" base_path: "{path}" model_platform: "tensorflow" }}\n'
        for name, path in models.items()
    )
    config.write_text(f"model_config_list {{\n{entries}}}\n")
    return ServerProcess([f"--model_config_file={config}"], list(models))


class Traffic:
    """Clients predicting ``{"instances": [[1.0]]}`` on ``model`` in a loop until stopped,
    counting answers by value; an answer not in ``accepted``, a status other than 200 or a
    transport error is a failure."""

    def __init__(
        self, base_url: str, model: str, accepted: set[float], clients: int = 2
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.accepted = accepted
        self.answers: Counter[float] = Counter()
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(clients)]

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=60) as client:
            while not self._stop.is_set():
                value: float | None = None
                try:
                    response = client.post(
                        f"/v1/models/{self.model}:predict", json={"instances": [[1.0]]}
                    )
                    status, body = response.status_code, response.json()
                    if status == 200:
                        value = body["predictions"][0][0]
                except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as err:
                    status, body = -1, repr(err)
                with self._lock:
                    if value in self.accepted:
                        self.answers[value] += 1
                    else:
                        self.failures.append(f"{status}: {body}")

    def total(self) -> int:
        with self._lock:
            return sum(self.answers.values()) + len(self.failures)

    def flowing(self, more: int = 20) -> None:
        """Wait until ``more`` further requests have been answered (or failed)."""
        seen = self.total()
        wait_until(lambda: self.total() >= seen + more, f"{more} more requests on {self.model}")

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
