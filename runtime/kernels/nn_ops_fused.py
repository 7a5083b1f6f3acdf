"""The epilogue of TF's fused kernels (``_FusedMatMul``, ``_FusedConv2D``, ...).

``fused_ops`` names what follows the product, in order: a ``BiasAdd`` (one arg) or an inference
``FusedBatchNorm`` (four args: scale, offset, mean, variance), optionally an ``Add`` of a side
input (one arg), then at most one activation, which may be followed by a per-channel ``Mul`` and
``AddV2`` (one [C] arg each: a batch norm placed after the activation, channels-last only; not a
TensorFlow form, the optimizer's). The epilogue runs in place on the product, which the
fused kernel has just allocated, with channels on the last axis. A kernel that can add the bias
while it writes its product (the convolutions do) takes ``after_bias`` instead of ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.nn_ops_activation import ACTIVATION_NAMES, fused_activation
from runtime.kernels.nn_ops_common import WIDE_MIN_SIZE, tiled
from runtime.kernels.registry import NodeContext

Step = Callable[[np.ndarray, Sequence[np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class Epilogue:
    num_args: int
    apply: Step  # (product, args) -> result
    side_input: int | None  # index in args of the ``Add`` operand, which has the output's layout
    # When ``fused_ops`` starts with BiasAdd: the epilogue without it, for a kernel that has
    # already added ``bias_arg(args, channels)`` to its product. None otherwise.
    after_bias: Step | None = None
    # When ``fused_ops`` is BiasAdd and at most an activation (and the steps after it): that
    # activation ("" for none).
    bias_then: str | None = None
    # The steps after the activation alone (None if there are none).
    post: Step | None = None
    # When ``fused_ops`` is BiasAdd, Add and at most an activation: that activation ("" for
    # none), for a kernel that adds the side input to each block of its product as it writes it.
    bias_add_then: str | None = None


def bias_arg(args: Sequence[np.ndarray], channels: int) -> np.ndarray:
    """The BiasAdd operand of a fused op's args, checked against the output's channels."""
    bias = args[0]
    if bias.ndim != 1 or bias.shape[0] != channels:
        raise InvalidArgumentError(
            f"bias must be 1-D with {channels} elements, got shape {list(bias.shape)}"
        )
    return bias


def per_channel_(y: np.ndarray, vector: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """``y = ufunc(y, vector)`` in place, ``vector`` along the last axis. For feature maps the
    vector is tiled along a whole image row: numpy is slow when the broadcast inner loop is only
    a few channels long."""
    if y.ndim >= 3 and y.size >= WIDE_MIN_SIZE and y.flags.c_contiguous:
        rows = y.reshape(-1, y.shape[-2] * y.shape[-1])
        ufunc(rows, tiled(vector, y.shape[-2]), out=rows)
    else:
        ufunc(y, vector, out=y)
    return y


def _bias_add(y: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
    return per_channel_(y, bias_arg(args, y.shape[-1]).astype(y.dtype, copy=False), np.add)


def _batch_norm(epsilon: float) -> Step:
    def step(y: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
        scale, offset, mean, variance = (a.astype(y.dtype, copy=False) for a in args[:4])
        for name, a in zip(("scale", "offset", "mean", "variance"), (scale, offset, mean, variance)):
            if a.shape != (y.shape[-1],):
                raise InvalidArgumentError(
                    f"{name} must be 1-D with {y.shape[-1]} elements, got {list(a.shape)}"
                )
        factor = scale / np.sqrt(variance + y.dtype.type(epsilon))
        per_channel_(y, factor, np.multiply)
        return per_channel_(y, offset - mean * factor, np.add)

    return step


def _post_channel(ufunc: np.ufunc, name: str) -> Step:
    def step(y: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
        vector = args[0]
        if vector.shape != (y.shape[-1],):
            raise InvalidArgumentError(
                f"{name} after the activation takes one value per channel ({y.shape[-1]}), got "
                f"shape {list(vector.shape)}"
            )
        return per_channel_(y, vector.astype(y.dtype, copy=False), ufunc)

    return step


def _side_input(y: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
    side = args[0]
    if np.broadcast_shapes(y.shape, side.shape) != y.shape:  # the sum is larger than y
        result: np.ndarray = np.add(y, side)
        return result
    y += side
    return y


def fused_op_names(node: NodeContext, attr: str = "fused_ops") -> list[str]:
    """The op names in a ``fused_ops``-style attr, as text."""
    return [op.decode() if isinstance(op, bytes) else str(op) for op in node.attr(attr, [])]


def build_epilogue(node: NodeContext, allow_batch_norm: bool = True) -> Epilogue:
    """The epilogue for the node's ``fused_ops``."""
    fused = fused_op_names(node)
    steps: list[tuple[Step, int]] = []  # (step, args it takes), before the activation
    post: list[tuple[Step, int]] = []  # after it
    rest = list(fused)
    if rest and rest[0] == "BiasAdd":
        steps.append((_bias_add, 1))
        rest.pop(0)
    elif rest and rest[0] == "FusedBatchNorm" and allow_batch_norm:
        steps.append((_batch_norm(float(node.attr("epsilon", 1e-4))), 4))
        rest.pop(0)
    if rest and rest[0] == "Add":
        steps.append((_side_input, 1))
        rest.pop(0)
    activation = None
    if rest and rest[0] in ACTIVATION_NAMES:
        activation = fused_activation(rest.pop(0), float(node.attr("leakyrelu_alpha", 0.2)))
        # A per-channel affine after the activation (an inference batch norm that follows it).
        for name, ufunc in (("Mul", np.multiply), ("AddV2", np.add)):
            if rest and rest[0] == name:
                post.append((_post_channel(ufunc, name), 1))
                rest.pop(0)
    if rest:
        raise UnimplementedError(f"{node.op}: unsupported fused_ops {fused}", node=node.name,
                                 op=node.op)
    if post and node.attr("data_format", "NHWC") not in ("NHWC", b"NHWC"):
        raise UnimplementedError(
            f"{node.op}: fused_ops after the activation need channels-last data, got {fused}",
            node=node.name, op=node.op,
        )
    num_args = sum(n for _, n in steps + post)
    declared = node.attrs.get("num_args")
    if declared is not None and int(declared) != num_args:
        raise InvalidArgumentError(
            f"{node.op}: fused_ops {fused} take {num_args} args, but num_args is {declared}",
            node=node.name, op=node.op,
        )
    offsets = []
    start = 0
    side_input = None
    for step, n in steps:
        if step is _side_input:
            side_input = start
        offsets.append((step, start))
        start += n
    post_offsets = []
    for step, n in post:
        post_offsets.append((step, start))
        start += n

    def chain(chosen: list[tuple[Step, int]]) -> Step:
        def run(y: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
            for step, begin in chosen:
                y = step(y, args[begin:])
            return y

        return run

    def run(chosen: list[tuple[Step, int]]) -> Step:
        before, after = chain(chosen), chain(post_offsets)

        def epilogue(y: np.ndarray, args: Sequence[np.ndarray]) -> np.ndarray:
            y = before(y, args)
            return after(y if activation is None else activation(y), args)

        return epilogue

    after_bias = run(offsets[1:]) if offsets and offsets[0][0] is _bias_add else None
    bias_then = bias_add_then = None
    if after_bias is not None and len(offsets) == 1:
        bias_then = fused[1] if len(fused) > 1 else ""
    if after_bias is not None and side_input == 1 and len(offsets) == 2 and not post_offsets:
        bias_add_then = fused[2] if len(fused) > 2 else ""
    return Epilogue(num_args, run(offsets), side_input, after_bias, bias_then,
                    chain(post_offsets) if post_offsets else None, bias_add_then)
