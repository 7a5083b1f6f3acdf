"""Op definitions: the TensorArray family, as TF1's ``dynamic_rnn``, ``map_fn`` and loops use it.

A TensorArray lives for one run: ``TensorArrayV3`` makes it and outputs its handle and a *flow*
scalar. Every op that writes returns a new flow value, and every op that reads takes one, so the
flow edges order the accesses (a loop carries the flow, not the array).

All of them are stateful, as TensorFlow 2.15 registers the V3 ops (its V2 accessors are not
marked, and are here too): an access changes the array, so the optimizer must neither fold nor
merge two of them. Two equal-looking reads of a ``clear_after_read`` array are not one read: the
second one fails in TensorFlow.
"""

from __future__ import annotations

from typing import Any

from runtime.ops.registry import define

# ``element_shape`` attrs default to the unknown shape (None); see runtime.attrs.
_CREATE_ATTRS: dict[str, Any] = {
    "element_shape": None,
    "dynamic_size": False,
    "clear_after_read": True,
    "tensor_array_name": "",
}

define(
    "TensorArrayV3",
    inputs="size",
    outputs="handle, flow",
    attrs={**_CREATE_ATTRS, "identical_element_shapes": False},
    stateful=True,
)
# V2 handles are string tensors, and TensorArrayV2 has no flow output; the accessors are the V3
# ones under another name.
define("TensorArrayV2", inputs="size", outputs="handle", attrs=_CREATE_ATTRS, stateful=True)

for _version in ("V2", "V3"):
    define(
        f"TensorArrayWrite{_version}",
        inputs="handle, index, value, flow_in",
        outputs="flow_out",
        stateful=True,
    )
    define(
        f"TensorArrayRead{_version}",
        inputs="handle, index, flow_in",
        outputs="value",
        stateful=True,
    )
    define(
        f"TensorArrayGather{_version}",
        inputs="handle, indices, flow_in",
        outputs="value",
        attrs={"element_shape": None},
        stateful=True,
    )
    define(
        f"TensorArrayScatter{_version}",
        inputs="handle, indices, value, flow_in",
        outputs="flow_out",
        stateful=True,
    )
    define(
        f"TensorArrayConcat{_version}",
        inputs="handle, flow_in",
        outputs="value, lengths",
        attrs={"element_shape_except0": None},
        stateful=True,
    )
    define(
        f"TensorArraySplit{_version}",
        inputs="handle, value, lengths, flow_in",
        outputs="flow_out",
        stateful=True,
    )
    define(f"TensorArraySize{_version}", inputs="handle, flow_in", outputs="size", stateful=True)
    define(f"TensorArrayClose{_version}", inputs="handle", stateful=True)
