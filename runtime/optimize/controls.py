"""Control edges that order nothing are dropped.

A control edge makes a node wait for another one; it only matters when something with an effect
(a variable write, a check that can fail) is ordered through it. Once variables are frozen, many
edges wait on constants: inlined function calls leave ``IdentityN`` and ``NoOp`` nodes whose
control inputs are the former variable reads. An edge is dropped when it waits on

* a node whose whole upstream cone is constants, ``NoOp``s and identities, or
* a ``NoOp`` (or identity) that, through other ``NoOp``s and identities, only waits on nodes the
  waiting node reads data from anyway,

which lets identity removal and pruning finish the job.
"""

from __future__ import annotations

from runtime.graph import Graph, Node
from runtime.optimize.context import PassContext


def _trivial_nodes(graph: Graph) -> set[str]:
    """Nodes that compute nothing observable: constants, NoOps and identities whose data and
    control inputs are all such nodes."""
    trivial = {node.name for node in graph if _may_be_trivial(graph, node)}
    users: dict[str, list[str]] = {}
    pending: list[str] = []
    for node in graph:
        if node.name not in trivial:
            continue
        for pred in [ref.node for ref in node.inputs] + list(node.control_inputs):
            users.setdefault(pred, []).append(node.name)
            if pred not in trivial:
                pending.append(node.name)
    # Anything downstream (among the candidates) of a non-trivial node is not trivial either.
    while pending:
        name = pending.pop()
        if name in trivial:
            trivial.discard(name)
            pending.extend(users.get(name, ()))
    return trivial


def _may_be_trivial(graph: Graph, node: Node) -> bool:
    if node.op == "Const":
        return not node.inputs
    return node.op == "NoOp" or graph.is_identity(node)


def _redundant(name: str, graph: Graph, trivial: set[str], producers: set[str]) -> bool:
    """Whether waiting on ``name`` only waits on trivial nodes or on ``producers``."""
    stack, seen = [name], set()
    while stack:
        current = stack.pop()
        if current in seen or current in trivial or current in producers:
            continue
        seen.add(current)
        node = graph.nodes.get(current)
        if node is None or not (node.op == "NoOp" or graph.is_identity(node)):
            return False
        stack.extend(ref.node for ref in node.inputs)
        stack.extend(node.control_inputs)
    return True


def drop_constant_controls(graph: Graph, context: PassContext) -> Graph:
    trivial = _trivial_nodes(graph)
    nodes: list[Node] = []
    changed = False
    for node in graph:
        if node.control_inputs:
            producers = {ref.node for ref in node.inputs}
            controls = [
                c for c in node.control_inputs
                if not _redundant(c, graph, trivial, producers)
            ]
            if controls != node.control_inputs:
                node = node.copy(control_inputs=controls)
                changed = True
        nodes.append(node)
    return graph.with_nodes(nodes) if changed else graph
