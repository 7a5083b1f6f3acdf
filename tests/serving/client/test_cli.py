"""``graphserve predict|classify|regress|status|metadata|reload`` in-process, against the real
daemon over REST."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from serving.client.cli import SUBCOMMANDS, main
from tests.serving.client.conftest import CUSTOM, MULTI_IO
from tests.serving.client.test_rest_client import assert_outputs
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import expected_cases


@pytest.fixture
def rest_args(rest_server: ServerProcess) -> list[str]:
    return ["--rest", "--server", f"127.0.0.1:{rest_server.port}", "--timeout", "60"]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_subcommands() -> None:
    assert SUBCOMMANDS == ("predict", "classify", "regress", "status", "metadata", "reload")


@pytest.mark.parametrize("value", ["[[1.0], [5], [0.1]]", "@{json}"])
def test_predict_literal(
    rest_args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    (tmp_path / "x.json").write_text("[[1.0], [5], [0.1]]")
    code, out, err = run(
        capsys,
        [
            "predict",
            *rest_args,
            "--model",
            "half_plus_two",
            "--label",
            "stable",
            "--input",
            "x=" + value.replace("{json}", str(tmp_path / "x.json")),
        ],
    )
    assert (code, err) == (0, "")
    # float32 answers print in their own shortest form: 0.5 * 0.1f + 2 is 2.05 in float32.
    assert out == '{\n  "y": [[2.5], [4.5], [2.05]]\n}\n'


def test_predict_files_against_tensorflow(
    rest_args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases = expected_cases(MULTI_IO)
    tensors = cases[("serving_default", "batch4")]
    args = ["predict", *rest_args, "--model", "functional_multi_io"]
    for alias, array in tensors["in"].items():
        np.save(tmp_path / f"{alias}.npy", array)
        args += ["--input", f"{alias}=@{tmp_path / alias}.npy"]
    code, out, err = run(capsys, args)
    assert (code, err) == (0, "")
    printed = json.loads(out)
    for alias, expected in tensors["out"].items():
        np.testing.assert_allclose(printed[alias], expected, rtol=1e-5, atol=1e-6)
    saved = tmp_path / "out.npz"
    code, out, _ = run(capsys, [*args, "--output", str(saved)])
    assert code == 0
    assert out.splitlines() == [
        f"class_scores: float32 [4, 3] -> {saved}",
        f"probability: float32 [4, 1] -> {saved}",
    ]
    with np.load(saved, allow_pickle=False) as data:
        assert_outputs({k: data[k] for k in data.files}, tensors["out"])


def test_predict_npz_and_typed_literals(
    rest_args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tensors = expected_cases(CUSTOM)[("compute", "batch4")]
    np.savez(tmp_path / "in.npz", **tensors["in"])
    base = [
        "predict",
        *rest_args,
        "--model",
        "custom_module",
        "--signature",
        "compute",
        "--output_filter",
        "positive_count",
        "--output_filter",
        "top_indices",
    ]
    code, out, err = run(capsys, [*base, "--input", f"@{tmp_path / 'in.npz'}"])
    assert (code, err) == (0, "")
    printed = json.loads(out)
    assert list(printed) == ["positive_count", "top_indices"]
    assert printed["top_indices"] == tensors["out"]["top_indices"].tolist()
    # The same inputs as JSON literals, typed from the signature (int64 ids, float32 values).
    literals = [f"{alias}={json.dumps(array.tolist())}" for alias, array in tensors["in"].items()]
    code, out_literal, _ = run(capsys, [*base, *(a for lit in literals for a in ("--input", lit))])
    assert code == 0 and json.loads(out_literal) == printed


def test_classify_and_regress(
    rest_args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys,
        [
            "classify",
            *rest_args,
            "--model",
            "half_plus_two",
            "--signature",
            "classify_x_to_y",
            "--example",
            '{"x": 1.0}',
            "--examples",
            '[{"x": [3.0]}]',
        ],
    )
    assert code == 0 and json.loads(out) == {"results": [[["", 2.5]], [["", 3.5]]]}
    examples = tmp_path / "examples.json"
    examples.write_text('[{}, {"x": 2.0}]')
    code, out, _ = run(
        capsys,
        [
            "regress",
            *rest_args,
            "--model",
            "half_plus_two",
            "--version",
            "123",
            "--signature",
            "regress_x_to_y",
            "--examples",
            f"@{examples}",
            "--context",
            '{"x": 10.0}',
        ],
    )
    assert code == 0 and json.loads(out) == {"results": [7.0, 3.0]}


def test_status_and_metadata(rest_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ["status", *rest_args, "--model", "half_plus_two"])
    assert code == 0
    assert json.loads(out) == {
        "model_version_status": [
            {"version": 123, "state": "AVAILABLE", "error_code": "OK", "error_message": ""}
        ]
    }
    code, out, _ = run(capsys, ["metadata", *rest_args, "--model", "half_plus_two"])
    assert code == 0
    metadata = json.loads(out)
    assert metadata["model_spec"]["version"] == 123
    assert metadata["signature_def"]["serving_default"]["outputs"]["y"]["shape"] == [-1, 1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["status", "--model", "nope"], "NOT_FOUND: Could not find any versions of model nope\n"),
        (
            ["predict", "--model", "half_plus_two", "--version", "7", "--input", "x=@{npy}"],
            "NOT_FOUND: Servable not found for request: Specific(half_plus_two, 7)\n",
        ),
        (
            ["predict", "--model", "half_plus_two", "--input", "z=@{npy}"],
            "INVALID_ARGUMENT: Missing named input: x in 'inputs' object.\n",
        ),
        (
            ["predict", "--model", "half_plus_two", "--input", 'x=[["a"]]'],
            (
                'INVALID_ARGUMENT: input x: [["a"]] is not DT_FLOAT: could not convert string to '
                "float: 'a'\n"
            ),
        ),
        (
            ["regress", "--model", "half_plus_two", "--label", "canary", "--example", "{}"],
            "INVALID_ARGUMENT: Unrecognized servable version label: canary\n",
        ),
    ],
)
def test_errors_exit_1_with_code_and_message(
    rest_args: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    message: str,
) -> None:
    np.save(tmp_path / "x.npy", np.ones((1, 1), np.float32))
    argv = [a.replace("{npy}", str(tmp_path / "x.npy")) for a in argv]
    code, out, err = run(capsys, [argv[0], *rest_args, *argv[1:]])
    assert (code, out, err) == (1, "", message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "--rest", "--model", "m", "--input", "x"], "expected NAME=VALUE"),
        (
            ["predict", "--rest", "--model", "m", "--input", "x=@/no/such.npy"],
            "cannot read /no/such.npy",
        ),
        (["predict", "--rest", "--model", "m", "--input", "x=[1,"], "--input x is not valid JSON"),
        (["classify", "--rest", "--model", "m"], "give at least one --example"),
        (["reload", "--rest", "--config", "models.config"], "reload needs gRPC"),
        (["reload", "--model_name", "m"], "--model_name needs --model_base_path"),
        (["status", "--model", "m", "--version", "1", "--label", "a"], "not allowed with"),
        (["predict", "--model", "m"], "the following arguments are required: --input"),
        (["serve"], "invalid choice: 'serve'"),
        ([], "the following arguments are required: command"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert message in err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ["predict", "--help"])
    assert code == 0 and "--input NAME=VALUE" in out
