"""A per-channel affine ``x * s + t`` *before* a max pool or a linear op.

Keras' BatchNormalization placed after an activation exports as ``AddV2(Mul(relu, s), t)`` with
constant ``s`` and ``t`` of one value per channel; no weight before it can absorb it (the ReLU is
in the way, see ``fold_affine``). Two rewrites move it out of the hot path:

``move_affine_past_max_pool``: with every ``s > 0``, ``v -> v * s + t`` is non-decreasing, and a
non-decreasing map commutes with max exactly, rounding included (rounding is monotone too), so
``MaxPool(x * s + t) == MaxPool(x) * s + t``, now over the pooled, smaller tensor. Only a
channels-last pool that does not pool across channels; ``s`` and ``t`` finite.

``fold_affine_into_consumer``: a ``Conv2D``, ``DepthwiseConv2dNative`` or ``MatMul`` with constant
weights that reads ``x * s + t`` computes ``op(x, W') + b`` with ``W'`` the weights scaled along
their input channels and ``b`` the product of ``t`` with the weights summed over the taps; the
shift needs a convolution without padding (padding adds zeros after the shift, not before), the
scale does not. The consumer keeps its name (a new ``BiasAdd`` takes it when there is a shift),
and ``fold_affine`` then merges that bias with whatever affine follows. Folding is done in float64
for float32/float64 models, as ``fold_affine`` does.

Both need the input's channel count to be the constants' (a constant of length C against one
channel would broadcast the tensor to C channels): it comes from the shapes TensorFlow recorded
(``_output_shapes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.dtypes import DataType, from_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.optimize.context import PassContext, const_value, readers_of, unique_name

_FLOATS = frozenset({DataType.DT_FLOAT, DataType.DT_DOUBLE})
_SHIFTS = frozenset({"Add", "AddV2", "Sub"})


def _static_shape(graph: Graph, ref: TensorRef) -> tuple[int, ...] | None:
    """The shape TensorFlow's shape inference recorded for ``ref`` (-1 for unknown dims)."""
    node = graph.nodes.get(ref.node)
    shapes = node.attrs.get("_output_shapes") if node is not None else None
    if isinstance(shapes, (list, tuple)) and ref.port < len(shapes):
        shape = shapes[ref.port]
        if isinstance(shape, (list, tuple)):
            return tuple(int(d) for d in shape)
    return None


@dataclass
class _Affine:
    """``x -> x * scale + shift`` per channel, as the graph computes it: ``steps`` are the
    nodes, first to last; ``x`` the tensor they start from."""

    x: TensorRef
    steps: list[Node]
    operands: list[int]  # per step, the input index of the tensor the chain runs through
    scale: np.ndarray | None  # as the graph holds it (not reshaped)
    shift: np.ndarray | None  # negated for a Sub


def _private(node: Node, reader: Node, readers: dict[str, list[Node]], control_readers: set[str],
             context: PassContext) -> bool:
    """Whether ``reader`` is the only thing that observes ``node``'s output (read once)."""
    if node.name in context.protected_nodes or node.name in control_readers:
        return False
    users = readers.get(node.name, [])
    return (len(users) == 1 and users[0] is reader
            and sum(ref.node == node.name for ref in reader.inputs) == 1
            and TensorRef(node.name, 0) in reader.inputs)


def _affine_before(graph: Graph, ref: TensorRef, reader: Node, readers: dict[str, list[Node]],
                   control_readers: set[str], context: PassContext, dtype: int) -> _Affine | None:
    """The per-channel ``Mul`` and/or shift (in that order) that produce ``ref``, each read only
    by the next (the last by ``reader``), with constant operands of the model's float type."""
    steps: list[Node] = []
    operands: list[int] = []
    scale = shift = None
    current = reader
    for allowed in (_SHIFTS, frozenset({"Mul"})):
        node = graph.nodes.get(ref.node)
        if node is None or ref.port != 0 or node.op not in allowed or len(node.inputs) != 2:
            continue
        if node.attrs.get("T") != dtype or not _private(node, current, readers,
                                                        control_readers, context):
            break
        index = 0
        value = const_value(graph, node.inputs[1])
        if value is None and node.op != "Sub":
            index, value = 1, const_value(graph, node.inputs[0])
        other = node.inputs[index]
        if value is None or const_value(graph, other) is not None:
            break
        if value.dtype.kind != "f" or not np.isfinite(value).all():
            break
        if node.op == "Mul":
            scale = value
        else:
            shift = -value if node.op == "Sub" else value
        steps.insert(0, node)
        operands.insert(0, index)
        current, ref = node, other
    if not steps:
        return None
    return _Affine(ref, steps, operands, scale, shift)


