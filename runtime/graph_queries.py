"""Questions asked of a graph's structure: what a call needs (pruning), and in what order it runs.

Compilers (``runtime.compiler``) and graph rewrites (``runtime.optimize``) share these; they only
read the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runtime.errors import InvalidArgumentError
from runtime.graph import Graph, Node, TensorRef
from runtime.ops.dataflow_ops import MERGE_OPS, NEXT_ITERATION_OPS


def needed_nodes(
    graph: Graph, fetches: Sequence[TensorRef], targets: Sequence[str], fed: set[TensorRef]
) -> set[str]:
    """Names of the nodes that must run to produce ``fetches`` and run ``targets``."""
    # A fed placeholder has nothing left to run: a control edge on it is already satisfied.
    fed_placeholders = {
        ref.node for ref in fed if ref.port == 0 and graph.is_placeholder(graph.node(ref.node))
    }
    needed: set[str] = set()
    stack = [ref.node for ref in fetches if ref not in fed] + list(targets)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        node = graph.node(name)
        needed.add(name)
        stack.extend(ref.node for ref in node.inputs if ref not in fed)
        stack.extend(c for c in node.control_inputs if c not in fed_placeholders)
    return needed


def reachable_graph(graph: Graph, roots: Iterable[str]) -> Graph:
    """The nodes ``roots`` depend on, through data and control edges, in graph order."""
    keep = needed_nodes(graph, [], [r for r in roots if r in graph], set())
    return graph.with_nodes(n for n in graph if n.name in keep)


def topological_order(graph: Graph, names: set[str], fed: set[TensorRef]) -> list[Node]:
    """Kahn's algorithm over ``names``, stable in graph order; a cycle is an error."""
    deps: dict[str, set[str]] = {}
    users: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        node = graph.nodes[name]
        producers = {ref.node for ref in node.inputs if ref not in fed} | set(node.control_inputs)
        producers &= names
        if node.op in MERGE_OPS:
            # A TF1 loop's back edge (NextIteration -> Merge) orders nothing: the Merge comes first.
            producers = {p for p in producers if graph.nodes[p].op not in NEXT_ITERATION_OPS}
        deps[name] = producers
        for producer in producers:
            users[producer].append(name)
    position = {name: i for i, name in enumerate(graph.nodes)}
    ready = sorted((n for n, d in deps.items() if not d), key=position.__getitem__, reverse=True)
    order: list[Node] = []
    while ready:
        name = ready.pop()
        order.append(graph.nodes[name])
        newly = []
        for user in users[name]:
            deps[user].discard(name)
            if not deps[user]:
                newly.append(user)
        ready.extend(sorted(newly, key=position.__getitem__, reverse=True))
    if len(order) != len(names):
        stuck = sorted(n for n, d in deps.items() if d)[:5]
        raise InvalidArgumentError(
            f"Graph has a cycle through nodes {stuck}; loops need control-flow support"
        )
    return order


__all__ = ["needed_nodes", "reachable_graph", "topological_order"]
