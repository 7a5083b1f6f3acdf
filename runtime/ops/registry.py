"""Op definitions: what an op *is* (arguments, attr defaults, properties), independent of kernels.

Definitions are written in a compact form close to TensorFlow's own op registrations::

    define("MatMul", inputs="a, b", outputs="product",
           attrs={"transpose_a": False, "transpose_b": False})
    define("ConcatV2", inputs="values*N, axis", outputs="output")
    define("IdentityN", inputs="input*T", outputs="output*T")

``name*attr`` is a list argument whose length is the attr's value: an int (``number_attr``) or
the length of a type list (``type_list_attr``). Attr defaults fill in attrs that a SavedModel
omits (TensorFlow strips attrs equal to their default when it writes a model).

The arity of a node's outputs, and the port a function body's ``node:arg:index`` tensor name
refers to, both come from these definitions. So do the properties that compilers and graph
rewrites ask of an op instead of keeping their own lists of op names::

    define("StopGradient", inputs="input", outputs="output", forwards_input=True)
    define("PlaceholderWithDefault", inputs="input", outputs="output",
           forwards_input=True, placeholder=True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ArgDef:
    name: str
    length_attr: str | None = None  # list argument: its length comes from this attr

    def length(self, attrs: Mapping[str, Any]) -> int:
        if self.length_attr is None:
            return 1
        value = attrs[self.length_attr]
        return len(value) if isinstance(value, (list, tuple)) else int(value)


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[ArgDef, ...]
    outputs: tuple[ArgDef, ...]
    attr_defaults: Mapping[str, Any] = field(default_factory=dict)
    # Its result depends on more than its inputs (state, randomness, executor frames), or it has
    # an effect: rewrites never fold or merge it.
    stateful: bool = False
    # Output i is input i, unchanged (Identity and its kin): a plan reads the input instead of
    # calling a kernel. Tensors are never modified in place, so this is what the kernels do too.
    forwards_input: bool = False
    # Stands for a value the caller feeds (PlaceholderWithDefault forwards its input when not fed).
    placeholder: bool = False

    @property
    def is_identity(self) -> bool:
        """Forwards its input and is nothing more, so rewrites may bypass it. A placeholder is a
        feed point callers name, and a stateful forwarder (RefIdentity) hands on a variable
        reference; neither is."""
        return self.forwards_input and not self.placeholder and not self.stateful

    def num_outputs(self, attrs: Mapping[str, Any]) -> int:
        return sum(arg.length(attrs) for arg in self.outputs)

    def output_ranges(self, attrs: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
        """Each output argument's [start, stop) range of flat output ports."""
        ranges, start = {}, 0
        for arg in self.outputs:
            stop = start + arg.length(attrs)
            ranges[arg.name] = (start, stop)
            start = stop
        return ranges


class OpRegistry:
    """Op definitions by op type. Registering one name twice is an error."""

    def __init__(self) -> None:
        self._defs: dict[str, OpDef] = {}

    def add(self, op_def: OpDef) -> OpDef:
        if op_def.name in self._defs:
            raise ValueError(f"op {op_def.name!r} is defined twice")
        self._defs[op_def.name] = op_def
        return op_def

    def get(self, op_type: str) -> OpDef | None:
        return self._defs.get(op_type)

    def __contains__(self, op_type: str) -> bool:
        return op_type in self._defs

    def names(self) -> list[str]:
        return sorted(self._defs)


OP_REGISTRY = OpRegistry()


def _parse_args(spec: str) -> tuple[ArgDef, ...]:
    args = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, length_attr = part.partition("*")
        args.append(ArgDef(name.strip(), length_attr.strip() or None))
    return tuple(args)


def define(
    name: str,
    inputs: str = "",
    outputs: str = "",
    attrs: Mapping[str, Any] | None = None,
    stateful: bool = False,
    forwards_input: bool = False,
    placeholder: bool = False,
    registry: OpRegistry = OP_REGISTRY,
) -> OpDef:
    """Define an op (see the module docstring for the argument syntax and ``OpDef`` for the
    properties)."""
    return registry.add(
        OpDef(
            name,
            _parse_args(inputs),
            _parse_args(outputs),
            dict(attrs or {}),
            stateful,
            forwards_input,
            placeholder,
        )
    )
