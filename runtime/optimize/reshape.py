"""A Reshape to a shape computed from its own input's dims becomes one ``_ReshapeByTemplate``.

Keras' ``Flatten`` reshapes ``x`` to ``Pack(StridedSlice(Shape(x), [0], [1]), n)``: three nodes
that only restate ``x.shape[0]``. When the shape tensor evaluates symbolically
(``runtime.optimize.shapes``) to products of the Reshape input's own dims and constants, the
Reshape gets that template as an attr and loses the shape input; the shape nodes are pruned when
nothing else reads them. Runs after ``simplify_tensordot``, which looks for the original form.
"""

from __future__ import annotations

from runtime.graph import Graph, Node
from runtime.optimize import internal_ops  # noqa: F401 - defines _ReshapeByTemplate
from runtime.optimize.context import PassContext
from runtime.optimize.shapes import ShapeEvaluator, canonical

_CONSTANT_SHAPE_OPS = frozenset({"Const"})


def _template(
    graph: Graph, reshape: Node, ev: ShapeEvaluator
) -> tuple[tuple[int, tuple[int, ...]], ...] | None:
    if len(reshape.inputs) != 2:
        return None
    producer = graph.nodes.get(reshape.inputs[1].node)
    if producer is None or producer.op in _CONSTANT_SHAPE_OPS:
        return None  # a constant shape is already baked into the Reshape kernel
    value = ev.value(reshape.inputs[1])
    if value is None:
        return None
    base = canonical(graph, reshape.inputs[0])
    template = []
    for item in value.items:
        if any(ref != base for ref, _ in item.factors):
            return None
        template.append((item.coeff, tuple(axis for _, axis in item.factors)))
    if not any(axes for _, axes in template):
        return None  # the shape is a constant after all: folding's business
    return tuple(template)


def reshape_by_template(graph: Graph, context: PassContext) -> Graph:
    ev = ShapeEvaluator(graph)
    replaced: dict[str, Node] = {}
    for node in graph:
        if node.op != "Reshape":
            continue
        template = _template(graph, node, ev)
        if template is not None:
            replaced[node.name] = Node(
                node.name, "_ReshapeByTemplate", [node.inputs[0]], list(node.control_inputs),
                {"T": node.attrs.get("T"), "template": template}, node.device,
            )
    if not replaced:
        return graph
    return graph.with_nodes(replaced.get(n.name, n) for n in graph)
