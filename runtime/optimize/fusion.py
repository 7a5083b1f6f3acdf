"""Pattern fusion: chains such as MatMul -> BiasAdd -> Relu become one fused node.

The rules are data: a base op, the chain of single-consumer ops that follows it, and the fused op
(TensorFlow's own ``_FusedMatMul`` / ``_FusedConv2D`` / ``_FusedDepthwiseConv2dNative``, whose
``fused_ops`` attr lists the tail).
A chain is fused only if no intermediate tensor is protected or read elsewhere, and only if the
fused kernel accepts the combination (otherwise the nodes stay as they are).

Extensions of TensorFlow's own remapping:

- a ``BatchMatMulV2`` by a constant matrix (a dense layer over the last axis of a rank > 2
  tensor, see ``runtime.optimize.tensordot``) fuses like a ``MatMul`` (this runtime's
  ``_FusedMatMul`` takes a rank > 2 ``a`` for it);
- the exact GELU as ``tf.nn.gelu`` writes it, ``Mul(Mul(0.5, y), Erfc(Mul(Neg(y), sqrt(0.5))))``,
  counts as the activation ``GeluExact``;
- Swish (SiLU), ``Mul(y, Sigmoid(y))`` or as ``tf.nn.silu`` writes it
  ``Mul(y, Sigmoid(Mul(1.0, y)))``, counts as the activation ``Swish``
  (EfficientNet's after every convolution: fused, it is applied to each block of the output
  while the block is in cache, on the threads that compute the block);
- a per-channel ``Mul`` and/or ``Add`` by constants after the activation (Keras'
  BatchNormalization placed after an activation, which no weight can absorb) joins the fused
  node as the steps ``Mul`` and ``AddV2``, each with one ``[C]`` argument;
- ``Conv2DBackpropInput`` (a transposed convolution) with its BiasAdd and activation becomes this
  runtime's ``_FusedConv2DBackpropInput``;
- a residual ``Add`` after a convolution's bias fuses whatever the other tensor's shape (the
  kernel adds it block by block when it has the output's shape, and broadcasts it otherwise).

After these rules, ``runtime.optimize.separable`` joins a depthwise convolution to the 1x1
convolution that reads it (``_FusedSeparableConv2D``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from runtime.dtypes import from_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.kernels import KERNELS, NodeContext, load_all_kernels
from runtime.optimize.context import PassContext, const_value, readers_of, unique_name


@dataclass(frozen=True)
class FusionRule:
    base: str
    tail: tuple[str, ...]
    fused_op: str


_ACTIVATIONS = ("Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid", "GeluExact", "Swish")
_BASES = (
    ("MatMul", "_FusedMatMul"),
    ("BatchMatMulV2", "_FusedMatMul"),
    ("Conv2D", "_FusedConv2D"),
    ("DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"),
    ("Conv2DBackpropInput", "_FusedConv2DBackpropInput"),
)
_ADDS = frozenset({"Add", "AddV2"})
# Per-channel steps after the activation, as the fused kernels name them.
_POST_TAILS = (("Mul", "AddV2"), ("Mul",), ("AddV2",))
# The graph ops each post-activation step matches (a Sub of a constant is an AddV2 of its
# negation).
_POST_OPS = {"Mul": frozenset({"Mul"}), "AddV2": frozenset({"Add", "AddV2", "Sub"})}
# The least rank of each base op's output: a per-channel operand of higher rank would broadcast
# the result to a larger shape, which the fused node cannot.
_MIN_RANK = {"MatMul": 2, "BatchMatMulV2": 2, "Conv2D": 4, "DepthwiseConv2dNative": 4,
             "Conv2DBackpropInput": 4}

# Longest chains first, so BiasAdd+Relu wins over BiasAdd alone. A convolution also takes a
# residual connection's Add of another tensor after its bias, as TensorFlow's does.
RULES: tuple[FusionRule, ...] = tuple(
    [FusionRule("Conv2D", ("BiasAdd", "Add", act), "_FusedConv2D") for act in _ACTIVATIONS]
    + [FusionRule("Conv2D", ("BiasAdd", "Add"), "_FusedConv2D")]
    + [FusionRule(base, ("BiasAdd", act, *post), fused)
     for post in _POST_TAILS for base, fused in _BASES for act in _ACTIVATIONS]
    + [FusionRule(base, ("BiasAdd", act), fused) for base, fused in _BASES for act in _ACTIVATIONS]
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
    value = const_value(graph, ref)
    if value is None or value.size != 1 or value.dtype.kind != "f":
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


def _match_swish(
    graph: Graph, y: Node, readers: dict[str, list[Node]], context: PassContext
) -> list[Node] | None:
    """The nodes of ``Mul(y, Sigmoid(y))`` (either operand order) after ``y``, the Mul last, if
    the Sigmoid is private to the pattern. ``tf.nn.silu`` writes the Sigmoid's input as
    ``Mul(beta, y)`` with ``beta`` 1: that Mul joins the pattern too."""
    users = readers.get(y.name, [])
    if len(users) != 2 or y.name in context.protected_nodes:
        return None

    def sigmoid_of(user: Node) -> Node | None:
        other = _other_input(user, y.name) if user.op == "Mul" else None
        node = graph.nodes.get(other.node) if other is not None else None
        return node if node is not None and node.op == "Sigmoid" else None

    out = next((u for u in users if sigmoid_of(u) is not None), None)
    first = next((u for u in users if u is not out), None)
    if out is None or first is None:
        return None
    inner: list[Node] = []
    if first.op == "Mul":  # beta * y
        beta = _other_input(first, y.name)
        if beta is None or _scalar_const(graph, beta) != 1.0:
            return None
        inner.append(first)
        first = _single_data_consumer(first, readers)
        if first is None:
            return None
    sigmoid = first
    source = inner[0].name if inner else y.name
    if sigmoid.op != "Sigmoid" or sigmoid.inputs != [TensorRef(source, 0)]:
        return None
    inner.append(sigmoid)
    if _other_input(out, y.name) != TensorRef(sigmoid.name, 0):
        return None
    if _single_data_consumer(sigmoid, readers) is not out:
        return None
    if any(n.name in context.protected_nodes for n in inner):
        return None
    if any(n.attrs.get("T") != y.attrs.get("T") for n in [*inner, out]):
        return None
    return [*inner, out]


# Activations that are several graph ops: a matcher of the ops after the biased value.
_PATTERNS = {"GeluExact": _match_gelu, "Swish": _match_swish}


@dataclass
class _Match:
    chain: list[Node]
    # The fused node's args after the bias: constant refs to use as they are, or values for new
    # constants (a per-channel operand reshaped to [C], or a Sub's negated constant).
    post_args: list[TensorRef | np.ndarray]
    activation: Node | None = None


def _match(
    rule: FusionRule,
    base: Node,
    readers: dict[str, list[Node]],
    context: PassContext,
    graph: Graph,
) -> _Match | None:
    if base.op == "BatchMatMulV2" and not _matrix_by_constant(graph, base):
        return None
    found = _Match([base], [])
    chain = found.chain
    for op in rule.tail:
        current = chain[-1]
        if current.name in context.protected_nodes:
            return None
        if op in _PATTERNS:
            pattern = _PATTERNS[op](graph, current, readers, context)
            if pattern is None:
                return None
            chain += pattern
            found.activation = pattern[-1]
            continue
        user = _single_data_consumer(current, readers)
        if user is None:
            return None
        if op == "Add":  # a residual connection: another tensor, added as it is
            other = _other_input(user, current.name)
            if (user.op not in _ADDS or other is None or user.attrs.get("T") != base.attrs.get("T")
                    or const_value(graph, other) is not None):
                return None
            found.post_args.append(other)
            chain.append(user)
            continue
        if op in _POST_OPS:
            arg = _post_arg(graph, op, user, current.name, base, chain[1])
            if arg is None:
                return None
            found.post_args.append(arg)
            chain.append(user)
            continue
        if user.op != op or user.inputs[0] != TensorRef(current.name, 0):
            return None
        if op == "BiasAdd" and user.attrs.get("data_format", "NHWC") != "NHWC":
            return None
        if op in _ACTIVATIONS:
            found.activation = user
        chain.append(user)
    return found


def _post_arg(graph: Graph, step: str, user: Node, prev: str, base: Node,
              bias_add: Node) -> TensorRef | np.ndarray | None:
    """The ``[C]`` operand of a per-channel step after the activation, if ``user`` is one: a
    constant that broadcasts along the channels (last axis) only, of the model's float type."""
    if user.op not in _POST_OPS[step] or user.attrs.get("T") != base.attrs.get("T"):
        return None
    other = _other_input(user, prev)
    if other is None or (user.op == "Sub" and user.inputs[0] != TensorRef(prev, 0)):
        return None
    value = const_value(graph, other)
    bias = const_value(graph, bias_add.inputs[1])
    # The channel count comes from the bias, which BiasAdd requires to be exactly [C].
    if value is None or bias is None or bias.ndim != 1 or value.dtype != bias.dtype:
        return None
    if value.dtype.kind != "f" and value.dtype.name != "bfloat16":
        return None
    channels = bias.shape[0]
    if value.ndim > _MIN_RANK[base.op] or any(d != 1 for d in value.shape[:-1]):
        return None
    if value.ndim and value.shape[-1] not in (1, channels):
        return None
    if user.op != "Sub" and value.shape == (channels,):
        return other
    vector = np.broadcast_to(value.reshape(-1), (channels,))
    return np.negative(vector) if user.op == "Sub" else np.ascontiguousarray(vector)


