from __future__ import annotations

from collections.abc import Iterator

import pytest

from serving.config import ModelConfig
from serving.core.server_core import ServerCore
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO, start_core


@pytest.fixture(scope="package")
def store() -> Iterator[ServerCore]:
    configs = [
        ModelConfig("half_plus_two", HALF_PLUS_TWO, version_labels={"stable": 123}),
        ModelConfig("custom", FIXTURE_MODELS / "custom_module"),
    ]
    with start_core(configs) as core:
        yield core
