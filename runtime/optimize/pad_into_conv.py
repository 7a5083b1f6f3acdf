"""A zero Pad of the spatial dimensions feeding a convolution becomes the convolution's own
padding.

Keras exports ``ZeroPadding2D`` before a strided convolution (MobileNet, MobileNetV2,
EfficientNet, ResNet's first layer) as ``Pad(x, paddings)`` and a VALID ``Conv2D`` or
``DepthwiseConv2dNative``. The convolution pads its input into a buffer of its own anyway, so
as ``padding="EXPLICIT"`` with the Pad's amounts (added to any explicit padding it has) the
padded copy that Pad allocates and fills on every call is never made. Pads of the batch or
channel dimensions, other fill values, and a Pad with other readers stay as they are.
"""

from __future__ import annotations

import numpy as np

from runtime.graph import Graph, Node
from runtime.optimize.context import PassContext, const_value, readers_of

_CONVS = frozenset({"Conv2D", "DepthwiseConv2dNative"})
_PADS = frozenset({"Pad", "PadV2"})


def conv_paddings(pad_amounts: np.ndarray, nhwc: bool, padding: str,
                  explicit: list[int]) -> list[int] | None:
    """The 8 ``explicit_paddings`` of a convolution that also does a Pad by ``pad_amounts``
    ([4, 2], in the convolution's data format), or None when that cannot be."""
    if pad_amounts.shape != (4, 2) or pad_amounts.dtype.kind not in "iu":
        return None
    amounts = [int(v) for v in pad_amounts.reshape(-1)]
    batch, channels = (0, 3) if nhwc else (0, 1)
    if min(amounts) < 0 or any(amounts[2 * d] or amounts[2 * d + 1] for d in (batch, channels)):
        return None
    if padding == "VALID":
        return amounts
    if padding == "EXPLICIT" and len(explicit) == 8:
        return [a + int(e) for a, e in zip(amounts, explicit, strict=True)]
    return None  # SAME pads by amounts of its own, computed from the padded size


def _fill_is_zero(graph: Graph, pad: Node) -> bool:
    if pad.op == "Pad":
        return True
    fill = const_value(graph, pad.inputs[2]) if len(pad.inputs) > 2 else None
    return fill is not None and fill.size == 1 and not fill.reshape(-1)[0]


def fold_pads_into_convs(graph: Graph, context: PassContext) -> Graph:
    readers, _ = readers_of(graph)
    replaced: dict[str, Node] = {}
    for conv in graph:
        if conv.op not in _CONVS or len(conv.inputs) < 2:
            continue
        pad = graph.nodes.get(conv.inputs[0].node)
        if (pad is None or pad.op not in _PADS or conv.inputs[0].port != 0
                or pad.name in context.protected_nodes or pad.control_inputs
                or len(readers.get(pad.name, [])) != 1 or not _fill_is_zero(graph, pad)):
            continue
        amounts = const_value(graph, pad.inputs[1])
        if amounts is None:
            continue
        nhwc = conv.attrs.get("data_format", "NHWC") in ("NHWC", b"NHWC")
        padding = conv.attrs.get("padding")
        padding = padding.decode() if isinstance(padding, bytes) else padding
        explicit = [int(v) for v in conv.attrs.get("explicit_paddings", ())]
        paddings = conv_paddings(amounts, nhwc, str(padding), explicit)
        if paddings is None:
            continue
        attrs = {**conv.attrs, "padding": "EXPLICIT", "explicit_paddings": paddings}
        replaced[conv.name] = conv.copy(inputs=[pad.inputs[0], *conv.inputs[1:]], attrs=attrs)
    if not replaced:
        return graph
    return graph.with_nodes([replaced.get(node.name, node) for node in graph])
