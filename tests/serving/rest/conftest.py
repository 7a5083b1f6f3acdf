from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO

MLP_CLASSIFIER = HALF_PLUS_TWO.parent / "mlp_classifier"  # predict signatures only


@pytest.fixture(scope="package")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The real daemon serving half_plus_two (label ``stable`` -> 123) and mlp_classifier from a
    model config file."""
    config: Path = tmp_path_factory.mktemp("config") / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "half_plus_two" base_path: "{HALF_PLUS_TWO}" '
        'model_platform: "tensorflow" version_labels { key: "stable" value: 123 } }\n'
        f'  config {{ name: "mlp_classifier" base_path: "{MLP_CLASSIFIER}" '
        'model_platform: "tensorflow" }\n'
        "}\n"
    )
    # The label names a version that is still loading when the config is applied.
    flags = [f"--model_config_file={config}", "--port=0",
             "--allow_version_labels_for_unavailable_models"]
    server = ServerProcess(flags, ["half_plus_two", "mlp_classifier"])
    yield server
    server.stop()
