"""Einsum as transpose + reshape + one (batched) matmul.

``np.einsum`` without a contraction path is a slow generic loop. TF itself reduces a two-operand
einsum to BatchMatMul, and so does this kernel: the equation is parsed once per node, and for each
pair of operand ranks (the ellipsis makes the plan rank-dependent) a plan is built once, saying
which labels are batch, free or contracted dims and how to permute the operands and the result.

Operands with a repeated label (diagonals) and single-operand equations go to ``np.einsum``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.math_ops_common import FLOAT32, Kernel
from runtime.kernels.nn_ops_common import LOW_FLOATS
from runtime.kernels.registry import NodeContext, kernel

ELLIPSIS = "."  # one character stands for "..." once parsed


@dataclass(frozen=True)
class Equation:
    inputs: tuple[str, ...]  # labels per operand, "." marking the ellipsis
    output: str


def parse_equation(equation: str) -> Equation:
    text = equation.replace(" ", "")
    if text.count("->") != 1:
        raise InvalidArgumentError(f"Expecting exactly one '->' in einsum equation: {equation}")
    lhs, output = text.split("->")
    inputs = tuple(lhs.split(","))
    if len(inputs) not in (1, 2):
        raise InvalidArgumentError(
            f"Expecting 1 or 2 input subscripts in equation '{equation}' but got: {len(inputs)}"
        )

    def compact(labels: str) -> str:
        if labels.count("...") > 1 or labels.replace("...", "").count(".") or (
            labels.count("...") == 0 and "." in labels
        ):
            raise InvalidArgumentError(f"Invalid ellipsis in einsum equation: {equation}")
        compacted = labels.replace("...", ELLIPSIS)
        if not all(c.isalpha() or c == ELLIPSIS for c in compacted):
            raise InvalidArgumentError(f"Invalid character in einsum equation: {equation}")
        return compacted

    parsed = Equation(tuple(compact(s) for s in inputs), compact(output))
    named_inputs = set("".join(parsed.inputs)) - {ELLIPSIS}
    for label in parsed.output:
        if label != ELLIPSIS and label not in named_inputs:
            raise InvalidArgumentError(
                f"Output subscript {label!r} does not appear in the inputs of: {equation}"
            )
        if label != ELLIPSIS and parsed.output.count(label) > 1:
            raise InvalidArgumentError(f"Output subscript {label!r} repeats in: {equation}")
    return parsed


def _expand(labels: str, ndim: int, ellipsis_labels: list[str]) -> list[str]:
    """Operand labels with the ellipsis replaced by the trailing ellipsis labels it covers."""
    if ELLIPSIS not in labels:
        if len(labels) != ndim:
            raise InvalidArgumentError(
                f"Input has rank {ndim} but its einsum subscripts '{labels}' name {len(labels)}"
            )
        return list(labels)
    named = len(labels) - 1
    count = ndim - named
    if count < 0:
        raise InvalidArgumentError(
            f"Input has rank {ndim}, less than the {named} named einsum subscripts"
        )
    at = labels.index(ELLIPSIS)
    covered = ellipsis_labels[len(ellipsis_labels) - count:] if count else []
    return list(labels[:at]) + covered + list(labels[at + 1:])


@dataclass(frozen=True)
class Plan:
    """How to compute one two-operand einsum for given operand ranks."""

    swap: bool  # compute with the operands exchanged
    sum_a: tuple[int, ...]  # axes of A summed away before the product (labels A alone has)
    sum_b: tuple[int, ...]
    perm_a: tuple[int, ...] | None  # to [batch, free, contracted] (or None: already so)
    perm_b: tuple[int, ...] | None  # to [batch, contracted, free]
    n_batch: int
    n_free_a: int
    n_free_b: int
    n_contract: int
    perm_out: tuple[int, ...] | None  # from [batch, free_a, free_b] to the output order
    ellipsis_batch: tuple[bool, ...]  # per batch dim: may broadcast (ellipsis) or must match


def _make_plan(eq: Equation, ndim_a: int, ndim_b: int) -> Plan:
    n_ellipsis = max(
        (ndim - (len(labels) - 1) if ELLIPSIS in labels else 0)
        for labels, ndim in zip(eq.inputs, (ndim_a, ndim_b))
    )
    ellipsis_labels = [f"#{i}" for i in range(n_ellipsis)]
    la = _expand(eq.inputs[0], ndim_a, ellipsis_labels)
    lb = _expand(eq.inputs[1], ndim_b, ellipsis_labels)
    if ELLIPSIS in eq.output:
        at = eq.output.index(ELLIPSIS)
        lo = list(eq.output[:at]) + ellipsis_labels + list(eq.output[at + 1:])
    else:
        if n_ellipsis:
            raise InvalidArgumentError(
                f"Output contains {n_ellipsis} broadcasting dimension(s) but no ellipsis (...) "
                "was found in the output subscripts."
            )
        lo = list(eq.output)
    if len(set(la)) != len(la) or len(set(lb)) != len(lb):
        raise _Fallback
    in_out = set(lo)
    sum_a = tuple(i for i, label in enumerate(la) if label not in lb and label not in in_out)
    sum_b = tuple(i for i, label in enumerate(lb) if label not in la and label not in in_out)
    la = [label for i, label in enumerate(la) if i not in sum_a]
    lb = [label for i, label in enumerate(lb) if i not in sum_b]
    batch = [label for label in lo if label in la and label in lb]
    free_a = [label for label in lo if label in la and label not in lb]
    free_b = [label for label in lo if label in lb and label not in la]
    contract = [label for label in la if label in lb and label not in in_out]
    swap = lo != batch + free_a + free_b and lo == batch + free_b + free_a
    if swap:
        la, lb, free_a, free_b = lb, la, free_b, free_a
        sum_a, sum_b = sum_b, sum_a
        contract = [label for label in la if label in contract]
    target_a = batch + free_a + contract
    target_b = batch + contract + free_b
    perm_a = tuple(la.index(label) for label in target_a)
    perm_b = tuple(lb.index(label) for label in target_b)
    natural = batch + free_a + free_b
    perm_out = tuple(natural.index(label) for label in lo)
    return Plan(
        swap=swap,
        sum_a=sum_a,
        sum_b=sum_b,
        perm_a=None if perm_a == tuple(range(len(perm_a))) else perm_a,
        perm_b=None if perm_b == tuple(range(len(perm_b))) else perm_b,
        n_batch=len(batch),
        n_free_a=len(free_a),
        n_free_b=len(free_b),
        n_contract=len(contract),
        perm_out=None if perm_out == tuple(range(len(perm_out))) else perm_out,
        ellipsis_batch=tuple(label.startswith("#") for label in batch),
    )


class _Fallback(Exception):
    """The equation needs np.einsum (a label repeats within an operand)."""


def _run_plan(plan: Plan, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if plan.swap:
        a, b = b, a
    if plan.sum_a:
        a = a.sum(axis=plan.sum_a, dtype=a.dtype)
    if plan.sum_b:
        b = b.sum(axis=plan.sum_b, dtype=b.dtype)
    if plan.perm_a is not None:
        a = a.transpose(plan.perm_a)
    if plan.perm_b is not None:
        b = b.transpose(plan.perm_b)
    nb, nfa, nc = plan.n_batch, plan.n_free_a, plan.n_contract
    batch_a, batch_b = a.shape[:nb], b.shape[:nb]
    for i, (da, db) in enumerate(zip(batch_a, batch_b)):
        if da != db and not (plan.ellipsis_batch[i] and (da == 1 or db == 1)):
            raise InvalidArgumentError(
                f"Einsum: batch dimensions do not match: {list(a.shape)} vs {list(b.shape)}"
            )
    free_a = a.shape[nb:nb + nfa]
    free_b = b.shape[nb + nc:]
    contract_a = a.shape[nb + nfa:]
    if contract_a != b.shape[nb:nb + nc]:
        raise InvalidArgumentError(
            f"Einsum: contracted dimensions do not match: {list(a.shape)} vs {list(b.shape)}"
        )
    k = math.prod(contract_a)
    a2 = a.reshape(batch_a + (math.prod(free_a), k))
    b2 = b.reshape(batch_b + (k, math.prod(free_b)))
    product: np.ndarray
    if a2.dtype in LOW_FLOATS:
        product = np.matmul(a2.astype(FLOAT32), b2.astype(FLOAT32)).astype(a2.dtype)
    else:
        product = np.matmul(a2, b2)
    out: np.ndarray = product.reshape(product.shape[:nb] + free_a + free_b)
    return out if plan.perm_out is None else out.transpose(plan.perm_out)


def _numpy_spec(eq: Equation) -> str:
    """The equation in np.einsum's notation."""
    spec = ",".join(s.replace(ELLIPSIS, "...") for s in eq.inputs)
    return spec + "->" + eq.output.replace(ELLIPSIS, "...")


