"""string_ops and ragged_ops kernels against TensorFlow's recorded results and error messages."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from runtime.errors import OpError
from runtime.kernels.registry import KernelError, instantiate
from tests.runtime.kernels import cases_ragged_ops, cases_string_ops
from tests.runtime.kernels.case import Case
from tests.runtime.kernels.check import check_case, kernel_attrs, load_recording, run_bounded

RECORDINGS = {
    "string_ops": load_recording("string_ops"),
    "ragged_ops": load_recording("ragged_ops"),
}
CASES = [("string_ops", c) for c in cases_string_ops.CASES] + [
    ("ragged_ops", c) for c in cases_ragged_ops.CASES
]
ERROR_CASES = [(f, c) for f, c in CASES if f"{c.name}/error" in RECORDINGS[f]]
ACCEPTED_CASES = [(f, c) for f, c in CASES if f"{c.name}/error" not in RECORDINGS[f]]

# Rejections whose message is not TensorFlow's word for word: checks TensorFlow makes while it
# builds the kernel (KernelErrors here, which name the node) or validates a node's attrs against
# the op's allowed values (here, when the kernel runs).
MESSAGE_DIFFERS = {
    "strong_bad_key",
    "UnicodeDecode_bad_policy",
    "UnicodeDecodeWithOffsets_bad_policy",
    "unicode_encode_bad_encoding",
}


def _run(case: Case):
    outputs = max(1, sum(1 for k in RECORDINGS_FOR[case.name] if k.startswith(f"{case.name}/out")))
    return instantiate(case.op, kernel_attrs(case), num_outputs=outputs)(*case.flat_inputs())


RECORDINGS_FOR = {c.name: RECORDINGS[f] for f, c in CASES}


@pytest.mark.parametrize("family, case", CASES, ids=[c.name for _, c in CASES])
def test_matches_tensorflow(family: str, case: Case) -> None:
    check_case(case, RECORDINGS[family])


@pytest.mark.parametrize("family, case", ACCEPTED_CASES, ids=[c.name for _, c in ACCEPTED_CASES])
def test_strings_come_back_as_object_arrays(family: str, case: Case) -> None:
    result = _run(case)
    outputs = result if isinstance(result, (tuple, list)) else [result]
    for i, output in enumerate(outputs):
        recorded = RECORDINGS[family].get(f"{case.name}/out{i}")
        if recorded is not None and recorded.dtype.kind == "S":
            assert isinstance(output, np.ndarray) and output.dtype == object
            assert all(isinstance(v, bytes) for v in output.ravel().tolist())


def _tensorflow_message(recorded: np.ndarray) -> str:
    text = bytes(recorded).decode("utf-8", "replace")
    text = re.sub(r"^\{\{function_node [^}]*\}\} ", "", text)
    return re.sub(r" \[Op:\w+\]( name: .*)?$", "", text, flags=re.DOTALL)


@pytest.mark.parametrize("family, case", ERROR_CASES, ids=[c.name for _, c in ERROR_CASES])
def test_rejections_are_status_errors_with_tensorflows_message(family: str, case: Case) -> None:
    with pytest.raises((OpError, KernelError)) as info:
        _run(case)
    if case.name in MESSAGE_DIFFERS:
        return
    expected = _tensorflow_message(RECORDINGS[family][f"{case.name}/error"])
    ours = info.value.message if isinstance(info.value, OpError) else str(info.value)
    assert ours == expected


@pytest.mark.parametrize(
    "name", [n for n in ("static_replace_invalid_unclosed", "regex_replace_invalid")]
)
def test_invalid_patterns_name_the_pattern(name: str) -> None:
    case = next(c for _, c in CASES if c.name == name)
    with pytest.raises(OpError, match=r"^Invalid pattern: \(a, error: "):
        _run(case)


def test_scalar_string_results() -> None:
    # The recorder keeps array outputs only; scalars are checked against the recorded arrays.
    x = cases_string_ops.S(*"abcdef", shape=(2, 3))
    full = instantiate("ReduceJoin", {"keep_dims": False})(x, np.array([0, 1], np.int32))
    kept = RECORDINGS["string_ops"]["reduce_join_01/out0"]
    assert full.shape == () and full.dtype == object and full.item() == kept.item()
    joined = instantiate("StringJoin", {"N": 2, "separator": "-"})(
        np.array(b"ab", dtype=object), np.array(b"c", dtype=object)
    )
    assert joined.shape == () and joined.item() == b"ab-c"
    text = instantiate("AsString", {"T": 1, "precision": 1})(np.array(3.25, np.float32))
    assert text.shape == () and text.item() == RECORDINGS["string_ops"]["as_string_one/out0"][0]


# Run in a child process: Python's `re` holds the GIL while it backtracks, so only a process
# boundary can bound the wait. The bound is generous; a linear match takes milliseconds.
LONG_NUMBERS = textwrap.dedent(
    """
    import numpy as np
    from runtime.errors import InvalidArgumentError
    from runtime.kernels.registry import instantiate

    DT_FLOAT = 1
    to_number = instantiate("StringToNumber", {"out_type": DT_FLOAT})
    decode_csv = instantiate("DecodeCSV", {"OUT_TYPE": [DT_FLOAT], "field_delim": ","})
    refused = 0
    for text in (b"1" * 200000 + b"x", b"0x" + b"f" * 200000 + b"g", b"1." + b"2" * 200000 + b"e"):
        record = np.empty(1, dtype=object)
        record[:] = [text]
        for run in (lambda: to_number(record), lambda: decode_csv(record, np.zeros(1, np.float32))):
            try:
                run()
            except InvalidArgumentError:
                refused += 1
    print(refused)
    """
)


def test_long_malformed_numbers_are_refused_in_linear_time() -> None:
    # A pattern that can split a run of digits n ways takes quadratic time to fail on it.
    out = run_bounded(LONG_NUMBERS, "parsing a long malformed number (quadratic backtracking)")
    assert out.split() == ["6"]
