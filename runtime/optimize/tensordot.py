"""A matrix product over the last axis, exported as ``tf.tensordot``, becomes one BatchMatMulV2.

Keras' ``Dense`` on a rank-3 input (and ``tf.tensordot(x, W, [[r - 1], [0]])`` generally) is
exported as a dozen nodes that flatten ``x`` to a matrix, multiply, and restore the leading dims::

    x2 = Reshape(Transpose(x, [0, .., r-1]), [d0 * .. * d(r-2), d(r-1)])   # from Shape(x)
    y  = Reshape(MatMul(x2, W), concat([d0, .., d(r-2)], [N]))            # likewise

which is ``BatchMatMulV2(x, W)`` with ``W`` broadcast over the leading dims. The two shape vectors
are evaluated symbolically (``runtime.optimize.shapes``); the rewrite happens only when they are
provably those products of ``x``'s own dims, so it holds for every batch size. The final Reshape
node becomes the BatchMatMulV2 (same name); what fed it is pruned when nothing else reads it.
"""

from __future__ import annotations

import numpy as np

from runtime.graph import Graph, Node, TensorRef
from runtime.optimize.context import PassContext
from runtime.optimize.shapes import ShapeEvaluator, SymInt, canonical, dims, product, static_rank


def _readers(graph: Graph) -> dict[str, int]:
    count: dict[str, int] = {}
    for node in graph:
        for name in dict.fromkeys(ref.node for ref in node.inputs):
            count[name] = count.get(name, 0) + 1
        for name in node.control_inputs:
            count[name] = count.get(name, 0) + 1
    return count


def _producer(graph: Graph, ref: TensorRef, op: str) -> Node | None:
    node = graph.nodes.get(ref.node)
    return node if node is not None and node.op == op and ref.port == 0 else None


def _const(graph: Graph, ref: TensorRef) -> np.ndarray | None:
    node = _producer(graph, ref, "Const")
    value = node.attrs.get("value") if node is not None else None
    return value if isinstance(value, np.ndarray) else None


def _rewrite(
    graph: Graph, reshape: Node, ev: ShapeEvaluator, readers: dict[str, int], context: PassContext
) -> Node | None:
    if len(reshape.inputs) != 2:
        return None
    matmul = _producer(graph, reshape.inputs[0], "MatMul")
    if matmul is None or matmul.attrs.get("transpose_a") or len(matmul.inputs) != 2:
        return None
    weights = _const(graph, matmul.inputs[1])
    flat = _producer(graph, matmul.inputs[0], "Reshape")
    if weights is None or weights.ndim != 2 or weights.dtype.kind == "c" or flat is None:
        return None
    private = [matmul, flat]
    x = flat.inputs[0]
    transpose = _producer(graph, x, "Transpose")
    if transpose is not None:
        perm = _const(graph, transpose.inputs[1])
        if perm is None or perm.ndim != 1 or perm.tolist() != list(range(perm.size)):
            return None
        rank: int | None = int(perm.size)
        x = transpose.inputs[0]
        private.append(transpose)
    else:
        rank = static_rank(graph, x)
    if rank is None or rank < 2:
        return None
    if any(n.name in context.protected_nodes or readers.get(n.name, 0) != 1 for n in private):
        return None
    transpose_b = bool(matmul.attrs.get("transpose_b"))
    n = weights.shape[0] if transpose_b else weights.shape[1]
    base = canonical(graph, x)
    lead = dims(base, range(rank - 1))
    flat_shape = ev.value(flat.inputs[1])
    out_shape = ev.value(reshape.inputs[1])
    if flat_shape is None or out_shape is None or flat_shape.scalar or out_shape.scalar:
        return None
    if flat_shape.items != (product(lead), SymInt.dim(base, rank - 1)):
        return None
    if out_shape.items != lead + (SymInt(int(n)),):
        return None
    controls = list(dict.fromkeys(c for node in [reshape, *private] for c in node.control_inputs))
    attrs = {"T": matmul.attrs.get("T"), "adj_x": False, "adj_y": transpose_b}
    return Node(reshape.name, "BatchMatMulV2", [x, matmul.inputs[1]], controls, attrs,
                matmul.device)


def simplify_tensordot(graph: Graph, context: PassContext) -> Graph:
    ev = ShapeEvaluator(graph)
    readers = _readers(graph)
    replaced: dict[str, Node] = {}
    for node in graph:
        if node.op == "Reshape":
            new = _rewrite(graph, node, ev, readers, context)
            if new is not None:
                replaced[node.name] = new
    if not replaced:
        return graph
    return graph.with_nodes(replaced.get(n.name, n) for n in graph)
