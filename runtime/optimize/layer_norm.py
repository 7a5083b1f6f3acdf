"""Layer normalization, exported by Keras as eleven nodes, becomes one ``_FusedLayerNorm``.

Keras' ``LayerNormalization`` over the last axis reaches the graph as::

    mean = Mean(x, [-1], keep_dims)          var = Mean(SquaredDifference(x, mean), [-1], keep_dims)
    inv  = Rsqrt(var + epsilon) * gamma      y   = x * inv + (Neg(mean) * inv + beta)

(``* gamma`` and ``+ beta`` absent without scale or center). The whole pattern, with constant
``gamma``/``beta`` of shape [C] or [1, .., 1, C], becomes ``_FusedLayerNorm(x, gamma, beta)``
under the name of its last node, when no intermediate is protected or read elsewhere. The fused
kernel does the same arithmetic in the same order; only the two means are summed differently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.dtypes import DataType, from_numpy, to_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.optimize import internal_ops  # noqa: F401 - defines _FusedLayerNorm
from runtime.optimize.context import PassContext, readers_of, unique_name
from runtime.optimize.shapes import static_rank

_FLOATS = frozenset({DataType.DT_FLOAT, DataType.DT_DOUBLE})
_ADDS = frozenset({"Add", "AddV2"})


@dataclass
class _Graph:
    """The graph with its readers indexed."""

    graph: Graph
    context: PassContext
    readers: dict[str, list[Node]]
    control_readers: set[str]

    def node(self, ref: TensorRef, op: str | frozenset[str]) -> Node | None:
        node = self.graph.nodes.get(ref.node)
        ops = {op} if isinstance(op, str) else op
        if node is None or node.op not in ops or ref.port != 0:
            return None
        return node

    def const(self, ref: TensorRef) -> np.ndarray | None:
        node = self.node(ref, "Const")
        value = node.attrs.get("value") if node is not None else None
        return value if isinstance(value, np.ndarray) else None

    def private(self, node: Node, readers: int = 1) -> bool:
        """Whether ``node``'s output is read by exactly ``readers`` nodes and nothing else."""
        return (
            node.name not in self.context.protected_nodes
            and node.name not in self.control_readers
            and len(self.readers.get(node.name, [])) == readers
        )


def _other(node: Node, ref: TensorRef) -> TensorRef | None:
    """The other input of a two-input node, if ``ref`` is exactly one of its inputs."""
    if len(node.inputs) != 2 or node.inputs.count(ref) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == ref else node.inputs[0]


def _last_axis(g: _Graph, mean: Node, x: TensorRef) -> bool:
    if not mean.attrs.get("keep_dims") or len(mean.inputs) != 2:
        return False
    axes = g.const(mean.inputs[1])
    if axes is None or axes.size != 1 or axes.dtype.kind not in "iu":
        return False
    axis = int(axes.reshape(-1)[0])
    return axis == -1 or (axis >= 0 and axis == (static_rank(g.graph, x) or 0) - 1)


def _vector(value: np.ndarray | None, dtype: np.dtype, rank: int | None) -> bool:
    """A constant of shape [C] or [1, .., 1, C] of the right dtype, adding no dims to x's."""
    if value is None or value.dtype != dtype or value.ndim < 1:
        return False
    if any(d != 1 for d in value.shape[:-1]):
        return False
    return value.ndim == 1 or (rank is not None and value.ndim <= rank)


_Operand = TensorRef | np.ndarray


def _match(
    g: _Graph, out: Node
) -> tuple[list[Node], tuple[TensorRef, _Operand, _Operand], float] | None:
    """(the pattern's nodes, (x, gamma, beta) as refs or new values, epsilon) for ``out``."""
    dtype_attr = out.attrs.get("T")
    if out.op not in _ADDS or dtype_attr not in _FLOATS or len(out.inputs) != 2:
        return None
    dtype = to_numpy(dtype_attr)
    for scaled_ref, shift_ref in (out.inputs, out.inputs[::-1]):
        scaled = g.node(scaled_ref, "Mul")  # x * inv
        shift = g.graph.nodes.get(shift_ref.node)
        if scaled is None or shift is None or shift_ref.port != 0:
            continue
        beta_ref: TensorRef | None = None
        centered = shift  # Neg(mean) * inv, before "+ beta"
        if shift.op in _ADDS and len(shift.inputs) == 2:
            for a, b in (shift.inputs, shift.inputs[::-1]):
                if g.const(b) is not None and g.node(a, "Mul") is not None:
                    beta_ref, centered = b, g.graph.nodes[a.node]
                    break
        if centered.op != "Mul" or len(centered.inputs) != 2:
            continue
        negs = [(r, g.node(r, "Neg")) for r in centered.inputs]
        found = [(r, n) for r, n in negs if n is not None]
        if len(found) != 1:
            continue
        neg_ref, neg = found[0]
        assert neg is not None
        inv_ref = _other(centered, neg_ref)
        if inv_ref is None:
            continue
        x = _other(scaled, inv_ref)
        mean = g.node(neg.inputs[0], "Mean") if len(neg.inputs) == 1 else None
        if x is None or mean is None or mean.inputs[0] != x or not _last_axis(g, mean, x):
            continue
        result = _match_variance(g, mean, x, inv_ref, dtype)
        if result is None:
            continue
        chain, gamma_ref, epsilon = result
        rank = static_rank(g.graph, x)
        gamma = g.const(gamma_ref) if gamma_ref is not None else np.ones(1, dtype)
        beta = g.const(beta_ref) if beta_ref is not None else np.zeros(1, dtype)
        if gamma is None or beta is None:
            continue
        if not (_vector(gamma, dtype, rank) and _vector(beta, dtype, rank)):
            continue
        nodes = [*chain, neg, centered, scaled, out] + ([shift] if shift is not centered else [])
        checks = [(neg, 1), (centered, 1), (scaled, 1)] + (
            [(shift, 1)] if shift is not centered else []
        )
        if not all(g.private(n, k) for n, k in checks):
            continue
        return (
            nodes,
            (x, gamma_ref if gamma_ref is not None else gamma,
             beta_ref if beta_ref is not None else beta),
            epsilon,
        )
    return None


