"""The graph IR: nodes (operations) connected by tensors (``node:port``) and control edges.

A ``Graph`` is built from a ``GraphDef`` (or a function body) once, with attrs decoded to Python
values and op defaults filled in. Rewrites (function inlining, optimization passes) build new
node maps rather than mutating nodes other code may hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.attrs import decode_attr, decode_attrs
from runtime.errors import InvalidArgumentError
from runtime.ops import OP_REGISTRY, ArgDef, OpDef, load_all_op_definitions


@dataclass(frozen=True, order=True)
class TensorRef:
    """Output ``port`` of node ``node``."""

    node: str
    port: int = 0

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"

    @classmethod
    def parse(cls, name: str) -> TensorRef:
        """Parse ``node``, ``node:3`` (graph tensor names; a trailing ``:N`` is the port)."""
        node, sep, port = name.rpartition(":")
        if sep and port.isdigit():
            return cls(node, int(port))
        return cls(name, 0)


@dataclass
class Node:
    name: str
    op: str
    inputs: list[TensorRef] = field(default_factory=list)
    control_inputs: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    device: str = ""

    def copy(self, **changes: Any) -> Node:
        fields: dict[str, Any] = {
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "control_inputs": list(self.control_inputs),
            "attrs": dict(self.attrs),
            "device": self.device,
        }
        fields.update(changes)
        return Node(**fields)


def parse_input(text: str) -> tuple[TensorRef | None, str | None]:
    """A NodeDef input string: ``^node`` is a control input, anything else a tensor."""
    if text.startswith("^"):
        return None, text[1:]
    return TensorRef.parse(text), None


def op_def_for(op: str, model_op_defs: Mapping[str, OpDef] | None = None) -> OpDef | None:
    load_all_op_definitions()
    found = OP_REGISTRY.get(op)
    if found is None and model_op_defs:
        found = model_op_defs.get(op)
    return found


def fill_default_attrs(
    op: str, attrs: dict[str, Any], model_op_defs: Mapping[str, OpDef] | None = None
) -> dict[str, Any]:
    """Attrs a SavedModel omitted because they equal their default (TF strips them on export)."""
    filled: dict[str, Any] = {}
    if model_op_defs and op in model_op_defs:
        filled.update(model_op_defs[op].attr_defaults)
    own = OP_REGISTRY.get(op)
    if own is not None:
        for key, value in own.attr_defaults.items():
            filled.setdefault(key, value)
    filled.update(attrs)
    return filled


class Graph:
    """An ordered map of nodes by name, plus the function library they may call."""

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        functions: Mapping[str, Any] | None = None,
        model_op_defs: Mapping[str, OpDef] | None = None,
    ) -> None:
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if node.name in self.nodes:
                raise InvalidArgumentError(f"Duplicate node name in graph: '{node.name}'")
            self.nodes[node.name] = node
        self.functions: dict[str, Any] = dict(functions or {})  # name -> FunctionDef proto
        self.model_op_defs: dict[str, OpDef] = dict(model_op_defs or {})

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise InvalidArgumentError(f"Node '{name}' is not in the graph") from None

    def with_nodes(self, nodes: Iterable[Node]) -> Graph:
        """A new graph over ``nodes`` sharing this graph's library."""
        return Graph(nodes, self.functions, self.model_op_defs)

    def op_def(self, op: str) -> OpDef | None:
        return op_def_for(op, self.model_op_defs)

    def forwards_input(self, node: Node) -> bool:
        """Whether the node's output i is its input i (``OpDef.forwards_input``)."""
        op_def = self.op_def(node.op)
        return op_def is not None and op_def.forwards_input

    def is_identity(self, node: Node) -> bool:
        """Whether the node forwards its input and is nothing more (``OpDef.is_identity``)."""
        op_def = self.op_def(node.op)
        return op_def is not None and op_def.is_identity

    def is_placeholder(self, node: Node) -> bool:
        """Whether the node stands for a value the caller feeds (``OpDef.placeholder``)."""
        op_def = self.op_def(node.op)
        return op_def is not None and op_def.placeholder

    def num_outputs(self, node: Node) -> int:
        """Output count of a node, from its op definition or its callee's signature."""
        op_def = self.op_def(node.op)
        if op_def is not None:
            return op_def.num_outputs(node.attrs)
        function = self.functions.get(node.op)
        if function is not None:
            return len(function.signature.output_arg)
        raise InvalidArgumentError(f"Op type not registered '{node.op}' in node '{node.name}'")


def node_from_def(node_def: Any, model_op_defs: Mapping[str, OpDef] | None = None) -> Node:
    inputs: list[TensorRef] = []
    controls: list[str] = []
    for text in node_def.input:
        ref, ctrl = parse_input(text)
        if ref is not None:
            if controls:
                raise InvalidArgumentError(
                    f"Node '{node_def.name}': data input '{text}' follows a control input"
                )
            inputs.append(ref)
        else:
            assert ctrl is not None
            controls.append(ctrl)
    attrs = fill_default_attrs(node_def.op, decode_attrs(node_def.attr), model_op_defs)
    return Node(node_def.name, node_def.op, inputs, controls, attrs, node_def.device)


def _arg_defs(arg_defs: Any) -> tuple[ArgDef, ...]:
    return tuple(ArgDef(a.name, a.number_attr or a.type_list_attr or None) for a in arg_defs)


def model_op_defs_from(op_list: Any) -> dict[str, OpDef]:
    """The model's own op definitions (MetaInfoDef.stripped_op_list): TF's registry, as data."""
    defs: dict[str, OpDef] = {}
    for op in op_list.op:
        defaults = {
            a.name: decode_attr(a.default_value) for a in op.attr if a.HasField("default_value")
        }
        defs[op.name] = OpDef(
            op.name, _arg_defs(op.input_arg), _arg_defs(op.output_arg), defaults, op.is_stateful
        )
    return defs


def graph_from_graph_def(graph_def: Any, model_op_defs: Mapping[str, OpDef] | None = None) -> Graph:
    load_all_op_definitions()
    nodes = [node_from_def(nd, model_op_defs) for nd in graph_def.node]
    functions = {f.signature.name: f for f in graph_def.library.function}
    return Graph(nodes, functions, model_op_defs)
