"""Keras' embedding lookup: ``GatherV2(table, SelectV2(ids < 0, ids + n, ids))`` in one node.

Keras lets an embedding's ids count from the end of the table and writes that as three nodes
before the gather (``Less``, ``AddV2`` with the table's row count, ``SelectV2``). When the table
is a constant whose gathered axis has exactly that many rows, the four nodes become one
``_GatherWrapNegative`` (numpy's ``take`` counts negative indices the same way), under the
gather's name. Out-of-range ids remain errors, reported as GatherV2 reports them.
"""

from __future__ import annotations

import numpy as np

from runtime.graph import Graph, Node
from runtime.optimize import internal_ops  # noqa: F401 - defines _GatherWrapNegative
from runtime.optimize.context import PassContext, const_value

_ADDS = frozenset({"Add", "AddV2"})


def _scalar(value: np.ndarray | None) -> int | None:
    if value is None or value.size != 1 or value.dtype.kind not in "iu":
        return None
    return int(value.reshape(-1)[0])


def _rewrite(graph: Graph, gather: Node, readers: dict[str, int],
             context: PassContext) -> Node | None:
    if int(gather.attrs.get("batch_dims", 0)) != 0 or len(gather.inputs) != 3:
        return None
    table, axis = const_value(graph, gather.inputs[0]), _scalar(const_value(graph, gather.inputs[2]))
    select = graph.nodes.get(gather.inputs[1].node)
    if table is None or axis is None or not -table.ndim <= axis < table.ndim:
        return None
    if select is None or select.op != "SelectV2" or gather.inputs[1].port != 0:
        return None
    if len(select.inputs) != 3:
        return None
    cond_ref, wrapped_ref, ids = select.inputs
    less, add = graph.nodes.get(cond_ref.node), graph.nodes.get(wrapped_ref.node)
    if less is None or less.op != "Less" or less.inputs[:1] != [ids] or cond_ref.port != 0:
        return None
    if _scalar(const_value(graph, less.inputs[1])) != 0:
        return None
    if add is None or add.op not in _ADDS or wrapped_ref.port != 0 or ids not in add.inputs:
        return None
    rows = add.inputs[1] if add.inputs[0] == ids else add.inputs[0]
    if _scalar(const_value(graph, rows)) != table.shape[axis]:
        return None
    for node in (select, less, add):
        if node.name in context.protected_nodes or readers.get(node.name, 0) != 1:
            return None
    controls = list(dict.fromkeys(
        c for node in (gather, select, less, add) for c in node.control_inputs
    ))
    return Node(gather.name, "_GatherWrapNegative", [gather.inputs[0], ids, gather.inputs[2]],
                controls, dict(gather.attrs), gather.device)


def fuse_embedding_lookups(graph: Graph, context: PassContext) -> Graph:
    readers: dict[str, int] = {}
    for node in graph:
        for name in {ref.node for ref in node.inputs} | set(node.control_inputs):
            readers[name] = readers.get(name, 0) + 1
    replaced: dict[str, Node] = {}
    for node in graph:
        if node.op == "GatherV2":
            new = _rewrite(graph, node, readers, context)
            if new is not None:
                replaced[node.name] = new
    if not replaced:
        return graph
    return graph.with_nodes(replaced.get(n.name, n) for n in graph)