def _match_variance(
    g: _Graph, mean: Node, x: TensorRef, inv_ref: TensorRef, dtype: np.dtype
) -> tuple[list[Node], TensorRef | None, float] | None:
    """Check ``inv = Rsqrt(Mean(SquaredDifference(x, mean)) + eps) [* gamma]``."""
    gamma_ref: TensorRef | None = None
    inv = g.graph.nodes.get(inv_ref.node)
    if inv is None or inv_ref.port != 0:
        return None
    rsqrt = inv
    if inv.op == "Mul":
        for a, b in (inv.inputs, inv.inputs[::-1]):
            if g.const(b) is not None and g.node(a, "Rsqrt") is not None:
                gamma_ref, rsqrt = b, g.graph.nodes[a.node]
                break
    if rsqrt.op != "Rsqrt" or len(rsqrt.inputs) != 1:
        return None
    add = g.node(rsqrt.inputs[0], _ADDS)
    if add is None or len(add.inputs) != 2:
        return None
    var = epsilon = None
    for a, b in (add.inputs, add.inputs[::-1]):
        value = g.const(b)
        if value is not None and value.ndim == 0 and value.dtype == dtype:
            var, epsilon = g.node(a, "Mean"), float(value)
            break
    if var is None or epsilon is None or not _last_axis(g, var, x):
        return None
    var_axes, mean_axes = g.const(var.inputs[1]), g.const(mean.inputs[1])
    if var_axes is None or mean_axes is None or var_axes.tolist() != mean_axes.tolist():
        return None
    squared = g.node(var.inputs[0], "SquaredDifference")
    if squared is None or sorted(squared.inputs) != sorted([x, TensorRef(mean.name)]):
        return None
    chain = [mean, squared, var, add, rsqrt] + ([inv] if inv is not rsqrt else [])
    checks = [(mean, 2), (squared, 1), (var, 1), (add, 1)]
    checks += [(rsqrt, 1), (inv, 2)] if inv is not rsqrt else [(rsqrt, 2)]
    if not all(g.private(n, k) for n, k in checks):
        return None
    return chain, gamma_ref, epsilon


def fuse_layer_norm(graph: Graph, context: PassContext) -> Graph:
    readers, control_readers = readers_of(graph)
    g = _Graph(graph, context, readers, control_readers)

    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    new_consts: list[Node] = []
    taken = set(graph.nodes)
    for out in graph:
        if out.name in removed:
            continue
        found = _match(g, out)
        if found is None:
            continue
        nodes, (x, gamma, beta), epsilon = found
        if any(n.name in removed or n.name in replaced for n in nodes):
            continue
        inputs: list[TensorRef] = [x]
        for role, value in (("scale", gamma), ("offset", beta)):
            if isinstance(value, TensorRef):
                inputs.append(value)
                continue
            value.flags.writeable = False
            const = Node(unique_name(f"{out.name}/{role}", taken), "Const",
                         attrs={"value": value, "dtype": from_numpy(value.dtype)},
                         device=out.device)
            new_consts.append(const)
            inputs.append(TensorRef(const.name))
        controls = list(dict.fromkeys(c for n in nodes for c in n.control_inputs))
        replaced[out.name] = Node(
            out.name, "_FusedLayerNorm", inputs, controls,
            {"T": out.attrs["T"], "epsilon": epsilon}, out.device,
        )
        removed.update(n.name for n in nodes if n is not out)
    if not replaced:
        return graph
    kept = (replaced.get(n.name, n) for n in graph if n.name not in removed)
    return graph.with_nodes([*new_consts, *kept])