def _numpy_einsum(spec: str, operands: tuple[np.ndarray, ...]) -> np.ndarray:
    dtype = operands[0].dtype
    if dtype in LOW_FLOATS:
        operands = tuple(x.astype(FLOAT32) for x in operands)
        return np.asarray(np.einsum(spec, *operands, optimize=len(operands) > 1)).astype(dtype)
    return np.asarray(np.einsum(spec, *operands, optimize=len(operands) > 1))


Pair = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _compile_plan(plan: Plan) -> Pair:
    """The plan as one function. The common case (one free dim per side, one contracted dim, no
    summed-away dims) is two transposes, one ``np.matmul`` and one transpose; anything else, or
    operands that do not line up exactly, takes ``_run_plan`` with its checks and messages."""

    def general(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _run_plan(plan, a, b)

    if plan.sum_a or plan.sum_b or (plan.n_free_a, plan.n_free_b, plan.n_contract) != (1, 1, 1):
        return general
    swap, nb = plan.swap, plan.n_batch
    perm_a, perm_b, perm_out = plan.perm_a, plan.perm_b, plan.perm_out

    def direct(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype in LOW_FLOATS or a.dtype != b.dtype:
            return _run_plan(plan, a, b)
        x, y = (b, a) if swap else (a, b)
        if perm_a is not None:
            x = x.transpose(perm_a)
        if perm_b is not None:
            y = y.transpose(perm_b)
        if x.shape[:nb] != y.shape[:nb] or x.shape[-1] != y.shape[-2]:
            return _run_plan(plan, a, b)
        out: np.ndarray = np.matmul(x, y)
        return out if perm_out is None else out.transpose(perm_out)

    return direct


@kernel("Einsum")
def einsum(node: NodeContext) -> Kernel:
    eq = parse_equation(str(node.attr("equation")))
    spec = _numpy_spec(eq)
    if len(eq.inputs) == 1:
        return lambda x: _numpy_einsum(spec, (x,))
    plans: dict[tuple[int, int], Pair] = {}

    def build(ndim_a: int, ndim_b: int) -> Pair:
        try:
            return _compile_plan(_make_plan(eq, ndim_a, ndim_b))
        except _Fallback:
            return lambda a, b: _numpy_einsum(spec, (a, b))

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        fn = plans.get((a.ndim, b.ndim))
        if fn is None:
            fn = plans.setdefault((a.ndim, b.ndim), build(a.ndim, b.ndim))
        return fn(a, b)

    return run
