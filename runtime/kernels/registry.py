"""Kernel registry: implementations of ops for one device type.

A kernel is registered as a *factory*: called once per node when a plan is compiled, with the
node's resolved attrs, it returns the plain function that the plan calls with numpy arrays. Attr
handling therefore happens once, and a factory may return a numpy function directly
(``np.add``), so the hot path has no wrapper at all::

    @kernel("Relu")
    def relu(node: NodeContext) -> Callable:
        return lambda x: np.maximum(x, x.dtype.type(0))

Kernel functions receive one positional argument per input tensor (list arguments such as
ConcatV2's ``values`` arrive flattened, in order) and return one array for a single-output op or a
tuple/list with one entry per output port otherwise. They must never modify their inputs: tensors
are shared between consumers.

Kernels that need per-session state (variables) get it through ``node.resources``; so do kernels
that open a file by name, which ask its ``readable`` (``runtime.readable_files``) first.

Inputs that the graph fixes (``Const`` nodes: a Reshape's shape, a Transpose's permutation, a
weight matrix) are known when a plan is compiled. A factory may look at them with
``node.constant_input(i)`` and return a function specialised for the value, declaring with
``node.bake(fn, i)`` that the function takes the node's inputs *without* input ``i``::

    @kernel("Transpose")
    def transpose(node: NodeContext) -> Callable:
        perm = node.constant_input(1)
        if perm is not None and valid(perm):
            axes = tuple(perm.tolist())
            return node.bake(lambda x: x.transpose(axes), 1)
        return generic_transpose

Outside a plan (constant folding, tests) no input is constant and the factory builds the generic
function.

Ops that run functions of the graph's library (If, While, Case) get them compiled through
``node.compile_function(func)``: a ``runtime.function_plans.CompiledFunction`` built once, when the
plan is compiled (by ``runtime.compiler``), over the same resources. Outside a plan there is no
compiler and such a factory fails, so these ops are never constant-folded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.ops import OP_REGISTRY, load_all_op_definitions

CPU = "CPU"

_MISSING = object()


@dataclass
class NodeContext:
    """What a kernel factory may know about the node it implements."""

    name: str
    op: str
    attrs: Mapping[str, Any]
    num_outputs: int = 1
    device: str = CPU
    resources: Any = None  # the session's ResourceManager, for stateful kernels
    input_dtypes: tuple[int, ...] = field(default_factory=tuple)  # DataType numbers, when known
    # Input index -> value, for the inputs that are constants of the graph.
    constant_inputs: Mapping[int, Any] = field(default_factory=dict)
    # Inputs the returned function has baked in (and is called without); see ``bake``.
    baked_inputs: tuple[int, ...] = ()
    # The graph's function library (name -> FunctionDef, or an already specialised body).
    functions: Mapping[str, Any] = field(default_factory=dict)
    # Compiles a library function (a ``FuncAttr`` or a name) to a callable sub-plan; see
    # ``runtime.function_plans``. None outside a plan.
    function_compiler: Callable[[Any], Any] | None = None

    def constant_input(self, index: int) -> Any:
        """The value of input ``index`` if the graph fixes it, else None."""
        return self.constant_inputs.get(index)

    def bake(self, fn: Callable[..., Any], *indices: int) -> Callable[..., Any]:
        """Declare that ``fn`` has the constant inputs ``indices`` built in, and return it."""
        for index in indices:
            if index not in self.constant_inputs:
                raise KernelError(self, f"input {index} is not a constant and cannot be baked in")
        self.baked_inputs = tuple(sorted(set(self.baked_inputs) | set(indices)))
        return fn

    def compile_function(self, func: Any) -> Any:
        """The library function ``func`` (a ``FuncAttr`` or a name) compiled to a sub-plan."""
        if self.function_compiler is None:
            raise KernelError(self, "runs library functions, which need a plan's function compiler")
        return self.function_compiler(func)

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.attrs:
            return self.attrs[name]
        if default is _MISSING:
            raise KernelError(self, f"missing attr {name!r}")
        return default

    def np_dtype(self, name: str, default: Any = _MISSING) -> np.dtype:
        """A ``type`` attr as a numpy dtype."""
        value = self.attr(name, default)
        return value if isinstance(value, np.dtype) else dtypes.to_numpy(value)


class KernelError(Exception):
    """A kernel cannot be built for a node (bad or unsupported attrs)."""

    def __init__(self, node: NodeContext, message: str) -> None:
        super().__init__(f"{node.op} node '{node.name}': {message}")


KernelFactory = Callable[[NodeContext], Callable[..., Any]]


class KernelRegistry:
    def __init__(self) -> None:
        self._factories: dict[tuple[str, str], KernelFactory] = {}
        # Imports every kernel family; the ``runtime.kernels`` package, which lists them,
        # installs it.
        self.load_all: Callable[[], None] = lambda: None

    def register(self, op_type: str, device: str, factory: KernelFactory) -> None:
        key = (op_type, device)
        if key in self._factories:
            raise ValueError(f"kernel for {op_type} on {device} is registered twice")
        self._factories[key] = factory

    def lookup(self, op_type: str, device: str = CPU) -> KernelFactory | None:
        return self._factories.get((op_type, device))

    def has(self, op_type: str, device: str = CPU) -> bool:
        return (op_type, device) in self._factories

    def op_types(self, device: str = CPU) -> list[str]:
        return sorted(op for op, dev in self._factories if dev == device)


KERNELS = KernelRegistry()


def kernel(*op_types: str, device: str = CPU) -> Callable[[KernelFactory], KernelFactory]:
    """Register the decorated factory for each named op type on ``device``."""

    def decorate(factory: KernelFactory) -> KernelFactory:
        for op_type in op_types:
            KERNELS.register(op_type, device, factory)
        return factory

    return decorate


def instantiate(
    op_type: str,
    attrs: Mapping[str, Any] | None = None,
    *,
    num_outputs: int = 1,
    name: str = "node",
    resources: Any = None,
    device: str = CPU,
    constant_inputs: Mapping[int, Any] | None = None,
    function_compiler: Callable[[Any], Any] | None = None,
) -> Callable[..., Any]:
    """Build the kernel function for a free-standing node; used by tests and constant folding.

    Attr defaults from the op's definition are filled in, as the graph loader does. With
    ``constant_inputs`` the factory may specialise on them; the function returned here still
    takes every input (the baked-in ones are dropped before the call), so that callers need not
    know what the kernel chose to bake in. ``function_compiler`` serves ops that run library
    functions (see ``runtime.function_plans.FunctionCompiler``).
    """
    load_all_op_definitions()
    KERNELS.load_all()
    factory = KERNELS.lookup(op_type, device)
    if factory is None:
        raise KeyError(f"no {device} kernel registered for op {op_type}")
    full_attrs: dict[str, Any] = {}
    op_def = OP_REGISTRY.get(op_type)
    if op_def is not None:
        full_attrs.update(op_def.attr_defaults)
    full_attrs.update(attrs or {})
    ctx = NodeContext(
        name, op_type, full_attrs, num_outputs, device, resources,
        constant_inputs=dict(constant_inputs or {}),
        function_compiler=function_compiler,
    )
    fn = factory(ctx)
    baked = set(ctx.baked_inputs)
    if not baked:
        return fn

    def call(*inputs: Any) -> Any:
        return fn(*(x for i, x in enumerate(inputs) if i not in baked))

    return call