def _channel_vector(value: np.ndarray | None, channels: int, rank: int) -> np.ndarray | None:
    """``value`` as a float64 [channels] vector if it varies by channel only and broadcasting it
    against a rank-``rank`` tensor with ``channels`` channels leaves that shape alone."""
    if value is None:
        return None
    if value.ndim > rank or any(d != 1 for d in value.shape[:-1]):
        return None
    if value.ndim and value.shape[-1] not in (1, channels):
        return None
    return np.broadcast_to(value.astype(np.float64).reshape(-1), (channels,))


def _input_channels(graph: Graph, x: TensorRef, rank: int) -> int | None:
    shape = _static_shape(graph, x)
    if shape is None or len(shape) != rank or shape[-1] < 0:
        return None
    return shape[-1]


def _rebuild(graph: Graph, replaced: dict[str, list[Node]], removed: set[str],
             added: list[Node]) -> Graph:
    out: list[Node] = list(added)
    for node in graph:
        if node.name not in removed:
            out.extend(replaced.get(node.name, [node]))
    return graph.with_nodes(out)


# --- max pool ------------------------------------------------------------------------------------


def _pools_channels(values: object) -> bool:
    values = list(values) if isinstance(values, (list, tuple)) else []
    return len(values) != 4 or int(values[0]) != 1 or int(values[3]) != 1


def move_affine_past_max_pool(graph: Graph, context: PassContext) -> Graph:
    readers, control_readers = readers_of(graph)
    taken = set(graph.nodes)
    replaced: dict[str, list[Node]] = {}
    removed: set[str] = set()
    for pool in graph:
        if pool.op != "MaxPool" or len(pool.inputs) != 1 or pool.attrs.get("T") not in _FLOATS:
            continue
        if pool.attrs.get("data_format", "NHWC") != "NHWC":
            continue
        if _pools_channels(pool.attrs.get("ksize")) or _pools_channels(pool.attrs.get("strides")):
            continue
        affine = _affine_before(graph, pool.inputs[0], pool, readers, control_readers, context,
                                pool.attrs["T"])
        if affine is None or any(n.name in removed for n in affine.steps):
            continue
        channels = _input_channels(graph, affine.x, 4)
        if channels is None:
            continue
        scale = _channel_vector(affine.scale, channels, 4)
        shift = _channel_vector(affine.shift, channels, 4)
        if (affine.scale is not None and (scale is None or not (scale > 0).all())) or (
                affine.shift is not None and shift is None):
            continue
        pooled = pool.copy(name=unique_name(f"{pool.name}/before_affine", taken),
                           inputs=[affine.x])
        nodes, previous = [pooled], TensorRef(pooled.name)
        for i, (step, operand) in enumerate(zip(affine.steps, affine.operands)):
            name = pool.name if i == len(affine.steps) - 1 else step.name
            inputs = list(step.inputs)
            inputs[operand] = previous
            nodes.append(step.copy(name=name, inputs=inputs))
            previous = TensorRef(name)
        removed.update(n.name for n in affine.steps)
        replaced[pool.name] = nodes
    if not replaced:
        return graph
    return _rebuild(graph, replaced, removed, [])


# --- linear consumers ----------------------------------------------------------------------------

# The ops whose weights can absorb a per-channel affine of their input, and their input's rank.
_CONSUMERS = {"Conv2D": 4, "DepthwiseConv2dNative": 4, "MatMul": 2}


def _input_depth(node: Node, weights: np.ndarray) -> int | None:
    """The input channel count the consumer's weights expect, or None for a layout we skip."""
    if node.op == "MatMul":
        if weights.ndim != 2 or node.attrs.get("transpose_a"):
            return None
        return int(weights.shape[1 if node.attrs.get("transpose_b") else 0])
    if weights.ndim != 4 or node.attrs.get("data_format", "NHWC") != "NHWC":
        return None
    return int(weights.shape[2])


def _unpadded(node: Node, weights: np.ndarray) -> bool:
    """Whether a convolution reads no padding: VALID, explicit zeros, or a 1x1 filter."""
    if node.op == "MatMul":
        return True
    padding = node.attrs.get("padding")
    if padding == "VALID":
        return True
    if padding == "EXPLICIT":
        return not any(int(p) for p in node.attrs.get("explicit_paddings", ()))
    return padding == "SAME" and weights.shape[0] == 1 and weights.shape[1] == 1


