from __future__ import annotations

from collections.abc import Iterator

import pytest

from serving.config import ModelConfig
from serving.core.server_core import ServerCore
from tests.serving.grpc.support import Client, serving
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO, start_core


@pytest.fixture(scope="package")
def core() -> Iterator[ServerCore]:
    """half_plus_two (label ``stable`` -> 123), custom_module (two signatures, int and bool
    outputs) and mlp; shared by the tests that only read."""
    configs = [
        ModelConfig("half_plus_two", HALF_PLUS_TWO, version_labels={"stable": 123}),
        ModelConfig("custom", FIXTURE_MODELS / "custom_module"),
        ModelConfig("mlp", FIXTURE_MODELS / "mlp"),
    ]
    with start_core(configs) as core:
        yield core


@pytest.fixture(scope="package")
def client(core: ServerCore) -> Iterator[Client]:
    with serving(core) as client:
        yield client
