"""CPU kernels: functional control flow (If, While, Case) over function bodies.

The functions are compiled to sub-plans once, when the node's own plan is compiled
(``NodeContext.compile_function``); a kernel call only picks one and runs it, or runs the
condition and the body in turn. Loop variables, branch arguments and results pass through
untouched, whatever they hold: arrays, resource handles, TensorLists.

A condition is a tensor's truth in TensorFlow's sense: a scalar is true when non-zero (a string
when non-empty), any other tensor when it has elements.

A loop belongs to the run in progress on its thread: when that run has a cancellation
(``runtime.cancellation.current()``), the loop reads it before each iteration and stops with its
error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from runtime import dtypes
from runtime.cancellation import current
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, OpError
from runtime.function_plans import CompiledFunction
from runtime.kernels.registry import KernelError, NodeContext, kernel

# Scalars of these types have a truth value (TensorFlow's list); other types only when not scalar.
_TRUTHFUL = frozenset(
    {
        DataType.DT_FLOAT,
        DataType.DT_DOUBLE,
        DataType.DT_INT32,
        DataType.DT_UINT8,
        DataType.DT_INT16,
        DataType.DT_INT8,
        DataType.DT_INT64,
        DataType.DT_BOOL,
        DataType.DT_STRING,
    }
)


def _truth(value: Any) -> bool:
    if value.ndim == 0:
        return bool(value)  # non-zero number, True, non-empty bytes
    size: int = value.size
    return size > 0


def truth_function(dtype: DataType | None) -> Callable[[Any], bool]:
    """How a condition of type ``dtype`` decides, as TensorFlow's ``ToBool`` does."""
    if dtype is None or DataType.of(dtype) in _TRUTHFUL:
        return _truth
    message = f"{dtypes.short_name(dtype)} cannot be converted to a boolean"

    def strict(value: Any) -> bool:
        if value.ndim == 0:
            raise InvalidArgumentError(message)
        size: int = value.size
        return size > 0

    return strict


def _annotated(err: Exception, functions: Sequence[CompiledFunction]) -> Exception:
    """The error raised inside one of ``functions``, naming the node it came from there."""
    for function in functions:
        found = function.annotate(err)
        if found is not None:
            return found
    return err


def _raise_from(err: Exception, functions: Sequence[CompiledFunction]) -> NoReturn:
    found = _annotated(err, functions)
    if found is err:
        raise err
    raise found from err


def _compile(node: NodeContext, attr: str, func: Any) -> CompiledFunction:
    try:
        compiled: CompiledFunction = node.compile_function(func)
    except (KernelError, OpError):
        raise
    except Exception as err:
        raise KernelError(node, f"cannot compile function {attr}: {err}") from err
    return compiled


def _check_types(
    node: NodeContext,
    what: str,
    function: CompiledFunction,
    got: Sequence[DataType | None],
    want: Sequence[Any],
) -> None:
    if len(got) != len(want):
        raise KernelError(
            node,
            f"function '{function.name}' ({what}) has {len(got)} {_noun(what)}; "
            f"the node has {len(want)}",
        )
    for i, (have, need) in enumerate(zip(got, want)):
        if have is not None and need is not None and DataType.of(have) != DataType.of(need):
            raise KernelError(
                node,
                f"function '{function.name}' ({what}) {_noun(what)[:-1]} {i} is "
                f"{dtypes.short_name(have)}; the node has {dtypes.short_name(need)}",
            )


def _noun(what: str) -> str:
    return "arguments" if what.endswith("arguments") else "results"


def _results(num_outputs: int) -> Callable[[Sequence[Any]], Any]:
    """How a function's result list becomes the kernel's return value."""
    if num_outputs == 1:
        return lambda results: results[0]
    if num_outputs == 0:
        return lambda results: None
    return lambda results: results


def _branches(node: NodeContext, attrs: Sequence[tuple[str, Any]]) -> list[CompiledFunction]:
    in_types = list(node.attr("Tin"))
    out_types = list(node.attr("Tout"))
    branches = []
    for label, func in attrs:
        branch = _compile(node, label, func)
        _check_types(node, f"{label} arguments", branch, branch.input_types, in_types)
        _check_types(node, f"{label} results", branch, branch.output_types, out_types)
        branches.append(branch)
    return branches


@kernel("If", "StatelessIf")
def if_(node: NodeContext) -> Callable[..., Any]:
    then_branch, else_branch = _branches(
        node,
        [("then_branch", node.attr("then_branch")), ("else_branch", node.attr("else_branch"))],
    )
    truth = truth_function(node.attr("Tcond", None))
    then_fn, else_fn = then_branch.fn, else_branch.fn
    both = (then_branch, else_branch)
    pack = _results(node.num_outputs)

    def run_if(cond: Any, *args: Any) -> Any:
        fn = then_fn if truth(cond) else else_fn
        try:
            return pack(fn(*args))
        except Exception as err:  # noqa: BLE001 - re-raised naming the branch's node
            _raise_from(err, both)

    return run_if


@kernel("Case", "StatelessCase")
def case(node: NodeContext) -> Callable[..., Any]:
    funcs = list(node.attr("branches"))
    if not funcs:
        raise KernelError(node, "has no branches")
    branches = _branches(node, [(f"branches[{i}]", f) for i, f in enumerate(funcs)])
    fns = [b.fn for b in branches]
    last = len(fns) - 1
    pack = _results(node.num_outputs)

    def run_case(branch_index: Any, *args: Any) -> Any:
        if np.ndim(branch_index) != 0:
            raise InvalidArgumentError("branch_index must be scalar")
        index = int(branch_index)
        # Out of range (negative too) runs the last branch, the default.
        fn = fns[index] if 0 <= index <= last else fns[last]
        try:
            return pack(fn(*args))
        except Exception as err:  # noqa: BLE001 - re-raised naming the branch's node
            _raise_from(err, branches)

    return run_case


@kernel("While", "StatelessWhile")
def while_(node: NodeContext) -> Callable[..., Any]:
    types = list(node.attr("T"))
    cond = _compile(node, "cond", node.attr("cond"))
    body = _compile(node, "body", node.attr("body"))
    _check_types(node, "cond arguments", cond, cond.input_types, types)
    if len(cond.output_types) != 1:
        raise KernelError(
            node, f"condition '{cond.name}' has {len(cond.output_types)} results; it needs 1"
        )
    _check_types(node, "body arguments", body, body.input_types, types)
    _check_types(node, "body results", body, body.output_types, types)
    truth = truth_function(cond.output_types[0])
    cond_fn, body_fn = cond.fn, body.fn
    both = (cond, body)
    pack = _results(len(types))

    # The per-iteration cost of a recurrent model's loop is this loop: one call of each plan.
    def run_while(*args: Any) -> Any:
        state: Sequence[Any] = args
        cancellation = current()
        try:
            if cancellation is None:
                while truth(cond_fn(*state)[0]):
                    state = body_fn(*state)
            else:
                while truth(cond_fn(*state)[0]):
                    if cancellation.error is not None:
                        cancellation.check()
                    state = body_fn(*state)
        except Exception as err:  # noqa: BLE001 - re-raised naming the function's node
            _raise_from(err, both)
        return pack(state)

    return run_while
