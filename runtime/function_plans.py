"""Library functions compiled to plans, for the ops that run them (If, While, Case).

A FunctionDef is instantiated into a graph of its own: one Placeholder per argument, the body
inlined under the function's name (nested calls too, by ``runtime.functions``), and an
``IdentityN`` named after the function whose inputs are the function's results and whose control
inputs are its control outputs (a ``NoOp`` when it has no results). That graph compiles like any
other (``runtime.compiler``, which hands each plan a ``FunctionCompiler`` over its own graph's
library), over the same resources, so variable reads inside a body see the session's variables.
Callers get the generated function itself, without feed conversion or checks: a loop runs it once
per iteration.

The serving optimizer may replace a library entry with a ``FunctionBody``: such a graph, already
specialised for one call site and optimized (``runtime.optimize.function_bodies``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.attrs import FuncAttr
from runtime.dtypes import DataType
from runtime.errors import NotFoundError, OpError, UnimplementedError
from runtime.functions import inline_functions
from runtime.graph import Graph, Node, TensorRef


@dataclass(frozen=True)
class FunctionBody:
    """A function as a graph: feed ``inputs`` (one per argument), fetch ``outputs`` (one per
    result) and run ``targets`` (its side effects, when it has no results)."""

    name: str
    graph: Graph
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    targets: tuple[str, ...]
    input_types: tuple[DataType | None, ...]
    output_types: tuple[DataType | None, ...]


def split_func(func: FuncAttr | str) -> tuple[str, Mapping[str, Any]]:
    if isinstance(func, FuncAttr):
        return func.name, func.attrs
    return str(func), {}


def _arg_type(function: str, arg: Any, attrs: Mapping[str, Any]) -> DataType | None:
    if arg.number_attr or arg.type_list_attr:
        raise UnimplementedError(
            f"function '{function}' has list argument '{arg.name}'; only single tensors are "
            "supported as arguments of control-flow functions"
        )
    if arg.type:
        return DataType.of(arg.type)
    value = attrs.get(arg.type_attr)
    return DataType.of(value) if value is not None else None


def instantiate(library: Graph, func: FuncAttr | str) -> FunctionBody:
    """The library function ``func`` (with its instantiation attrs) as a ``FunctionBody``."""
    name, attrs = split_func(func)
    entry = library.functions.get(name)
    if entry is None:
        raise NotFoundError(f"Function '{name}' is not in the graph's function library")
    if isinstance(entry, FunctionBody):
        return entry
    sig = entry.signature
    input_types = tuple(_arg_type(name, arg, attrs) for arg in sig.input_arg)
    output_types = tuple(_arg_type(name, arg, attrs) for arg in sig.output_arg)
    placeholders = [
        Node(f"{name}/_arg{i}", "Placeholder", attrs={"dtype": dtype, "shape": None})
        for i, dtype in enumerate(input_types)
    ]
    call = Node(name, name, [TensorRef(p.name) for p in placeholders], attrs=dict(attrs))
    graph = inline_functions(
        Graph([*placeholders, call], library.functions, library.model_op_defs)
    )
    outputs = tuple(TensorRef(name, i) for i in range(len(output_types)))
    return FunctionBody(
        name,
        graph,
        tuple(TensorRef(p.name) for p in placeholders),
        outputs,
        () if outputs else (name,),
        input_types,
        output_types,
    )


class FunctionPlan(Protocol):
    """What a function's compiled plan offers its callers (``runtime.plan.Plan`` does)."""

    @property
    def raw(self) -> Callable[..., list[Any]]: ...

    def annotate(self, err: Exception) -> OpError | None: ...


# How a graph is compiled to a plan: (graph, feeds, fetches, targets, resources, device).
PlanCompiler = Callable[
    [Graph, Sequence[TensorRef], Sequence[TensorRef], Sequence[str], Any, str], FunctionPlan
]


@dataclass(frozen=True)
class CompiledFunction:
    """A function's plan: ``fn(*args)`` returns the list of its results."""

    name: str
    fn: Callable[..., list[Any]]
    plan: FunctionPlan
    input_types: tuple[DataType | None, ...]
    output_types: tuple[DataType | None, ...]

    def annotate(self, err: Exception) -> OpError | None:
        """``err`` naming the node of this function it came from, or None if it did not."""
        return self.plan.annotate(err)


# Functions being compiled on this thread (by FunctionDef identity): a function reached again
# while it is still being compiled calls itself.
_compiling = threading.local()


class FunctionCompiler:
    """Compiles the functions of one graph's library, each (name, attrs) once, with
    ``compile_plan`` (the compiler of the plan whose kernels run these functions)."""

    def __init__(
        self, library: Graph, resources: Any, device: str, compile_plan: PlanCompiler
    ) -> None:
        self.library = library
        self.resources = resources
        self.device = device
        self._compile_plan = compile_plan
        self._compiled: dict[tuple[str, Any], CompiledFunction] = {}

    @property
    def compiled_any(self) -> bool:
        """Whether a kernel of the plan being compiled runs library functions."""
        return bool(self._compiled)

    def __call__(self, func: FuncAttr | str) -> CompiledFunction:
        name, attrs = split_func(func)
        key = (name, _attrs_key(attrs))
        done = self._compiled.get(key)
        if done is not None:
            return done
        entry = self.library.functions.get(name)
        active: set[int] = _compiling.__dict__.setdefault("ids", set())
        if id(entry) in active:
            raise UnimplementedError(
                f"Function '{name}' runs itself through control flow; recursive functions are "
                "not supported"
            )
        active.add(id(entry))
        try:
            body = instantiate(self.library, func)
            plan = self._compile_plan(
                body.graph, body.inputs, body.outputs, body.targets, self.resources, self.device
            )
        finally:
            active.discard(id(entry))
        compiled = CompiledFunction(name, plan.raw, plan, body.input_types, body.output_types)
        self._compiled[key] = compiled
        return compiled


def _attrs_key(attrs: Mapping[str, Any]) -> Any:
    return tuple(sorted((k, repr(v)) for k, v in attrs.items()))
