"""Identity-like nodes (``OpDef.is_identity``) are bypassed: consumers read the identity's input
directly."""

from __future__ import annotations

from runtime.graph import Graph, TensorRef
from runtime.ops.dataflow_ops import SWITCH_OPS
from runtime.optimize.context import PassContext, rewire


def remove_identities(graph: Graph, context: PassContext) -> Graph:
    replace: dict[TensorRef, TensorRef] = {}
    drop: list[str] = []
    for node in graph:
        if (
            graph.is_identity(node)
            and node.name not in context.protected_nodes
            and not node.control_inputs
            and not any(_is_switch(graph, ref) for ref in node.inputs)
        ):
            for port, source in enumerate(node.inputs):
                replace[TensorRef(node.name, port)] = source
            drop.append(node.name)
    if not drop:
        return graph
    return rewire(graph, replace, drop)


def _is_switch(graph: Graph, ref: TensorRef) -> bool:
    # An identity of a Switch output is a TF1 branch pivot: as a control input it carries its
    # branch's deadness, which a control edge on the Switch itself (live either way) would not.
    producer = graph.nodes.get(ref.node)
    return producer is not None and producer.op in SWITCH_OPS
