"""Text-format config files: TensorFlow Serving's messages for a file that does not parse."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from protos.tensorflow_serving.config.model_server_config_pb2 import ModelServerConfig
from protos.tensorflow_serving.config.ssl_config_pb2 import SSLConfig
from runtime.errors import InvalidArgumentError, NotFoundError
from serving.proto_text import parse_proto_text, read_proto_text_file

MSC = "Error parsing text-format tensorflow.serving.ModelServerConfig: "


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        # Python's tokenizer quotes the line it stopped on; only the position stays.
        ("model_config_list { config { name: ", "1:36: Expected string but found: ''"),
        ('model_config_list {\n config { name: "a" base_path: 3 } }',
         "2:32: Expected string but found: '3'"),
        ("\n\n  }", "3:3: Expected identifier or number, got }."),
        ("bogus: 1",
         '1:1: Message type "tensorflow.serving.ModelServerConfig" has no field named "bogus".'),
        # A line that itself holds "': " is stripped whole, not at its first quote.
        ("# it's: here\nmodel_config_list { config { name: 'x': } }",
         "2:39: Expected identifier or number, got :."),
    ],
)
def test_parser_error_text(text: str, detail: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse_proto_text(text, ModelServerConfig())
    assert err.value.message == MSC + detail


def test_bytes_that_are_not_utf8() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse_proto_text(b'model_config_list {\n config { name: "\xff" } }', ModelServerConfig())
    assert err.value.message == MSC + "2:18: Invalid UTF-8 (invalid start byte)"


def test_a_file_logs_the_parser_error_and_fails_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ssl.config"
    path.write_text('server_key: "k"\nclient_verify: maybe\n')
    with caplog.at_level(logging.ERROR, "graphserve"), pytest.raises(InvalidArgumentError) as err:
        read_proto_text_file(path, SSLConfig(), what="SSL config file")
    assert err.value.message == f"Invalid protobuf file: '{path}'"
    assert caplog.messages == [
        (
            "Error parsing text-format tensorflow.serving.SSLConfig: 2:16: "
            'Expected "true" or "false".'
        )
    ]


def test_a_file_that_parses(tmp_path: Path) -> None:
    path = tmp_path / "ssl.config"
    path.write_text('server_key: "k"\nclient_verify: true\n')
    config = read_proto_text_file(str(path), SSLConfig(), what="SSL config file")
    assert (config.server_key, config.client_verify) == ("k", True)


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"^Could not read SSL config file .*absent: "):
        read_proto_text_file(tmp_path / "absent", SSLConfig(), what="SSL config file")
