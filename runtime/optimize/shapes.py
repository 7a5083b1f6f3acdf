"""Symbolic values of the small integer tensors that graphs compute from ``Shape``.

Keras and ``tf.tensordot`` build reshape targets at run time: ``Shape(x)``, gathers, products,
packs and concatenations. A rewrite that wants to know what such a tensor *is* (say
``[x.dim0 * x.dim1, x.dim2]``) evaluates it here: every element is a ``SymInt``, an integer
coefficient times a product of dimensions of graph tensors. Anything else evaluates to None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from runtime.graph import Graph, Node, TensorRef

Factor = tuple[TensorRef, int]  # dimension ``axis`` of tensor ``ref``

_MAX_ELEMENTS = 16  # shape vectors are short; anything longer is not worth tracking
_MAX_DEPTH = 64


@dataclass(frozen=True)
class SymInt:
    """``coeff * prod(dim for dim in factors)``; factors sorted, so equal products compare equal."""

    coeff: int
    factors: tuple[Factor, ...] = ()

    @staticmethod
    def dim(ref: TensorRef, axis: int) -> SymInt:
        return SymInt(1, ((ref, axis),))

    def times(self, other: SymInt) -> SymInt:
        return SymInt(self.coeff * other.coeff, tuple(sorted(self.factors + other.factors)))

    @property
    def constant(self) -> int | None:
        return None if self.factors else self.coeff


@dataclass(frozen=True)
class SymVector:
    """A symbolic rank-0 (``scalar``) or rank-1 integer tensor."""

    items: tuple[SymInt, ...]
    scalar: bool = False


def canonical(graph: Graph, ref: TensorRef) -> TensorRef:
    """``ref`` with identity nodes of one tensor looked through: the tensor whose dims a shape
    talks about."""
    for _ in range(_MAX_DEPTH):
        node = graph.nodes.get(ref.node)
        if node is None or len(node.inputs) != 1 or not _forwards_one_tensor(graph, node):
            break
        ref = node.inputs[0]
    return ref


def _forwards_one_tensor(graph: Graph, node: Node) -> bool:
    # A list forwarder (IdentityN) is left alone even with one input, as it always was here.
    op_def = graph.op_def(node.op)
    return (
        op_def is not None
        and op_def.is_identity
        and all(arg.length_attr is None for arg in op_def.inputs)
    )


def static_rank(graph: Graph, ref: TensorRef) -> int | None:
    """The rank TensorFlow's shape inference recorded for ``ref`` (``_output_shapes``), if any."""
    node = graph.nodes.get(ref.node)
    shapes = node.attrs.get("_output_shapes") if node is not None else None
    if isinstance(shapes, (list, tuple)) and ref.port < len(shapes):
        shape = shapes[ref.port]
        if isinstance(shape, (list, tuple)):
            return len(shape)
    return None


def _int_const(graph: Graph, ref: TensorRef) -> np.ndarray | None:
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "Const" or ref.port != 0:
        return None
    value = node.attrs.get("value")
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.ndim <= 1:
        return value
    return None


