"""Common subexpression elimination: identical stateless nodes over identical inputs merge."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from runtime.attrs import FuncAttr
from runtime.graph import Graph, TensorRef
from runtime.graph_queries import topological_order
from runtime.optimize.context import PassContext, is_stateful, rewire

_MAX_CONST_BYTES = 1 << 16  # larger constants are compared by identity only


def _attr_key(value: Any) -> Hashable:
    if isinstance(value, FuncAttr):  # If/While/Case bodies: the same library function
        return ("func", value.name, _attr_key(dict(value.attrs)))
    if isinstance(value, np.ndarray):
        if value.nbytes > _MAX_CONST_BYTES or value.dtype == object:
            return ("ndarray-id", id(value))
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _attr_key(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))
    key: Hashable = value
    return key


def eliminate_common_subexpressions(graph: Graph, context: PassContext) -> Graph:
    survivors: dict[Hashable, str] = {}
    replace: dict[TensorRef, TensorRef] = {}
    drop: list[str] = []
    for node in topological_order(graph, set(graph.nodes), set()):
        if is_stateful(graph, node) or graph.is_placeholder(node):
            continue
        inputs = tuple(replace.get(ref, ref) for ref in node.inputs)
        key = (
            node.op,
            inputs,
            tuple(sorted(node.control_inputs)),
            tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items())),
        )
        survivor = survivors.get(key)
        if survivor is None:
            survivors[key] = node.name
        elif node.name not in context.protected_nodes:
            for port in range(graph.num_outputs(node)):
                replace[TensorRef(node.name, port)] = TensorRef(survivor, port)
            drop.append(node.name)
    if not drop:
        return graph
    return rewire(graph, replace, drop)
