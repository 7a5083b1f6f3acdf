"""Kernels specialised on constant inputs give TensorFlow's recorded results too.

In a plan, inputs produced by ``Const`` nodes reach the kernel factory
(``NodeContext.constant_input``), which may bake them into the function it returns. Every
recorded case of the array, math and nn families is run again here with all inputs after the
first one given as constants, and must match the same recording (or fail the same way).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from runtime.errors import OpError
from runtime.kernels import KERNELS, load_all_kernels
from runtime.kernels.registry import KernelError, NodeContext, instantiate
from runtime.ops import OP_REGISTRY, load_all_op_definitions
from tests.runtime.kernels import cases_array_ops, cases_math_ops, cases_nn_ops, check
from tests.runtime.kernels.case import Case

FAMILIES = {"array_ops": cases_array_ops, "math_ops": cases_math_ops, "nn_ops": cases_nn_ops}
# The ops whose kernels bake constant inputs in.
BAKING_OPS = frozenset({
    "Reshape", "ExpandDims", "Transpose", "GatherV2", "ConcatV2", "StridedSlice", "Sum", "Mean",
    "Max", "Min", "Prod", "Any", "All", "EuclideanNorm", "ArgMax", "ArgMin",
    # A constant 1-D operand (a per-channel vector):
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "BiasAdd", "BiasAddV1",
})
CASES = [
    (family, case)
    for family, module in FAMILIES.items()
    for case in module.CASES
    if case.op in BAKING_OPS and len(case.flat_inputs()) > 1
]


@pytest.fixture(autouse=True)
def _ieee_quiet() -> Iterator[None]:
    # Plans run kernels with numpy's floating point warnings off (TF's IEEE values, not errors).
    with np.errstate(all="ignore"):
        yield


@pytest.fixture(scope="module")
def recordings() -> dict[str, dict[str, np.ndarray]]:
    return {family: check.load_recording(family) for family in FAMILIES}


@pytest.fixture
def constants_after_first(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Makes ``check_case`` build its kernel with the case's later inputs as constants."""
    current: list[Any] = []

    def with_constants(op: str, attrs: Any = None, **kwargs: Any) -> Any:
        constants = {i: v for i, v in enumerate(current[0]) if i > 0}
        return instantiate(op, attrs, constant_inputs=constants, **kwargs)

    monkeypatch.setattr(check, "instantiate", with_constants)
    yield current


@pytest.mark.parametrize("family, case", CASES, ids=[f"{f}-{c.name}" for f, c in CASES])
def test_baked_kernels_match_tensorflow(
    family: str, case: Case, recordings: dict[str, dict[str, np.ndarray]],
    constants_after_first: list[Any],
) -> None:
    constants_after_first.append(case.flat_inputs())
    check.check_case(case, recordings[family])


# Ops whose constant input comes first (the split axis), which the sweep above leaves out.
LEADING_CONSTANT_OPS = frozenset({"Split"})
LEADING_CASES = [
    (family, case)
    for family, module in FAMILIES.items()
    for case in module.CASES
    if case.op in LEADING_CONSTANT_OPS
]


@pytest.mark.parametrize(
    "family, case", LEADING_CASES, ids=[f"{f}-{c.name}" for f, c in LEADING_CASES]
)
def test_baked_leading_constant_matches_tensorflow(
    family: str, case: Case, recordings: dict[str, dict[str, np.ndarray]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = case.flat_inputs()[0]

    def with_constant(op: str, attrs: Any = None, **kwargs: Any) -> Any:
        return instantiate(op, attrs, constant_inputs={0: first}, **kwargs)

    monkeypatch.setattr(check, "instantiate", with_constant)
    check.check_case(case, recordings[family])


def test_baked_split_checks_every_input_shape() -> None:
    axis = np.array(-1, np.int32)
    load_all_kernels()
    ctx = NodeContext("n", "Split", {"num_split": 2}, 2, constant_inputs={0: axis})
    factory = KERNELS.lookup("Split")
    assert factory is not None
    factory(ctx)
    assert ctx.baked_inputs == (0,)
    split = instantiate("Split", {"num_split": 2}, num_outputs=2, constant_inputs={0: axis})
    for shape in [(2, 4), (3, 6), (2, 4), (8,), (1, 2, 2)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        left, right = split(axis, x)
        np.testing.assert_array_equal(left, x[..., : shape[-1] // 2])
        np.testing.assert_array_equal(right, x[..., shape[-1] // 2:])
    for _ in range(2):  # a rejected shape is rejected every time, not only the first
        with pytest.raises(OpError, match="evenly divide"):
            split(axis, np.zeros((2, 3), np.float32))
    with pytest.raises(OpError, match="split_dim"):
        split(axis, np.zeros((), np.float32))


def _defaults(op: str) -> dict[str, Any]:
    load_all_op_definitions()
    definition = OP_REGISTRY.get(op)
    assert definition is not None
    return dict(definition.attr_defaults)


def test_the_baking_kernels_do_bake() -> None:
    load_all_kernels()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = {  # op: (inputs, the inputs its kernel bakes in when they are constants)
        "Reshape": ((x, np.array([4, -1], np.int32)), (1,)),
        "Transpose": ((x, np.array([2, 0, 1], np.int32)), (1,)),
        "GatherV2": ((x, np.array([1, 0], np.int32), np.array(1, np.int32)), (1, 2)),
        "Mean": ((x, np.array([-1], np.int32)), (1,)),
        "StridedSlice": ((x, np.array([0, 1], np.int32), np.array([2, 3], np.int32),
                          np.array([1, 1], np.int32)), (1, 2, 3)),
    }
    for op, (inputs, expected) in cases.items():
        ctx = NodeContext("n", op, _defaults(op), constant_inputs=dict(enumerate(inputs)))
        factory = KERNELS.lookup(op)
        assert factory is not None
        fn = factory(ctx)
        assert ctx.baked_inputs == expected, op
        plain = instantiate(op, _defaults(op))(*inputs)
        rest = [v for i, v in enumerate(inputs) if i not in expected]
        np.testing.assert_array_equal(fn(*rest), plain, err_msg=op)


def test_baking_an_input_that_is_not_constant_is_a_kernel_error() -> None:
    ctx = NodeContext("n", "Reshape", {}, constant_inputs={1: np.array([2])})
    with pytest.raises(KernelError):
        ctx.bake(lambda x: x, 0)


def test_baked_reshape_keeps_tensorflow_errors() -> None:
    reshape = instantiate("Reshape", constant_inputs={1: np.array([5, -1], np.int32)})
    with pytest.raises(OpError, match="multiple of 5"):
        reshape(np.zeros((2, 3), np.float32), np.array([5, -1], np.int32))
    # Zero-sized dims: TensorFlow infers -1 next to a zero, numpy refuses.
    zero = instantiate("Reshape", constant_inputs={1: np.array([0, -1], np.int32)})
    assert zero(np.zeros((0, 4)), None).shape == (0, 4)