def _matrix_by_constant(graph: Graph, node: Node) -> bool:
    """A BatchMatMulV2 whose second operand is a constant matrix (not adjoint on the left)."""
    if node.attrs.get("adj_x") or len(node.inputs) != 2:
        return False
    producer = graph.nodes.get(node.inputs[1].node)
    if producer is None or producer.op != "Const" or node.inputs[1].port != 0:
        return False
    value = producer.attrs.get("value")
    return isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind != "c"


def _fused_node(rule: FusionRule, found: _Match, post_refs: list[TensorRef]) -> Node:
    chain = found.chain
    base, last = chain[0], chain[-1]
    bias = chain[1].inputs[1]
    attrs = dict(base.attrs)
    if base.op == "BatchMatMulV2":
        attrs = {"T": base.attrs.get("T"), "transpose_a": False,
                 "transpose_b": bool(base.attrs.get("adj_y"))}
    num_args = 1 + len(post_refs)
    attrs.update(
        {
            "fused_ops": list(rule.tail),
            "num_args": num_args,
            "TArgs": [base.attrs.get("T")] * num_args,
            "num_host_args": 0,
            "epsilon": 0.0001,
            "leakyrelu_alpha": 0.2,
        }
    )
    if found.activation is not None and found.activation.op == "LeakyRelu":
        attrs["leakyrelu_alpha"] = float(found.activation.attrs.get("alpha", 0.2))
    controls = list(dict.fromkeys(c for node in chain for c in node.control_inputs))
    return Node(last.name, rule.fused_op, [*base.inputs, bias, *post_refs], controls, attrs,
                base.device)


