from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.client.rest_client import RestClient
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO

# Fixture models with recorded TensorFlow outputs that the runtime serves today.
MULTI_IO = FIXTURE_MODELS / "functional_multi_io"  # float32 + int64 in, two float32 outputs
CUSTOM = FIXTURE_MODELS / "custom_module"  # bool, int32, int64 and float32 outputs
HALF_PLUS_THREE = FIXTURE_MODELS / "half_plus_three"  # classify/regress on tf.Examples
MODELS = {
    "half_plus_two": HALF_PLUS_TWO,
    "functional_multi_io": MULTI_IO,
    "custom_module": CUSTOM,
    "half_plus_three": HALF_PLUS_THREE,
}


@pytest.fixture(scope="package")
def rest_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The real daemon, REST only, serving the models above; half_plus_two has the label
    ``stable`` -> 123."""
    config: Path = tmp_path_factory.mktemp("config") / "models.config"
    entries = []
    for name, path in MODELS.items():
        labels = ' version_labels { key: "stable" value: 123 }' if name == "half_plus_two" else ""
        entries.append(
            f'  config {{ name: "{name}" base_path: "{path}" '
            f'model_platform: "tensorflow"{labels} }}\n'
        )
    config.write_text("model_config_list {\n" + "".join(entries) + "}\n")
    flags = [
        f"--model_config_file={config}",
        "--port=0",
        "--allow_version_labels_for_unavailable_models",
    ]
    server = ServerProcess(flags, list(MODELS))
    yield server
    server.stop()


@pytest.fixture
def rest(rest_server: ServerProcess) -> Iterator[RestClient]:
    with RestClient(f"127.0.0.1:{rest_server.port}", timeout=60) as client:
        yield client
