"""A depthwise convolution read only by a 1x1 convolution becomes one
``_FusedSeparableConv2D`` with it (see ``runtime.kernels.nn_ops_separable``).

Keras' SeparableConv2D exports as a ``DepthwiseConv2dNative`` and a ``Conv2D`` by a [1, 1, C, O]
filter, and MobileNet's blocks as the same pair with a bias and activation after each (fused by
then into ``_FusedDepthwiseConv2dNative`` and ``_FusedConv2D``). The pair fuses when: both are
float32 and channels-last; the depthwise filter is a constant with one filter per channel and at
least ``TAPS_MIN_CHANNELS`` channels (the tap-by-tap algorithm, which works in chunks of rows);
the 1x1 filter is a constant, with unit strides and dilations and no padding; each fuses no
more than a BiasAdd and an activation; and the depthwise output is read by the 1x1 convolution
alone (not fetched, no control edge). Anything else stays as it is.
"""

from __future__ import annotations

from typing import Any

from runtime.dtypes import DataType
from runtime.graph import Graph, Node
from runtime.kernels import load_all_kernels
from runtime.kernels.nn_ops_depthwise import TAPS_MIN_CHANNELS
from runtime.optimize.context import PassContext, const_value, readers_of
from runtime.optimize.fusion import kernel_accepts

_DEPTHWISE = frozenset({"DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"})
_POINTWISE = frozenset({"Conv2D", "_FusedConv2D"})
_FUSED = "_FusedSeparableConv2D"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _epilogue(node: Node) -> list[str] | None:
    """The node's fused ops when they are at most a BiasAdd and an activation (with the bias
    as its one extra input), else None."""
    fused = [_text(op) for op in node.attrs.get("fused_ops", [])]
    if int(node.attrs.get("num_host_args", 0) or 0):
        return None
    if _text(node.attrs.get("filter_format", "HWIO")) != "HWIO":
        return None
    if fused and (fused[0] != "BiasAdd" or len(fused) > 2):
        return None  # the second, if any, must be an activation: the kernel checks that
    return fused if len(node.inputs) == 2 + bool(fused) else None


def _plain(node: Node) -> bool:
    """Float32, channels-last."""
    return (node.attrs.get("T") == DataType.DT_FLOAT
            and _text(node.attrs.get("data_format", "NHWC")) == "NHWC")


def _unit_pointwise(pointwise: Node) -> bool:
    """Unit strides and dilations and no padding."""
    strides = [int(v) for v in pointwise.attrs.get("strides", ())]
    dilations = [int(v) for v in pointwise.attrs.get("dilations", (1, 1, 1, 1))]
    padding = _text(pointwise.attrs.get("padding", ""))
    explicit = [int(v) for v in pointwise.attrs.get("explicit_paddings", ())]
    return (strides == [1, 1, 1, 1] and dilations == [1, 1, 1, 1]
            and (padding in ("VALID", "SAME") or (padding == "EXPLICIT" and not any(explicit))))


def _fused(depthwise: Node, pointwise: Node, depthwise_ops: list[str],
           pointwise_ops: list[str]) -> Node | None:
    alphas = {float(n.attrs.get("leakyrelu_alpha", 0.2))
              for n, ops in ((depthwise, depthwise_ops), (pointwise, pointwise_ops))
              if "LeakyRelu" in ops}
    if len(alphas) > 1:
        return None
    attrs: dict[str, Any] = {
        key: depthwise.attrs[key]
        for key in ("strides", "padding", "explicit_paddings", "dilations", "data_format")
        if key in depthwise.attrs}
    attrs.update({
        "T": DataType.DT_FLOAT,
        "depthwise_fused_ops": depthwise_ops,
        "num_depthwise_args": len(depthwise.inputs) - 2,
        "fused_ops": pointwise_ops,
        "num_args": len(pointwise.inputs) - 2,
        "leakyrelu_alpha": alphas.pop() if alphas else 0.2,
    })
    controls = list(dict.fromkeys([*depthwise.control_inputs, *pointwise.control_inputs]))
    node = Node(pointwise.name, _FUSED, [*depthwise.inputs, *pointwise.inputs[1:]], controls,
                attrs, pointwise.device)
    return node if kernel_accepts(node) else None


def fuse_separable_convs(graph: Graph, context: PassContext) -> Graph:
    load_all_kernels()
    readers, control_readers = readers_of(graph)
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for pointwise in graph:
        if pointwise.op not in _POINTWISE or len(pointwise.inputs) < 2:
            continue
        depthwise = graph.nodes.get(pointwise.inputs[0].node)
        if (depthwise is None or depthwise.op not in _DEPTHWISE or pointwise.inputs[0].port != 0
                or depthwise.name in context.protected_nodes or depthwise.name in control_readers
                or depthwise.name in removed or len(readers.get(depthwise.name, [])) != 1
                or any(ref.node == depthwise.name for ref in pointwise.inputs[1:])
                or not _plain(depthwise) or not _plain(pointwise)
                or not _unit_pointwise(pointwise)):
            continue
        depthwise_ops, pointwise_ops = _epilogue(depthwise), _epilogue(pointwise)
        dw_filter = const_value(graph, depthwise.inputs[1])
        pw_filter = const_value(graph, pointwise.inputs[1])
        if (depthwise_ops is None or pointwise_ops is None or dw_filter is None
                or pw_filter is None or dw_filter.ndim != 4 or dw_filter.shape[3] != 1
                or dw_filter.shape[2] < TAPS_MIN_CHANNELS
                or pw_filter.shape[:3] != (1, 1, dw_filter.shape[2])):
            continue
        fused = _fused(depthwise, pointwise, depthwise_ops, pointwise_ops)
        if fused is not None:
            replaced[pointwise.name] = fused
            removed.add(depthwise.name)
    if not replaced:
        return graph
    return graph.with_nodes([replaced.get(n.name, n) for n in graph if n.name not in removed])
