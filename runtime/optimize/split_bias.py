"""A bias added after a Reshape that splits a matmul's last axis moves before the Reshape.

Keras' ``EinsumDense`` (the query, key and value projections of ``MultiHeadAttention``) exports
as ``AddV2(Reshape(BatchMatMulV2(x, W), [-1, T, heads, size]), b)`` with ``b`` of shape
``[heads, size]``. When the Reshape's trailing dims are exactly the bias's dims and multiply to
``W``'s column count ``N``, every group of ``N`` consecutive elements keeps its layout, so
``Reshape(y, s) + b == Reshape(y + b.reshape(N), s)`` whatever the leading dims turn out to be.
Written that way the bias is a ``BiasAdd`` that fusion merges into the product. The Reshape
takes the AddV2's name (its output is the same tensor); the bias add gets a new one.
"""

from __future__ import annotations

import math

import numpy as np

from runtime.dtypes import from_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.optimize.context import PassContext, const_value, unique_name

_PRODUCTS = frozenset({"MatMul", "BatchMatMulV2"})
_ADDS = frozenset({"Add", "AddV2"})


def _columns(graph: Graph, product: Node) -> int | None:
    """The column count of a matmul by a constant matrix, if that is what ``product`` is."""
    if product.op not in _PRODUCTS or len(product.inputs) != 2:
        return None
    weights = const_value(graph, product.inputs[1])
    if weights is None or weights.ndim != 2:
        return None
    transposed = product.attrs.get("transpose_b") or product.attrs.get("adj_y")
    return int(weights.shape[0] if transposed else weights.shape[1])


def _rewrite(graph: Graph, add: Node, readers: dict[str, int], context: PassContext,
             taken: set[str]) -> tuple[list[Node], str] | None:
    """The nodes that replace ``add``, and the name of the Reshape they make unnecessary."""
    if len(add.inputs) != 2:
        return None
    for reshape_ref, bias_ref in (add.inputs, add.inputs[::-1]):
        reshape = graph.nodes.get(reshape_ref.node)
        bias = const_value(graph, bias_ref)
        if reshape is None or reshape.op != "Reshape" or bias is None or reshape_ref.port != 0:
            continue
        if reshape.name in context.protected_nodes or readers.get(reshape.name, 0) != 1:
            continue
        product = graph.nodes.get(reshape.inputs[0].node)
        target = const_value(graph, reshape.inputs[1])
        columns = _columns(graph, product) if product is not None else None
        if columns is None or target is None or target.ndim != 1 or reshape.inputs[0].port:
            continue
        dims = list(bias.shape)
        while dims and dims[0] == 1 and len(dims) > 1:
            dims.pop(0)
        if bias.ndim > target.size or not dims or target.tolist()[-len(dims):] != dims:
            continue
        if math.prod(dims) != columns or bias.dtype.kind != "f":
            continue
        vector = np.ascontiguousarray(bias.reshape(columns))
        vector.flags.writeable = False
        const_name = unique_name(f"{add.name}/bias_vector", taken)
        biased_name = unique_name(f"{add.name}/biased", taken)
        controls = list(dict.fromkeys([*reshape.control_inputs, *add.control_inputs]))
        nodes = [
            Node(const_name, "Const", [], [],
                 {"value": vector, "dtype": from_numpy(vector.dtype)}, add.device),
            Node(biased_name, "BiasAdd", [reshape.inputs[0], TensorRef(const_name)], [],
                 {"T": add.attrs.get("T"), "data_format": "NHWC"}, add.device),
            reshape.copy(name=add.name, inputs=[TensorRef(biased_name), reshape.inputs[1]],
                         control_inputs=controls),
        ]
        return nodes, reshape.name
    return None


def move_bias_before_split(graph: Graph, context: PassContext) -> Graph:
    readers: dict[str, int] = {}
    for node in graph:
        for name in {ref.node for ref in node.inputs} | set(node.control_inputs):
            readers[name] = readers.get(name, 0) + 1
    taken = set(graph.nodes)
    replaced: dict[str, list[Node]] = {}
    removed: set[str] = set()  # the old Reshapes: their one reader was the AddV2
    for node in graph:
        if node.op in _ADDS:
            found = _rewrite(graph, node, readers, context, taken)
            if found is not None:
                replaced[node.name], old_reshape = found
                removed.add(old_reshape)
    if not replaced:
        return graph
    out: list[Node] = []
    for node in graph:
        if node.name not in removed:
            out.extend(replaced.get(node.name, [node]))
    return graph.with_nodes(out)
