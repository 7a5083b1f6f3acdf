"""Definitions of the ops only this runtime's rewrites emit (TF has no graph op for them).

Imported by the passes that create them, so that any graph containing one has its definition
registered. Their kernels live with their families in ``runtime.kernels``.
"""

from __future__ import annotations

from runtime.ops import OP_REGISTRY, define, load_all_op_definitions

load_all_op_definitions()

# Layer normalization over the last axis, as Keras writes it:
#     inv = rsqrt(mean((x - mean(x))^2) + epsilon) * scale
#     y = x * inv + (offset - mean(x) * inv)
# (means over the last axis, kept as a size-1 axis; scale and offset broadcast against x).
if "_FusedLayerNorm" not in OP_REGISTRY:
    define("_FusedLayerNorm", inputs="x, scale, offset", outputs="y", attrs={"epsilon": 0.001})

# GatherV2 (batch_dims 0) whose negative indices count from the end of the axis, once: what
# Keras' Embedding computes with Less/AddV2/SelectV2 before its GatherV2.
if "_GatherWrapNegative" not in OP_REGISTRY:
    define("_GatherWrapNegative", inputs="params, indices, axis", outputs="output")

# Reshape to a shape computed from the input's own dims: ``template`` holds one
# (coefficient, axes) pair per output dim, the dim being coefficient * prod(input.shape[axes])
# (a constant when axes is empty; -1 asks Reshape to infer it).
if "_ReshapeByTemplate" not in OP_REGISTRY:
    define("_ReshapeByTemplate", inputs="tensor", outputs="output", attrs={"template": ()})

# ``np.repeat`` along every axis at once: ``repeats`` holds one count per axis of ``input``
# (what ``tf.repeat`` by a constant computes, one axis at a time).
if "_RepeatAxes" not in OP_REGISTRY:
    define("_RepeatAxes", inputs="input", outputs="output", attrs={"repeats": ()})
