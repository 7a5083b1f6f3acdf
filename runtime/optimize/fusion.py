"""Pattern fusion: chains such as MatMul -> BiasAdd -> Relu become one fused node.

The rules are data: a base op, the chain of single-consumer ops that follows it, and the fused op
(TensorFlow's own ``_FusedMatMul`` / ``_FusedConv2D`` / ``_FusedDepthwiseConv2dNative``, whose
``fused_ops`` attr lists the tail).
A chain is fused only if no intermediate tensor is protected or read elsewhere, and only if the
fused kernel accepts the combination (otherwise the nodes stay as they are).

Two extensions of TensorFlow's own remapping: a ``BatchMatMulV2`` by a constant matrix (a dense
layer over the last axis of a rank > 2 tensor, see ``runtime.optimize.tensordot``) fuses like a
``MatMul`` (this runtime's ``_FusedMatMul`` takes a rank > 2 ``a`` for it), and the exact GELU as
``tf.nn.gelu`` writes it, ``Mul(Mul(0.5, y), Erfc(Mul(Neg(y), sqrt(0.5))))``, counts as the
activation ``GeluExact``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from runtime.graph import Graph, Node, TensorRef
from runtime.kernels import KERNELS, NodeContext, load_all_kernels
from runtime.optimize.context import PassContext


@dataclass(frozen=True)
class FusionRule:
    base: str
    tail: tuple[str, ...]
    fused_op: str


_ACTIVATIONS = ("Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid", "GeluExact")
_BASES = (
    ("MatMul", "_FusedMatMul"),
    ("BatchMatMulV2", "_FusedMatMul"),
    ("Conv2D", "_FusedConv2D"),
    ("DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"),
)

# Longest chains first, so BiasAdd+Relu wins over BiasAdd alone.
RULES: tuple[FusionRule, ...] = tuple(
    [FusionRule(base, ("BiasAdd", act), fused) for base, fused in _BASES for act in _ACTIVATIONS]
    + [FusionRule(base, ("BiasAdd",), fused) for base, fused in _BASES]
)

_SQRT_HALF = math.sqrt(0.5)


def _single_data_consumer(node: Node, readers: dict[str, list[Node]]) -> Node | None:
    users = readers.get(node.name, [])
    if len(users) != 1:
        return None
    user = users[0]
    if user.inputs.count(TensorRef(node.name, 0)) != 1 or any(
        ref.node == node.name and ref.port != 0 for ref in user.inputs
    ):
        return None
    return user


def _scalar_const(graph: Graph, ref: TensorRef) -> float | None:
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "Const" or ref.port != 0 or node.control_inputs:
        return None
    value = node.attrs.get("value")
    if not isinstance(value, np.ndarray) or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(-1)[0])


def _other_input(node: Node, name: str) -> TensorRef | None:
    """The other input of a two-input node that reads ``name:0`` exactly once."""
    here = TensorRef(name, 0)
    if len(node.inputs) != 2 or node.inputs.count(here) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == here else node.inputs[0]


def _match_gelu(
    graph: Graph, y: Node, readers: dict[str, list[Node]], context: PassContext
) -> list[Node] | None:
    """The nodes of ``Mul(Mul(0.5, y), Erfc(Mul(Neg(y), sqrt(0.5))))`` after ``y``, the final
    Mul last, if every intermediate is private to the pattern."""
    users = readers.get(y.name, [])
    if len(users) != 2 or y.name in context.protected_nodes:
        return None
    neg = next((u for u in users if u.op == "Neg"), None)
    half = next((u for u in users if u.op == "Mul"), None)
    if neg is None or half is None or neg.inputs != [TensorRef(y.name, 0)]:
        return None
    half_const = _other_input(half, y.name)
    if half_const is None or _scalar_const(graph, half_const) != 0.5:
        return None
    scaled = _single_data_consumer(neg, readers)
    if scaled is None or scaled.op != "Mul":
        return None
    factor_ref = _other_input(scaled, neg.name)
    factor = _scalar_const(graph, factor_ref) if factor_ref is not None else None
    # The factor is sqrt(0.5) rounded to the model's float type.
    if factor is None or abs(factor - _SQRT_HALF) > 1e-7:
        return None
    erfc = _single_data_consumer(scaled, readers)
    if erfc is None or erfc.op != "Erfc":
        return None
    out = _single_data_consumer(erfc, readers)
    if out is None or out.op != "Mul" or _other_input(out, erfc.name) != TensorRef(half.name, 0):
        return None
    if _single_data_consumer(half, readers) is not out:
        return None
    inner = [neg, half, scaled, erfc]
    if any(n.name in context.protected_nodes for n in inner):
        return None
    return [*inner, out]


def _match(
    rule: FusionRule,
    base: Node,
    readers: dict[str, list[Node]],
    context: PassContext,
    graph: Graph,
) -> list[Node] | None:
    if base.op == "BatchMatMulV2" and not _matrix_by_constant(graph, base):
        return None
    chain = [base]
    for op in rule.tail:
        current = chain[-1]
        if current.name in context.protected_nodes:
            return None
        if op == "GeluExact":
            gelu = _match_gelu(graph, current, readers, context)
            if gelu is None:
                return None
            chain += gelu
            continue
        user = _single_data_consumer(current, readers)
        if user is None or user.op != op or user.inputs[0] != TensorRef(current.name, 0):
            return None
        if op == "BiasAdd" and user.attrs.get("data_format", "NHWC") != "NHWC":
            return None
        chain.append(user)
    return chain


def _matrix_by_constant(graph: Graph, node: Node) -> bool:
    """A BatchMatMulV2 whose second operand is a constant matrix (not adjoint on the left)."""
    if node.attrs.get("adj_x") or len(node.inputs) != 2:
        return False
    producer = graph.nodes.get(node.inputs[1].node)
    if producer is None or producer.op != "Const" or node.inputs[1].port != 0:
        return False
    value = producer.attrs.get("value")
    return isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind != "c"


def _fused_node(rule: FusionRule, chain: list[Node]) -> Node:
    base, last = chain[0], chain[-1]
    bias = chain[1].inputs[1]
    attrs = dict(base.attrs)
    if base.op == "BatchMatMulV2":
        attrs = {"T": base.attrs.get("T"), "transpose_a": False,
                 "transpose_b": bool(base.attrs.get("adj_y"))}
    attrs.update(
        {
            "fused_ops": list(rule.tail),
            "num_args": 1,
            "TArgs": [base.attrs.get("T")],
            "num_host_args": 0,
            "epsilon": 0.0001,
            "leakyrelu_alpha": 0.2,
        }
    )
    if "LeakyRelu" in rule.tail:
        attrs["leakyrelu_alpha"] = float(last.attrs.get("alpha", 0.2))
    controls = list(dict.fromkeys(c for node in chain for c in node.control_inputs))
    return Node(last.name, rule.fused_op, [*base.inputs, bias], controls, attrs, base.device)


def _kernel_accepts(node: Node) -> bool:
    factory = KERNELS.lookup(node.op)
    if factory is None:
        return False
    try:
        factory(NodeContext(node.name, node.op, node.attrs, 1))
    except Exception:  # noqa: BLE001 - an unsupported combination simply stays unfused
        return False
    return True


def fuse_patterns(graph: Graph, context: PassContext) -> Graph:
    load_all_kernels()  # fusion asks the fused kernels whether they accept each combination
    readers: dict[str, list[Node]] = {}
    control_readers: set[str] = set()
    for node in graph:
        for producer in dict.fromkeys(ref.node for ref in node.inputs):
            readers.setdefault(producer, []).append(node)
        control_readers.update(node.control_inputs)

    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for node in graph:
        if node.name in removed or node.name in replaced:
            continue
        for rule in RULES:
            if node.op != rule.base:
                continue
            chain = _match(rule, node, readers, context, graph)
            if chain is None or any(n.name in removed or n.name in replaced for n in chain):
                continue
            if any(n.name in control_readers for n in chain[:-1]):
                continue
            fused = _fused_node(rule, chain)
            if not _kernel_accepts(fused):
                continue
            replaced[fused.name] = fused
            removed.update(n.name for n in chain[:-1])
            break
    if not replaced:
        return graph
    return graph.with_nodes(replaced.get(n.name, n) for n in graph if n.name not in removed)
