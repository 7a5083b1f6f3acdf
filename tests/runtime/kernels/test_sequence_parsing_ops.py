"""tf.SequenceExample parsing kernels against TensorFlow's recorded results and error messages."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from runtime.errors import OpError
from runtime.kernels.registry import KernelError, instantiate
from tests.runtime.kernels.case import Case
from tests.runtime.kernels.cases_parsing_ops import records, scalar
from tests.runtime.kernels.cases_sequence_parsing_ops import CASES, F32, I64, seq, typed, v2
from tests.runtime.kernels.check import check_case, kernel_attrs, load_recording

RECORDING = load_recording("sequence_parsing_ops")
ERROR_CASES = [c for c in CASES if f"{c.name}/error" in RECORDING]
# Outputs TensorFlow allocates but never writes (a scalar input's ragged outer splits): what it
# recorded there is whatever the memory held, so only their shape and dtype are compared.
UNWRITTEN = {"scalar_ragged": {1, 3}}
# protobuf puts a marker that changes from run to run in front of a DebugString.
_DEBUG_MARKER = re.compile(r"goo\.gle/\S+ *\n")


def _tf_message(case_name: str) -> str:
    """TensorFlow's status message, without the eager wrapper and protobuf's marker."""
    text = RECORDING[f"{case_name}/error"].item().decode("utf-8", "backslashreplace")
    text = text.split("}} ", 1)[-1].rsplit(" [Op:", 1)[0]
    return _DEBUG_MARKER.sub("", text)


def _assert_message(ours: str, case_name: str) -> None:
    expected = _tf_message(case_name)
    if b" [Op:" in RECORDING[f"{case_name}/error"].item():
        assert ours == expected
    else:  # the recorder keeps the first 500 bytes of a message (with the wrapper's name)
        assert ours.startswith(expected)


def _recorded(case: Case) -> list[np.ndarray]:
    count = sum(key.startswith(f"{case.name}/out") for key in RECORDING)
    return [RECORDING[f"{case.name}/out{i}"] for i in range(count)]


def _as_list(result: Any) -> list[np.ndarray]:
    return [np.asarray(r) for r in (result if isinstance(result, (list, tuple)) else [result])]


def _baked_inputs(case: Case) -> dict[int, Any]:
    """The inputs a graph fixes: all but the records (and, for the single op, its debug name)."""
    inputs = case.flat_inputs()
    last = len(inputs) - 1 if case.op == "ParseSingleSequenceExample" else len(inputs)
    first = 1 if case.op == "ParseSingleSequenceExample" else 2
    return {i: inputs[i] for i in range(first, last)}


def _run(case: Case, constants: dict[int, Any] | None = None) -> list[np.ndarray]:
    fn = instantiate(
        case.op,
        kernel_attrs(case),
        num_outputs=max(1, len(_recorded(case))),
        constant_inputs=constants,
    )
    return _as_list(fn(*case.flat_inputs()))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case: Case) -> None:
    if case.name not in UNWRITTEN:
        check_case(case, RECORDING)
        return
    ours = _run(case)
    expected = _recorded(case)
    assert len(ours) == len(expected)
    for i, (got, want) in enumerate(zip(ours, expected)):
        got = got.astype(bytes) if got.dtype == object else got  # as strings are recorded
        assert (got.shape, got.dtype) == (want.shape, want.dtype), f"out{i}"
        if i not in UNWRITTEN[case.name]:
            np.testing.assert_array_equal(got, want, err_msg=f"out{i}")


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c.name)
def test_error_messages_are_tensorflows(case: Case) -> None:
    with pytest.raises((OpError, KernelError)) as info:
        _run(case)
    if isinstance(info.value, OpError):
        _assert_message(info.value.message, case.name)
    else:  # refused when the kernel is built, as TensorFlow refuses the node's attrs
        assert str(info.value).endswith(f": {_tf_message(case.name)}")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_baked_features_match_tensorflow(case: Case) -> None:
    """With keys, defaults and flags fixed by the graph, the features are built once."""
    constants = _baked_inputs(case)
    if f"{case.name}/error" in RECORDING:
        with pytest.raises((OpError, KernelError)) as info:
            _run(case, constants)
        if isinstance(info.value, OpError):
            _assert_message(info.value.message, case.name)
        return
    for i, (got, want) in enumerate(zip(_run(case, constants), _as_list(_run(case)))):
        if i not in UNWRITTEN.get(case.name, ()):
            np.testing.assert_array_equal(got, want, err_msg=f"out{i}")


def test_every_case_is_recorded() -> None:
    recorded = {key.split("/", 1)[0] for key in RECORDING}
    assert recorded == {c.name for c in CASES}
    assert all(c.expect_error == (c in ERROR_CASES) for c in CASES)


def test_a_batch_matches_its_records_parsed_one_at_a_time() -> None:
    rng = np.random.default_rng(5)
    items = []
    for k in range(60):
        steps = [rng.normal(size=2).astype(np.float32).tolist() for _ in range(k % 5)]
        ids = [
            typed([int(x) for x in rng.integers(0, 9, size=k % 3)], "int64") for _ in range(k % 4)
        ]
        lists: dict[str, Any] = {"v": steps} if k % 7 else {}
        if ids:
            lists["ids"] = lists["more"] = ids
        items.append(seq({"n": [k]}, lists))
    spec: dict[str, Any] = {
        "context_dense": [("n", np.array([0], I64), [1])],
        "list_dense": [("v", F32, [2])],
        "list_sparse": [("ids", I64)],
        "list_ragged": [("more", I64, I64)],
        "missing": np.array([True]),
    }
    batch = _run(v2("batch", records(*items), **spec))
    n, sparse_indices, sparse_values, _, dense, lengths, ragged_values, outer, inner = batch
    np.testing.assert_array_equal(n[:, 0], np.arange(60))
    for e, item in enumerate(items):
        one = _run(v2("one", scalar(item), **spec))
        np.testing.assert_array_equal(dense[e, : lengths[e]], one[4])
        assert not dense[e, lengths[e] :].any()
        mine = sparse_indices[:, 0] == e
        np.testing.assert_array_equal(sparse_indices[mine, 1:], one[1])
        np.testing.assert_array_equal(sparse_values[mine], one[2])
        rows = inner[outer[e] : outer[e + 1] + 1]
        np.testing.assert_array_equal(ragged_values[rows[0] : rows[-1]], one[6])
        np.testing.assert_array_equal(rows - rows[0], one[8])
