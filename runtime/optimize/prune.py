"""Drop every node the protected tensors do not need."""

from __future__ import annotations

from runtime.graph import Graph
from runtime.graph_queries import needed_nodes
from runtime.optimize.context import PassContext


def prune_to_protected(graph: Graph, context: PassContext) -> Graph:
    keep = needed_nodes(graph, sorted(context.protected), [], set())
    keep |= context.protected_nodes
    return graph.with_nodes(n for n in graph if n.name in keep)
