"""Per-channel affine folding: ``x*scale + shift`` after a linear op moves into its weights.

Keras exports an inference BatchNormalization as plain arithmetic. Once variables are frozen and
constants folded, a convolution followed by batch norm reads ``AddV2(Mul(Conv2D(x, W), s), t)``
with constant ``s`` and ``t`` of one value per output channel. Because the product is linear in
its weights, ``Conv2D(x, W) * s + t == Conv2D(x, W * s) + t``: the chain becomes one convolution
with scaled weights and a ``BiasAdd``, which the fusion pass then merges with a following
activation.

The base op is ``Conv2D``, ``DepthwiseConv2dNative`` or ``MatMul`` (channels last) with constant
weights. What follows it, while each step is the single consumer of the previous one and not a
protected tensor, may be any run of ``BiasAdd``, ``Add``/``AddV2``, ``Sub`` (constant subtracted)
and ``Mul`` with constants whose shape is per-channel (``[C]``, ``[1, .., 1, C]``, or a
broadcast scalar). Folding uses float64 arithmetic and is limited to float32/float64 models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.dtypes import DataType, from_numpy, to_numpy
from runtime.graph import Graph, Node, TensorRef
from runtime.optimize.context import PassContext, const_value, readers_of

# The ops whose weights can absorb a per-channel scale, and the rank of their output.
_BASES = {"Conv2D": 4, "DepthwiseConv2dNative": 4, "MatMul": 2}
_FOLDABLE_DTYPES = frozenset({DataType.DT_FLOAT, DataType.DT_DOUBLE})
_COMMUTATIVE = frozenset({"Add", "AddV2", "Mul"})


@dataclass
class _Affine:
    """The per-channel map ``y -> y * scale + shift`` accumulated along a chain (float64)."""

    scale: np.ndarray
    shift: np.ndarray
    has_shift: bool = False

    def then(self, op: str, value: np.ndarray) -> None:
        if op == "Mul":
            self.scale = self.scale * value
            self.shift = self.shift * value
        elif op == "Sub":
            self.shift = self.shift - value
            self.has_shift = True
        else:
            self.shift = self.shift + value
            self.has_shift = True


def _channels(base: Node, weights: np.ndarray) -> int | None:
    """Output channel count of the base op, or None if its layout is not one we fold."""
    if base.op == "MatMul":
        if weights.ndim != 2:
            return None
        return int(weights.shape[0 if base.attrs.get("transpose_b") else 1])
    if weights.ndim != 4 or base.attrs.get("data_format", "NHWC") != "NHWC":
        return None
    if base.op == "Conv2D":
        return int(weights.shape[3])
    return int(weights.shape[2] * weights.shape[3])


def _per_channel(value: np.ndarray, channels: int, rank: int, dtype: np.dtype) -> np.ndarray | None:
    """``value`` as a float64 ``[channels]`` vector if broadcasting it only varies by channel."""
    if value.dtype != dtype or value.ndim > rank:
        return None
    if any(d != 1 for d in value.shape[:-1]):
        return None
    if value.ndim and value.shape[-1] not in (1, channels):
        return None
    vector = value.astype(np.float64).reshape(-1)
    # inf * 0 differs before and after reassociation; such a model keeps its arithmetic.
    return np.broadcast_to(vector, (channels,)) if np.isfinite(vector).all() else None


def _single_reader(
    name: str, readers: dict[str, list[Node]], control_readers: set[str], context: PassContext
) -> Node | None:
    """The one node reading ``name:0``, if nothing else observes that tensor."""
    if name in context.protected_nodes or name in control_readers:
        return None
    users = readers.get(name, [])
    if len(users) != 1:
        return None
    user = users[0]
    if sum(ref.node == name for ref in user.inputs) != 1 or TensorRef(name, 0) not in user.inputs:
        return None
    return user


def _step_constant(graph: Graph, user: Node, prev: str) -> np.ndarray | None:
    """The constant operand of an absorbable step that reads ``prev``, else None."""
    if len(user.inputs) != 2:
        return None
    here = TensorRef(prev, 0)
    if user.op == "BiasAdd":
        if user.inputs[0] != here or user.attrs.get("data_format", "NHWC") != "NHWC":
            return None
        return const_value(graph, user.inputs[1])
    if user.op == "Sub":
        return const_value(graph, user.inputs[1]) if user.inputs[0] == here else None
    if user.op in _COMMUTATIVE:
        other = user.inputs[1] if user.inputs[0] == here else user.inputs[0]
        return const_value(graph, other)
    return None


def _fold_weights(base: Node, weights: np.ndarray, scale: np.ndarray) -> np.ndarray:
    w: np.ndarray = weights.astype(np.float64)
    if base.op == "MatMul":
        w = w * (scale[:, None] if base.attrs.get("transpose_b") else scale[None, :])
    elif base.op == "Conv2D":
        w = w * scale
    else:  # depthwise: output channel k = input channel * multiplier + m
        w = w * scale.reshape(weights.shape[2], weights.shape[3])
    with np.errstate(over="ignore"):  # an overflow shows as inf, which the caller refuses
        return w.astype(weights.dtype)


class _NewConstants:
    """Constants this pass creates, shared when equal: two signatures over one model fold alike."""

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._by_key: dict[tuple[object, ...], str] = {}
        self.nodes: list[Node] = []

    def add(self, name: str, key: tuple[object, ...], value: np.ndarray, device: str) -> TensorRef:
        existing = self._by_key.get(key)
        if existing is not None:
            return TensorRef(existing)
        taken = {n.name for n in self.nodes}
        unique, n = name, 0
        while unique in self._graph.nodes or unique in taken:
            n += 1
            unique = f"{name}_{n}"
        value = np.ascontiguousarray(value)
        value.flags.writeable = False
        self.nodes.append(
            Node(
                unique, "Const", [], [], {"value": value, "dtype": from_numpy(value.dtype)}, device
            )
        )
        self._by_key[key] = unique
        return TensorRef(unique)


def fold_affine(graph: Graph, context: PassContext) -> Graph:
    readers, control_readers = readers_of(graph)

    replaced: dict[str, list[Node]] = {}  # last node of a chain -> the nodes that replace it
    removed: set[str] = set()
    constants = _NewConstants(graph)
    for base in graph:
        if base.op not in _BASES or base.attrs.get("T") not in _FOLDABLE_DTYPES:
            continue
        if len(base.inputs) != 2:
            continue
        weights = const_value(graph, base.inputs[1])
        channels = _channels(base, weights) if weights is not None else None
        if weights is None or channels is None:
            continue
        dtype = to_numpy(base.attrs["T"])
        if weights.dtype != dtype:
            continue
        affine = _Affine(np.ones(channels), np.zeros(channels))
        chain = [base]
        folds_weights = False
        while True:
            user = _single_reader(chain[-1].name, readers, control_readers, context)
            if user is None or user.attrs.get("T") != base.attrs["T"]:
                break
            value = _step_constant(graph, user, chain[-1].name)
            if value is None:
                break
            if user.op == "BiasAdd" and value.shape != (channels,):
                break
            vector = _per_channel(value, channels, _BASES[base.op], dtype)
            if vector is None:
                break
            affine.then(user.op, vector)
            folds_weights |= user.op == "Mul"
            chain.append(user)
        # Nothing to fold, or a lone BiasAdd: already the form fusion wants.
        if len(chain) < 2 or [n.op for n in chain[1:]] == ["BiasAdd"]:
            continue
        if any(n.name in removed or n.name in replaced for n in chain):
            continue
        last = chain[-1]
        controls = list(dict.fromkeys(c for n in chain for c in n.control_inputs))
        inputs = list(base.inputs)
        new_weights = _fold_weights(base, weights, affine.scale) if folds_weights else weights
        with np.errstate(over="ignore"):
            shift = affine.shift.astype(dtype)
        if not (np.isfinite(new_weights).all() and np.isfinite(shift).all()):
            continue  # the folded values overflow the model's dtype
        if folds_weights:
            key = (
                "weights",
                base.inputs[1],
                base.op,
                bool(base.attrs.get("transpose_b")),
                affine.scale.tobytes(),
            )
            inputs[1] = constants.add(f"{base.name}/folded_weights", key, new_weights, base.device)
        if affine.has_shift:
            bias = constants.add(
                f"{last.name}/folded_bias",
                ("bias", shift.dtype.str, shift.tobytes()),
                shift,
                last.device,
            )
            nodes = [
                base.copy(inputs=inputs, control_inputs=controls),
                Node(
                    last.name,
                    "BiasAdd",
                    [TensorRef(base.name), bias],
                    [],
                    {"T": base.attrs["T"], "data_format": "NHWC"},
                    last.device,
                ),
            ]
        else:
            # Only scaling: the rescaled product itself takes the last node's place.
            nodes = [base.copy(name=last.name, inputs=inputs, control_inputs=controls)]
        removed.update(n.name for n in chain[:-1])
        replaced[last.name] = nodes
    if not replaced:
        return graph
    out: list[Node] = list(constants.nodes)
    for node in graph:
        if node.name not in removed:
            out.extend(replaced.get(node.name, [node]))
    return graph.with_nodes(out)
