"""Runs a recorded kernel case through our kernel and compares with TensorFlow's result."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from runtime import dtypes
from runtime.errors import OpError
from runtime.kernels.registry import KernelError, instantiate
from runtime.ops import OP_REGISTRY, load_all_op_definitions
from tests.runtime.kernels.case import Case

RECORDINGS = Path(__file__).resolve().parents[2] / "fixtures" / "kernels"


def load_recording(family: str) -> dict[str, np.ndarray]:
    path = RECORDINGS / f"{family}.npz"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make kernel-fixtures`")
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _our_attr(value: Any) -> Any:
    if isinstance(value, type) and issubclass(value, np.generic) or isinstance(value, np.dtype):
        return dtypes.from_numpy(np.dtype(value))
    if isinstance(value, list) and value and all(
        isinstance(v, type) and issubclass(v, np.generic) for v in value
    ):
        return [dtypes.from_numpy(np.dtype(v)) for v in value]
    return value


def kernel_attrs(case: Case) -> dict[str, Any]:
    """The attrs our kernel factory gets for ``case``: node attrs, then attrs, dtypes converted."""
    return {k: _our_attr(v) for k, v in {**case.node_attrs, **case.attrs}.items()}


def _from_npz(array: np.ndarray) -> np.ndarray:
    # .npz files keep bfloat16 only as its raw 2-byte void type; it is the only such dtype
    # TensorFlow outputs, so the bytes are reinterpreted.
    if array.dtype == np.dtype("V2"):
        return array.view(ml_dtypes.bfloat16)
    return array


def _as_recorded(array: np.ndarray) -> np.ndarray:
    if array.dtype == object:  # string tensors are recorded as fixed-width bytes
        return array.astype(bytes)
    return array


def check_case(case: Case, recording: dict[str, np.ndarray]) -> None:
    attrs = kernel_attrs(case)
    outputs_recorded = sorted(
        (key for key in recording if key.startswith(f"{case.name}/out")),
        key=lambda key: int(key.rsplit("out", 1)[1]),
    )
    if f"{case.name}/error" in recording:
        # Kernels raise status errors, or numpy's own errors that a plan turns into them.
        with pytest.raises((OpError, KernelError, ValueError, IndexError, TypeError,
                            ArithmeticError)):
            fn = instantiate(case.op, attrs, num_outputs=max(1, len(outputs_recorded)))
            fn(*case.flat_inputs())
        return
    assert outputs_recorded, f"no recording for case {case.name}: run `make kernel-fixtures`"
    fn = instantiate(case.op, attrs, num_outputs=len(outputs_recorded))
    result = fn(*case.flat_inputs())
    if len(outputs_recorded) == 1 and not isinstance(result, (tuple, list)):
        result = (result,)
    assert len(result) >= len(outputs_recorded)
    for key, ours in zip(outputs_recorded, result):
        expected = _from_npz(recording[key])
        ours = np.asarray(ours)
        assert ours.shape == expected.shape, f"{key}: shape {ours.shape} != {expected.shape}"
        assert _as_recorded(ours).dtype == expected.dtype, f"{key}: dtype {ours.dtype} != {expected.dtype}"
        if expected.dtype.kind in "fc" or expected.dtype.name == "bfloat16":
            np.testing.assert_allclose(
                ours.astype(np.float64) if expected.dtype.name == "bfloat16" else ours,
                expected.astype(np.float64) if expected.dtype.name == "bfloat16" else expected,
                rtol=case.rtol, atol=case.atol, err_msg=key,
            )
        else:
            np.testing.assert_array_equal(_as_recorded(ours), expected, err_msg=key)


def recorded_message(case: Case, recording: dict[str, np.ndarray]) -> str:
    """TensorFlow's message for a case it rejected, without the eager wrapper around it."""
    recorded = recording[f"{case.name}/error"].item().decode()
    match = re.search(r"\}\} (.*?) \[Op:", recorded, re.DOTALL)
    return match.group(1) if match else recorded


def declared_outputs(case: Case) -> int:
    """How many outputs the op's definition gives a node with the case's attrs."""
    load_all_op_definitions()
    op_def = OP_REGISTRY.get(case.op)
    assert op_def is not None, f"{case.op} has no op definition"
    return op_def.num_outputs({**op_def.attr_defaults, **kernel_attrs(case)})


def check_output_count(case: Case, recording: dict[str, np.ndarray]) -> None:
    """The op's definition gives the node as many outputs as TensorFlow returned."""
    recorded = [key for key in recording if key.startswith(f"{case.name}/out")]
    assert declared_outputs(case) == len(recorded)


def check_rejection(
    case: Case,
    recording: dict[str, np.ndarray],
    num_outputs: int | None = None,
    *,
    exact: bool = False,
) -> None:
    """Our kernel rejects a case TensorFlow rejected with a status error carrying TensorFlow's
    message and, where the recording has it, TensorFlow's status code.

    A case TensorFlow rejected before any kernel ran (an attr outside the op's allowed values)
    has a message about the op definition; there only the status error is required, unless
    ``exact`` asks for the recorded text whatever its origin. ``num_outputs`` defaults to the
    op definition's count.
    """
    outputs = declared_outputs(case) if num_outputs is None else num_outputs
    with pytest.raises(OpError) as info:
        instantiate(case.op, kernel_attrs(case), num_outputs=outputs)(*case.flat_inputs())
    if not exact and not recording[f"{case.name}/error"].item().startswith(b"{{function_node"):
        return
    assert info.value.message == recorded_message(case, recording)
    code = recording.get(f"{case.name}/code")
    if code is not None:
        assert int(info.value.code) == int(code), f"{info.value.code!r} != {int(code)}"


def run_bounded(script: str, what: str, timeout_s: float = 120.0) -> str:
    """The stdout of ``script`` run in a child Python from the repository root. A child, since
    a backtracking regex holds the GIL: only a process boundary bounds the wait; ``what``
    names what failed to finish."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=Path(__file__).resolve().parents[3],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish")
    return done.stdout
