"""``tf.repeat`` by a constant count becomes one ``_RepeatAxes`` node.

``tf.repeat(x, k, axis=a)`` with a scalar ``k`` (what Keras' ``UpSampling2D(interpolation=
"nearest")`` runs once per spatial axis) exports as

    Reshape(Tile(ExpandDims(x, a + 1), [1, .., k, .., 1]), concat(shape[:a], [k * shape[a]],
            shape[a + 1:]))

with the target shape computed from ``Shape(x)`` at run time. When the multiples are constant
with only entry ``a + 1`` above one, and the target evaluates symbolically
(``runtime.optimize.shapes``) to exactly ``x``'s dims with dim ``a`` times ``k``, the Reshape is
``np.repeat(x, k, axis=a)``: it becomes a ``_RepeatAxes`` node reading ``x`` with one repeat
count per axis. A ``_RepeatAxes`` whose input is another one that nothing else reads absorbs it
(repeating axis 1 then axis 2 is one node; counts on one axis multiply). The kernel writes the
result in two or three wide copies instead of a Tile whose inner loop is a few channels long.
"""

from __future__ import annotations

import numpy as np

from runtime.graph import Graph, Node, TensorRef
from runtime.optimize import internal_ops  # noqa: F401 - defines _RepeatAxes
from runtime.optimize.context import PassContext, const_value, is_stateful, readers_of
from runtime.optimize.shapes import ShapeEvaluator, SymInt, canonical


def _int_const(graph: Graph, ref: TensorRef) -> np.ndarray | None:
    value = const_value(graph, ref)
    return value if value is not None and value.dtype.kind in "iu" else None


def _only_reader(name: str, readers: dict[str, list[Node]], control_readers: set[str],
                 context: PassContext) -> Node | None:
    if name in context.protected_nodes or name in control_readers:
        return None
    users = readers.get(name, [])
    return users[0] if len(users) == 1 else None


def _repeat_of(graph: Graph, reshape: Node, ev: ShapeEvaluator, readers: dict[str, list[Node]],
               control_readers: set[str],
               context: PassContext) -> tuple[TensorRef, tuple[int, ...], list[str]] | None:
    """(x, repeat count per axis, control inputs) if ``reshape`` computes ``tf.repeat(x, ..)``."""
    if len(reshape.inputs) != 2 or reshape.inputs[0].port != 0:
        return None
    tile = graph.nodes.get(reshape.inputs[0].node)
    if tile is None or tile.op != "Tile" or len(tile.inputs) != 2 or tile.inputs[0].port != 0:
        return None
    if _only_reader(tile.name, readers, control_readers, context) is not reshape:
        return None
    expand = graph.nodes.get(tile.inputs[0].node)
    if expand is None or expand.op != "ExpandDims" or len(expand.inputs) != 2:
        return None
    multiples = _int_const(graph, tile.inputs[1])
    dim = _int_const(graph, expand.inputs[1])
    shape = ev.value(reshape.inputs[1])
    if multiples is None or dim is None or shape is None or shape.scalar:
        return None
    rank = len(shape.items)
    if multiples.shape != (rank + 1,) or dim.size != 1:
        return None
    d = int(dim.reshape(-1)[0])
    d = d + rank + 1 if d < 0 else d
    counts = multiples.tolist()
    if not 1 <= d <= rank or any(m != 1 for i, m in enumerate(counts) if i != d):
        return None
    k, axis = int(counts[d]), d - 1
    if k < 1:
        return None
    x = canonical(graph, expand.inputs[0])
    want = [SymInt.dim(x, i) for i in range(rank)]
    want[axis] = SymInt(k, ((x, axis),))
    if list(shape.items) != want:
        return None
    repeats = tuple(k if i == axis else 1 for i in range(rank))
    controls = list(dict.fromkeys([*expand.control_inputs, *tile.control_inputs,
                                   *reshape.control_inputs]))
    return expand.inputs[0], repeats, controls


def _live(graph: Graph, context: PassContext) -> set[str]:
    """Nodes that a protected tensor or a stateful node depends on (what any plan may run)."""
    stack = [n.name for n in graph if n.name in context.protected_nodes or is_stateful(graph, n)]
    live: set[str] = set()
    while stack:
        name = stack.pop()
        if name in live or name not in graph.nodes:
            continue
        live.add(name)
        node = graph.nodes[name]
        stack.extend(ref.node for ref in node.inputs)
        stack.extend(node.control_inputs)
    return live


def fuse_repeats(graph: Graph, context: PassContext) -> Graph:
    readers, control_readers = readers_of(graph)
    ev = ShapeEvaluator(graph)
    replaced: dict[str, Node] = {}
    for node in graph:
        if node.op != "Reshape":
            continue
        found = _repeat_of(graph, node, ev, readers, control_readers, context)
        if found is not None:
            source, repeats, controls = found
            replaced[node.name] = Node(
                node.name, "_RepeatAxes", [source], controls,
                {"T": node.attrs.get("T"), "repeats": repeats}, node.device,
            )
    if not replaced:
        return graph
    graph = graph.with_nodes(replaced.get(n.name, n) for n in graph)
    # A repeat of a repeat that nothing else needs: one node. The inner one is left to pruning
    # (the shape computations of the old pattern still read it, but nothing needs those now).
    readers, control_readers = readers_of(graph)
    live = _live(graph, context)
    merged: dict[str, Node] = {}
    for name in replaced:
        outer = graph.nodes[name]
        source = outer.inputs[0]
        inner = merged.get(source.node, graph.nodes.get(source.node))
        if inner is None or inner.op != "_RepeatAxes" or source.port != 0:
            continue
        if source.node in context.protected_nodes or source.node in control_readers:
            continue
        if any(u.name != name and u.name in live for u in readers.get(source.node, [])):
            continue
        repeats = tuple(a * b for a, b in zip(inner.attrs["repeats"], outer.attrs["repeats"]))
        controls = list(dict.fromkeys([*inner.control_inputs, *outer.control_inputs]))
        merged[name] = outer.copy(inputs=[inner.inputs[0]], control_inputs=controls,
                                  attrs={**outer.attrs, "repeats": repeats})
    if not merged:
        return graph
    return graph.with_nodes(merged.get(n.name, n) for n in graph)
