"""Constant folding: a stateless node whose inputs are all constants becomes a constant.

Results much larger than their inputs (Fill, Tile, broadcasts) stay unfolded so that a model's
memory does not grow at load time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from runtime.dtypes import from_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.graph_queries import topological_order
from runtime.kernels import KERNELS, NodeContext, load_all_kernels
from runtime.optimize.context import PassContext, is_stateful, rewire

_MAX_GROWTH_BYTES = 1 << 20  # results may exceed their inputs by at most this much


def _const_node(name: str, value: np.ndarray, device: str) -> Node:
    value = np.asarray(value)
    value.flags.writeable = False
    return Node(name, "Const", [], [], {"value": value, "dtype": from_numpy(value.dtype)}, device)


def _never_folded(graph: Graph, node: Node) -> bool:
    """Constants and NoOps have nothing to fold; a placeholder's value is the caller's; a
    forwarder's constant would only be copied (identity removal bypasses it instead)."""
    return (
        node.op in ("Const", "NoOp") or graph.is_placeholder(node) or graph.forwards_input(node)
    )


def _evaluate(graph: Graph, node: Node, inputs: list[np.ndarray]) -> list[Any] | None:
    factory = KERNELS.lookup(node.op)
    if factory is None:
        return None
    num_outputs = graph.num_outputs(node)
    try:
        fn = factory(NodeContext(node.name, node.op, node.attrs, num_outputs))
        result = fn(*inputs)
    except Exception:  # noqa: BLE001 - a node that fails now will fail (and be reported) at run time
        return None
    outputs = [result] if num_outputs == 1 else list(result)
    if any(not isinstance(o, np.ndarray) and not np.isscalar(o) for o in outputs):
        return None
    return [np.asarray(o) for o in outputs]


def fold_constants(graph: Graph, context: PassContext) -> Graph:
    load_all_kernels()  # an op without a kernel is never folded: they must all be known here
    values: dict[str, np.ndarray] = {
        n.name: n.attrs["value"] for n in graph if n.op == "Const" and not n.control_inputs
    }
    folded: dict[str, list[np.ndarray]] = {}
    order = topological_order(graph, set(graph.nodes), set())
    for node in order:
        if (
            _never_folded(graph, node)
            or node.control_inputs
            or node.name in context.protected_nodes
            or not node.inputs
            or is_stateful(graph, node)
        ):
            continue
        inputs = []
        for ref in node.inputs:
            if ref.node in values and ref.port == 0:
                inputs.append(values[ref.node])
            elif ref.node in folded:
                inputs.append(folded[ref.node][ref.port])
            else:
                break
        else:
            outputs = _evaluate(graph, node, inputs)
            if outputs is None:
                continue
            in_bytes = sum(v.nbytes for v in inputs)
            if sum(o.nbytes for o in outputs) > in_bytes + _MAX_GROWTH_BYTES:
                continue
            folded[node.name] = outputs
    if not folded:
        return graph
    replace: dict[TensorRef, TensorRef] = {}
    new_consts: list[Node] = []
    for name, outputs in folded.items():
        for port, value in enumerate(outputs):
            const_name = f"{name}/folded" if len(outputs) == 1 else f"{name}/folded_{port}"
            new_consts.append(_const_node(const_name, value, graph.nodes[name].device))
            replace[TensorRef(name, port)] = TensorRef(const_name, 0)
    rewired = rewire(graph.with_nodes([*new_consts, *graph]), replace, folded)
    return rewired