class ShapeEvaluator:
    """Evaluates integer tensors symbolically, memoized per tensor."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._memo: dict[TensorRef, SymVector | None] = {}

    def value(self, ref: TensorRef, depth: int = 0) -> SymVector | None:
        if ref in self._memo:
            return self._memo[ref]
        result = None if depth > _MAX_DEPTH else self._evaluate(ref, depth)
        if result is not None and len(result.items) > _MAX_ELEMENTS:
            result = None
        self._memo[ref] = result
        return result

    def _evaluate(self, ref: TensorRef, depth: int) -> SymVector | None:
        node = self.graph.nodes.get(ref.node)
        if node is None or ref.port != 0 or node.control_inputs:
            return None  # (an ordering constraint would be lost by looking through the node)
        const = _int_const(self.graph, ref)
        if const is not None:
            items = tuple(SymInt(int(v)) for v in const.reshape(-1).tolist())
            return SymVector(items, scalar=const.ndim == 0)
        rule = _RULES.get(node.op)
        if rule is None:
            return None
        try:
            return rule(self, node, depth + 1)
        except (ValueError, IndexError, TypeError, KeyError):
            return None

    def inputs(self, node: Node, depth: int) -> list[SymVector] | None:
        values = [self.value(ref, depth) for ref in node.inputs]
        known = [v for v in values if v is not None]
        return known if len(known) == len(values) else None

    def constant(self, ref: TensorRef) -> np.ndarray | None:
        return _int_const(self.graph, ref)


def _shape(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    if len(node.inputs) != 1:
        return None
    x = canonical(ev.graph, node.inputs[0])
    # The rank is that of Shape's own output length, as TensorFlow recorded it.
    out = node.attrs.get("_output_shapes")
    if not (isinstance(out, (list, tuple)) and out and isinstance(out[0], (list, tuple))):
        return None
    if len(out[0]) != 1 or out[0][0] < 0:
        return None
    return SymVector(tuple(SymInt.dim(x, i) for i in range(int(out[0][0]))))


def _gather(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    if len(node.inputs) != 3 or int(node.attrs.get("batch_dims", 0)) != 0:
        return None
    params = ev.value(node.inputs[0], depth)
    indices = ev.constant(node.inputs[1])
    axis = ev.constant(node.inputs[2])
    if params is None or params.scalar or indices is None or axis is None:
        return None
    if axis.size != 1 or int(axis.reshape(-1)[0]) not in (0, -1):
        return None
    n = len(params.items)
    picked = []
    for i in indices.reshape(-1).tolist():
        if not 0 <= i < n:
            return None
        picked.append(params.items[i])
    return SymVector(tuple(picked), scalar=indices.ndim == 0)


def _prod(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    if len(node.inputs) != 2:
        return None
    x = ev.value(node.inputs[0], depth)
    axes = ev.constant(node.inputs[1])
    if x is None or x.scalar or axes is None:
        return None
    if sorted(set(axes.reshape(-1).tolist())) not in ([0], [-1]):
        return None
    total = SymInt(1)
    for item in x.items:
        total = total.times(item)
    keep = bool(node.attrs.get("keep_dims", False))
    return SymVector((total,), scalar=not keep)


def _pack(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    if int(node.attrs.get("axis", 0)) not in (0, -1):
        return None
    values = ev.inputs(node, depth)
    if values is None or not all(v.scalar for v in values):
        return None
    return SymVector(tuple(v.items[0] for v in values))


def _concat(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    if len(node.inputs) < 2:
        return None
    axis = ev.constant(node.inputs[-1])
    if axis is None or axis.size != 1 or int(axis.reshape(-1)[0]) not in (0, -1):
        return None
    values = [ev.value(ref, depth) for ref in node.inputs[:-1]]
    if any(v is None or v.scalar for v in values):
        return None
    items: tuple[SymInt, ...] = ()
    for v in values:
        assert v is not None
        items += v.items
    return SymVector(items)


def _strided_slice(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    """A slice of a vector with unit stride: ``v[b:e]`` or, with shrink_axis_mask, ``v[b]``."""
    if len(node.inputs) != 4:
        return None
    x = ev.value(node.inputs[0], depth)
    begin, end, strides = (ev.constant(r) for r in node.inputs[1:])
    if x is None or x.scalar or begin is None or end is None or strides is None:
        return None
    if begin.shape != (1,) or end.shape != (1,) or strides.tolist() != [1]:
        return None
    if any(int(node.attrs.get(m, 0)) for m in ("ellipsis_mask", "new_axis_mask")):
        return None
    n = len(x.items)
    b, e = int(begin[0]), int(end[0])
    if node.attrs.get("shrink_axis_mask", 0) & 1:
        index = b + n if b < 0 else b
        return SymVector((x.items[index],), scalar=True) if 0 <= index < n else None
    start = 0 if node.attrs.get("begin_mask", 0) & 1 else b
    stop = n if node.attrs.get("end_mask", 0) & 1 else e
    return SymVector(x.items[slice(start, stop)])


def _mul(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    """Element-wise product, a scalar (or one-element vector) broadcasting to the other."""
    values = ev.inputs(node, depth) if len(node.inputs) == 2 else None
    if values is None:
        return None
    a, b = values
    if len(a.items) == 1 and len(b.items) != 1:
        a = SymVector(a.items * len(b.items), scalar=a.scalar)
    elif len(b.items) == 1 and len(a.items) != 1:
        b = SymVector(b.items * len(a.items), scalar=b.scalar)
    if len(a.items) != len(b.items):
        return None
    items = tuple(x.times(y) for x, y in zip(a.items, b.items))
    return SymVector(items, scalar=a.scalar and b.scalar)


def _forward(ev: ShapeEvaluator, node: Node, depth: int) -> SymVector | None:
    if not node.inputs:
        return None
    dst = node.attrs.get("DstT")
    if node.op == "Cast" and dst is not None and int(dst) not in (3, 9):  # int32, int64
        return None
    return ev.value(node.inputs[0], depth)


_RULES: dict[str, Callable[[ShapeEvaluator, Node, int], SymVector | None]] = {
    "Shape": _shape,
    "GatherV2": _gather,
    "Prod": _prod,
    "Pack": _pack,
    "ConcatV2": _concat,
    "StridedSlice": _strided_slice,
    "Mul": _mul,
    "Identity": _forward,
    "Cast": _forward,
}


def dims(ref: TensorRef, axes: Sequence[int]) -> tuple[SymInt, ...]:
    return tuple(SymInt.dim(ref, a) for a in axes)


def product(items: Sequence[SymInt]) -> SymInt:
    total = SymInt(1)
    for item in items:
        total = total.times(item)
    return total
