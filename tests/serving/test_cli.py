"""Command-line flags with tensorflow_model_server's names and syntax."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from serving.cli import FlagError, main, options_from_flags, parse_flags, usage
from serving.config import ServerOptions


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """main() configures the process's logging; put it back for the tests that follow."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)


def test_flag_syntaxes() -> None:
    parsed = parse_flags(["--port=9000", "--rest_api_port", "8501", "--enable_batching",
                          "--rest_api_enable_cors_support=false", "--model_name=m",
                          "--saved_model_tags=serve,gpu", "stray", "--bogus=1"])
    assert parsed.values == {"port": 9000, "rest_api_port": 8501, "enable_batching": True,
                             "rest_api_enable_cors_support": False, "model_name": "m",
                             "saved_model_tags": "serve,gpu"}
    assert parsed.unknown == ["stray", "--bogus=1"]


@pytest.mark.parametrize("argv", [["--port=abc"], ["--enable_batching=maybe"], ["--port"]])
def test_bad_values(argv: list[str]) -> None:
    with pytest.raises(FlagError):
        parse_flags(argv)


def test_log_flags() -> None:
    assert ServerOptions().log_level == "info"
    assert ServerOptions().log_format == "text"
    values = parse_flags(["--log_level=DEBUG", "--log_format", "json"]).values
    assert values == {"log_level": "debug", "log_format": "json"}
    assert options_from_flags(values) == ServerOptions(log_level="debug", log_format="json")
    assert "\t--log_level=info\tstr\tdebug|info|warning|error" in usage()
    assert "\t--log_format=text\tstr\ttext|json" in usage()


@pytest.mark.parametrize("argv", [["--log_level=verbose"], ["--log_format=xml"],
                                  ["--log_level="]])
def test_bad_log_flags(argv: list[str]) -> None:
    with pytest.raises(FlagError, match="Illegal value for flag --log_"):
        parse_flags(argv)


def test_options(caplog: pytest.LogCaptureFixture) -> None:
    values = parse_flags(["--rest_api_port=1", "--enable_model_warmup=false",
                          "--file_system_settle_seconds=0.25",
                          "--tensorflow_session_parallelism=2",
                          "--tensorflow_inter_op_parallelism=3"]).values
    with caplog.at_level(logging.WARNING, logger="graphserve"):
        options = options_from_flags(values)
    assert options == ServerOptions(
        rest_api_port=1, enable_model_warmup=False, file_system_settle_seconds=0.25,
        tensorflow_session_parallelism=2, tensorflow_inter_op_parallelism=3,
    )
    assert "--enable_model_warmup" not in caplog.text
    assert "--num_tflite_pools is accepted" not in caplog.text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TensorFlow ModelServer: graphserve ")
    assert "TensorFlow Library: " in out


def test_bad_value_prints_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--port=abc"]) == 255
    out = capsys.readouterr().out
    assert "Illegal value for flag --port" in out and "usage: graphserve" in out


def test_start_up_failure_exits_255(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rest_api_port=0", "extra"]) == 255
    out = capsys.readouterr().out
    assert out.startswith("unknown argument: extra\n")
    assert "Failed to start server. Error: INVALID_ARGUMENT: Both server_options.model_base_path" \
        in out


def test_inspect_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.serving.support import HALF_PLUS_TWO

    assert main(["inspect", str(HALF_PLUS_TWO / "00000123")]) == 0
    assert "signature_def['serving_default']" in capsys.readouterr().out


def test_client_subcommands_match_the_client() -> None:
    from serving.cli import CLIENT_SUBCOMMANDS
    from serving.client.cli import SUBCOMMANDS

    assert CLIENT_SUBCOMMANDS == SUBCOMMANDS


def test_client_subcommand_is_routed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--server", "127.0.0.1:1", "--model", "m", "--timeout", "5"]) == 1
    assert "UNAVAILABLE" in capsys.readouterr().err


def test_all_three_parallelism_flags_fail_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--port=0", "--rest_api_port=0", "--model_name=m", "--model_base_path=/m",
                 "--tensorflow_session_parallelism=1", "--tensorflow_intra_op_parallelism=1",
                 "--tensorflow_inter_op_parallelism=1"]) == 255
    assert ("Failed to start server. Error: INVALID_ARGUMENT: Either configure "
            "server_options.tensorflow_session_parallelism") in capsys.readouterr().out
