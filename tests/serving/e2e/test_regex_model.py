"""A regex pattern sent in a request cannot freeze the daemon: the regex kernels run on RE2, in
time linear in the input, so a pattern that makes a backtracking engine take exponential time is
answered like any other, and the server answers other requests meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.serving.e2e.support import DEADLINE_S, serve_models
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS

REGEX_MODEL = FIXTURE_MODELS / "regex_model"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = serve_models(tmp_path_factory, {"regex_model": REGEX_MODEL})
    yield process
    assert process.stop() == 0, process.output()


def test_pathological_pattern_is_answered_while_the_server_stays_responsive(
    server: ServerProcess,
) -> None:
    # 2**40 ways to split the a's among the groups before "!" fails the match: a backtracking
    # engine would not finish, and would hold the interpreter while it tried.
    texts = ["a" * 40 + "!", "a" * 40, "x" * 40]
    body = {"inputs": {"text": texts, "pattern": "(a+)+$"}}
    answers: list[httpx.Response] = []
    started = threading.Event()

    def predict() -> None:
        with httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as client:
            started.set()
            answers.append(client.post("/v1/models/regex_model:predict", json=body))

    thread = threading.Thread(target=predict, daemon=True)
    thread.start()
    assert started.wait(DEADLINE_S)
    status = server.client.get("/v1/models/regex_model", timeout=DEADLINE_S)
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the predict request was not answered"

    assert status.status_code == 200, status.text
    assert [v["state"] for v in status.json()["model_version_status"]] == ["AVAILABLE"]
    assert answers and answers[0].status_code == 200, answers[0].text if answers else None
    outputs = answers[0].json()["outputs"]
    assert outputs["matches"] == [False, True, False]  # TensorFlow's RE2::FullMatch answers
    assert outputs["is_word"] == [False, True, True]
    assert outputs["marked"] == ["<" + "a" * 40 + ">!", "<" + "a" * 40 + ">", "x" * 40]


def test_a_pattern_re2_rejects_is_tensorflows_invalid_argument(server: ServerProcess) -> None:
    body = {"inputs": {"text": ["abc"], "pattern": "(?<name>a)"}}
    response = server.client.post("/v1/models/regex_model:predict", json=body)
    assert response.status_code == 400, response.text
    assert "Invalid pattern: (?<name>a), error: invalid perl operator: (?<" in response.text