def _scaled_weights(node: Node, weights: np.ndarray, scale: np.ndarray) -> np.ndarray:
    w = weights.astype(np.float64)
    factor: np.ndarray
    if node.op == "MatMul":
        factor = scale[None, :] if node.attrs.get("transpose_b") else scale[:, None]
    else:
        factor = scale[None, None, :, None]  # HWIO and depthwise [H, W, C, multiplier] alike
    scaled: np.ndarray = w * factor
    return scaled


def _bias_of_shift(node: Node, weights: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """What ``op(shift broadcast over the input, weights)`` adds to every output element."""
    w = weights.astype(np.float64)
    bias: np.ndarray
    if node.op == "MatMul":
        bias = (w @ shift) if node.attrs.get("transpose_b") else (shift @ w)
    elif node.op == "Conv2D":
        bias = np.einsum("hwio,i->o", w, shift)
    else:  # depthwise: output channel i * multiplier + m sees input channel i only
        bias = (w.sum(axis=(0, 1)) * shift[:, None]).reshape(-1)
    return bias


def fold_affine_into_consumer(graph: Graph, context: PassContext) -> Graph:
    readers, control_readers = readers_of(graph)
    taken = set(graph.nodes)
    replaced: dict[str, list[Node]] = {}
    removed: set[str] = set()
    added: list[Node] = []
    shared: dict[tuple[object, ...], TensorRef] = {}
    for node in graph:
        if node.op not in _CONSUMERS or len(node.inputs) != 2:
            continue
        dtype = node.attrs.get("T")
        weights = const_value(graph, node.inputs[1])
        if dtype not in _FLOATS or weights is None or weights.dtype.kind != "f":
            continue
        depth = _input_depth(node, weights)
        if depth is None:
            continue
        affine = _affine_before(graph, node.inputs[0], node, readers, control_readers, context,
                                dtype)
        if affine is None or any(n.name in removed or n.name in replaced for n in affine.steps):
            continue
        rank = _CONSUMERS[node.op]
        if _input_channels(graph, affine.x, rank) != depth:
            continue
        scale = _channel_vector(affine.scale, depth, rank)
        shift = _channel_vector(affine.shift, depth, rank)
        if (affine.scale is not None and scale is None) or (
                affine.shift is not None and (shift is None or not _unpadded(node, weights))):
            continue
        new_weights = weights if scale is None else _scaled_weights(node, weights, scale)
        bias = None if shift is None else _bias_of_shift(node, weights.astype(np.float64), shift)
        with np.errstate(over="ignore", invalid="ignore"):
            new_weights = new_weights.astype(weights.dtype)
            bias = None if bias is None else bias.astype(weights.dtype)
        if not np.isfinite(new_weights).all() or (bias is not None and not np.isfinite(bias).all()):
            continue  # the folded values overflow the model's dtype
        inputs = [affine.x, node.inputs[1]]
        if scale is not None:
            # Shared when equal: two signatures over one model fold alike.
            key = (node.inputs[1], node.op, bool(node.attrs.get("transpose_b")), scale.tobytes())
            if key not in shared:
                const = _const_node(unique_name(f"{node.name}/input_scaled_weights", taken),
                                    new_weights, node.device)
                added.append(const)
                shared[key] = TensorRef(const.name)
            inputs[1] = shared[key]
        controls = list(dict.fromkeys(c for n in [*affine.steps, node] for c in n.control_inputs))
        if bias is None:
            nodes = [node.copy(inputs=inputs, control_inputs=controls)]
        else:
            bias_const = _const_node(unique_name(f"{node.name}/input_shift_bias", taken), bias,
                                     node.device)
            product = node.copy(name=unique_name(f"{node.name}/unshifted", taken), inputs=inputs,
                                control_inputs=controls)
            added.append(bias_const)
            attrs = {"T": dtype, "data_format": "NHWC"}
            if "_output_shapes" in node.attrs:
                attrs["_output_shapes"] = node.attrs["_output_shapes"]
            nodes = [product, Node(node.name, "BiasAdd", [TensorRef(product.name),
                                                         TensorRef(bias_const.name)], [], attrs,
                                   node.device)]
        removed.update(n.name for n in affine.steps)
        replaced[node.name] = nodes
    if not replaced:
        return graph
    return _rebuild(graph, replaced, removed, added)


def _const_node(name: str, value: np.ndarray, device: str) -> Node:
    value = np.ascontiguousarray(value)
    value.flags.writeable = False
    return Node(name, "Const", [], [], {"value": value, "dtype": from_numpy(value.dtype)}, device)