def kernel_accepts(node: Node) -> bool:
    """Whether the kernel registered for ``node``'s op builds with its attrs (a fused combination
    it does not support stays unfused)."""
    factory = KERNELS.lookup(node.op)
    if factory is None:
        return False
    try:
        factory(NodeContext(node.name, node.op, node.attrs, 1))
    except Exception:  # noqa: BLE001 - an unsupported combination simply stays unfused
        return False
    return True


def _vector_const(name: str, value: np.ndarray, device: str) -> Node:
    value = np.ascontiguousarray(value)
    value.flags.writeable = False
    return Node(name, "Const", [], [], {"value": value, "dtype": from_numpy(value.dtype)}, device)


def fuse_patterns(graph: Graph, context: PassContext) -> Graph:
    load_all_kernels()  # fusion asks the fused kernels whether they accept each combination
    readers, control_readers = readers_of(graph)

    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    new_constants: list[Node] = []
    taken = set(graph.nodes)
    for node in graph:
        if node.name in removed or node.name in replaced:
            continue
        for rule in RULES:
            if node.op != rule.base:
                continue
            found = _match(rule, node, readers, context, graph)
            if found is None:
                continue
            chain = found.chain
            if any(n.name in removed or n.name in replaced for n in chain):
                continue
            if any(n.name in control_readers for n in chain[:-1]):
                continue
            post_refs: list[TensorRef] = []
            made: list[Node] = []
            for i, arg in enumerate(found.post_args):
                if isinstance(arg, TensorRef):
                    post_refs.append(arg)
                    continue
                step = chain[len(chain) - len(found.post_args) + i]
                name = unique_name(f"{step.name}/channel_vector", taken)
                made.append(_vector_const(name, arg, step.device))
                post_refs.append(TensorRef(name))
            fused = _fused_node(rule, found, post_refs)
            if not kernel_accepts(fused):
                taken.difference_update(n.name for n in made)
                continue
            new_constants += made
            replaced[fused.name] = fused
            removed.update(n.name for n in chain[:-1])
            break
    if not replaced:
        return graph
    kept = (replaced.get(n.name, n) for n in graph if n.name not in removed)
    return graph.with_nodes([*new_constants, *kept])
