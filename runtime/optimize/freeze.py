"""Variables that nothing in the serving graph writes become constants.

After restore and init, a serving graph only reads its variables. Replacing each read with the
restored value lets constant folding and fusion see the weights, and removes the per-call reads.
A variable that any remaining node could write (an Assign* op, or any other stateful consumer of
its handle) is left alone.

Once the serving graph is final, ``drop_unused_variables`` forgets the variables it no longer
names: a frozen weight that folding replaced (a convolution's kernel, once batch norm is folded
into it) would otherwise stay in memory beside its folded copy for as long as the model serves.
"""

from __future__ import annotations

import numpy as np

from runtime.dtypes import DataType, from_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.optimize.context import PassContext
from runtime.resources import ResourceManager, Variable

# Ops that take a variable handle and only read through it.
_READERS = frozenset(
    {"ReadVariableOp", "ResourceGather", "VarIsInitializedOp", "DisableCopyOnRead"}
)
# Resource variables, and TF1 ref variables (read through inserted ReadVariableOps).
_VARIABLES = frozenset({"VarHandleOp", "VariableV2", "Variable"})


def _variable_of(graph: Graph, ref: TensorRef, context: PassContext) -> Variable | None:
    """The variable a resource tensor refers to, following identities (``OpDef.is_identity``)."""
    for _ in range(1000):
        node = graph.nodes.get(ref.node)
        if node is None:
            return None
        if graph.is_identity(node):
            ref = node.inputs[ref.port]
            continue
        if node.op not in _VARIABLES:
            return None
        name = node.attrs.get("shared_name") or node.name
        return context.resources.find(node.attrs.get("container", ""), name)
    return None


def freeze_variables(graph: Graph, context: PassContext) -> Graph:
    written: set[int] = set()
    reads: dict[str, Variable] = {}
    for node in graph:
        for index, ref in enumerate(node.inputs):
            var = _variable_of(graph, ref, context)
            if var is None:
                continue
            if node.op in _READERS and index == 0:
                reads[node.name] = var
            elif not graph.is_identity(node):
                written.add(id(var))
    nodes: list[Node] = []
    for node in graph:
        var = reads.get(node.name)
        if var is None or id(var) in written or var.value is None:
            nodes.append(node)
        elif node.op == "ReadVariableOp":
            nodes.append(_const(node, var))
        elif node.op == "ResourceGather" and node.attrs.get("batch_dims", 0) == 0:
            params = _const(node.copy(name=f"{node.name}/frozen_params"), var)
            axis = Node(
                f"{node.name}/axis", "Const", attrs={"value": _AXIS0, "dtype": DataType.DT_INT32}
            )
            nodes += [params, axis]
            nodes.append(
                node.copy(
                    op="GatherV2",
                    inputs=[TensorRef(params.name), node.inputs[1], TensorRef(axis.name)],
                    attrs={
                        "batch_dims": 0,
                        "Tparams": node.attrs.get("dtype"),
                        "Tindices": node.attrs.get("Tindices"),
                        "Taxis": DataType.DT_INT32,
                    },
                )
            )
        else:
            nodes.append(node)
    return graph.with_nodes(nodes)


_AXIS0 = np.array(0, dtype=np.int32)
_AXIS0.flags.writeable = False


def _const(node: Node, var: Variable) -> Node:
    value = var.read()
    return Node(
        node.name,
        "Const",
        [],
        list(node.control_inputs),
        {"value": value, "dtype": from_numpy(value.dtype)},
        node.device,
    )


def drop_unused_variables(graph: Graph, resources: ResourceManager) -> int:
    """Forget every variable no variable node of ``graph`` names; how many were dropped. A
    graph whose function library makes variables of its own keeps them all."""
    if any(_makes_variables(function) for function in graph.functions.values()):
        return 0
    named = {
        (node.attrs.get("container", ""), node.attrs.get("shared_name") or node.name)
        for node in graph
        if node.op in _VARIABLES
    }
    return resources.drop_variables(lambda var: (var.container, var.name) in named)


def _makes_variables(function: object) -> bool:
    """Whether a library function (a FunctionDef, or a ``FunctionBody`` once optimized) has a
    variable node; one of neither kind counts as having one."""
    body = getattr(function, "graph", None)
    nodes = body if isinstance(body, Graph) else getattr(function, "node_def", None)
    if nodes is None:
        return True
    return any(node.op in _VARIABLES for node in nodes)
