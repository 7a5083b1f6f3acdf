"""A config file that does not parse stops the real server with TensorFlow Serving's words.

tensorflow_model_server logs protobuf's parser error (``Error parsing text-format TYPE:
LINE:COL: reason``, which its testBadModelConfig looks for on stderr), then prints
``Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '<path>'`` and exits
with -1 (255). Files are named as given on the command line, here relative to the working
directory.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.serving.rest.server_process import GRAPHSERVE, free_port
from tests.serving.support import HALF_PLUS_TWO

MODEL = f"--model_base_path={HALF_PLUS_TWO}"


@pytest.mark.parametrize(
    ("flags", "text", "parser_error"),
    [
        (
            ["--model_config_file=bad.config"],
            'model_config_list {\n  config { name: "m" base_path: 7 }\n}\n',
            "tensorflow.serving.ModelServerConfig: 2:33: Expected string but found: '7'",
        ),
        (
            [MODEL, "--enable_batching", "--batching_parameters_file=bad.config"],
            "max_batch_size { value: 8 }\nbatch_timeout_micros { valu: 3 }\n",
            (
                "tensorflow.serving.BatchingParameters: 2:24: Message type "
                '"google.protobuf.Int64Value" has no field named "valu".'
            ),
        ),
        (
            [MODEL, "--ssl_config_file=bad.config"],
            'server_key: "k"\nclient_verify: maybe\n',
            'tensorflow.serving.SSLConfig: 2:16: Expected "true" or "false".',
        ),
    ],
    ids=["model_config_file", "batching_parameters_file", "ssl_config_file"],
)
def test_a_file_that_does_not_parse_stops_start_up(
    tmp_path: Path, flags: list[str], text: str, parser_error: str
) -> None:
    (tmp_path / "bad.config").write_text(text)
    result = subprocess.run(
        [str(GRAPHSERVE), f"--port={free_port()}", "--rest_api_port=0", *flags],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 255, result.stdout + result.stderr
    assert f"Error parsing text-format {parser_error}\n" in result.stderr
    assert result.stdout.endswith(
        "Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: 'bad.config'\n"
    )
