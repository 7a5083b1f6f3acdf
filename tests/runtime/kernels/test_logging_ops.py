"""Assert, Print, PrintV2 and StringFormat against TensorFlow: how tensors print (kernel cases),
checks reached through control edges and inside v1 conds, plain and optimized (graph cases),
dynamic_rnn's own check in a fixture model, and where printed lines go."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from runtime.errors import InvalidArgumentError, OpError, UnimplementedError
from runtime.kernels.registry import instantiate
from tests.runtime.kernels import cases_logging_ops
from tests.runtime.kernels.case import Case
from tests.runtime.kernels.check import check_case, kernel_attrs, load_recording
from tests.runtime.kernels.graph_cases import (
    GraphCase,
    case_params,
    load_cases,
    run_case,
    session_for,
)
from tests.runtime.kernels.graph_cases import check_case as check_graph_case

RECORDING = load_recording("logging_ops")
KERNEL_CASES = cases_logging_ops.CASES
ERROR_CASES = [c for c in KERNEL_CASES if f"{c.name}/error" in RECORDING]
# TensorFlow's own message held a byte that is not UTF-8, so Python could not record it.
UNRECORDED_MESSAGES = {"assert_str_s-1"}
GRAPH_CASES = {case.name: case for case in load_cases("logging_ops")}


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[c.name for c in KERNEL_CASES])
def test_kernel_matches_tensorflow(case: Case) -> None:
    check_case(case, RECORDING)


def _tensorflow_message(recorded: np.ndarray) -> str:
    text = bytes(recorded).decode("utf-8", "backslashreplace")
    text = re.sub(r"^\{\{function_node [^}]*\}\} ", "", text)
    return re.sub(r" \[Op:\w+\]( name: .*)?$", "", text, flags=re.DOTALL)


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c.name for c in ERROR_CASES])
def test_kernel_messages_are_tensorflows(case: Case) -> None:
    fn = instantiate(case.op, kernel_attrs(case))
    with pytest.raises(InvalidArgumentError) as info:
        fn(*case.flat_inputs())
    if case.name not in UNRECORDED_MESSAGES:
        assert info.value.message == _tensorflow_message(RECORDING[f"{case.name}/error"])


@pytest.mark.parametrize(("case", "optimize"), case_params(list(GRAPH_CASES.values())))
def test_graph_matches_tensorflow(
    case: GraphCase, optimize: bool, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with caplog.at_level(logging.INFO, logger="graphserve.print"):
        check_graph_case(case, optimize)
    printed = capsys.readouterr()
    assert printed.out == case.stdout.decode()
    if case.name == "print":
        # TensorFlow writes Print's lines to stderr; here each is one log record.
        lines = [r.getMessage() for r in caplog.records if r.name == "graphserve.print"]
        assert "".join(f"{line}\n" for line in lines) == case.stderr.decode()
    else:
        assert printed.err == case.stderr.decode()


def test_an_assert_reached_only_by_a_control_edge_survives_optimization() -> None:
    case = GRAPH_CASES["assert_fails"]
    graph = session_for(case, optimize=True).graph
    checks = [node for node in graph if node.op == "Assert"]
    assert checks and any(checks[0].name in node.control_inputs for node in graph)


def test_dynamic_rnn_checks_its_sequence_lengths() -> None:
    case = GRAPH_CASES["dynamic_rnn_lengths_mismatch"]
    with pytest.raises(InvalidArgumentError, match=r"^assertion failed: \[Expected shape"):
        run_case(case, optimize=True)


def test_print_v2_logs_at_the_level_it_names(caplog: pytest.LogCaptureFixture) -> None:
    text = np.array(b"some text", dtype=object)
    with caplog.at_level(logging.INFO, logger="graphserve.print"):
        for stream in ("log(info)", "log(warning)", "log(error)"):
            instantiate("PrintV2", {"output_stream": stream})(text)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "some text"), (logging.WARNING, "some text"), (logging.ERROR, "some text")
    ]


def test_print_v2_rejects_unknown_streams() -> None:
    text = np.array(b"x", dtype=object)
    with pytest.raises(InvalidArgumentError, match=r"^Unknown output stream: nowhere, Valid"):
        instantiate("PrintV2", {"output_stream": "nowhere"})(text)
    with pytest.raises(UnimplementedError):
        instantiate("PrintV2", {"output_stream": "file:///tmp/out.txt"})(text)


def test_string_format_needs_one_input_per_placeholder() -> None:
    with pytest.raises(OpError, match="num placeholders in template and num inputs must match"):
        instantiate("StringFormat", {"template": "{} {}", "placeholder": "{}", "T": [3]})
