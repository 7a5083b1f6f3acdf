"""Op definitions, one module per op family; see ``registry`` for the format."""

from __future__ import annotations

import importlib

from runtime.ops.registry import OP_REGISTRY, ArgDef, OpDef, define

__all__ = ["OP_REGISTRY", "ArgDef", "OpDef", "define", "load_all_op_definitions"]

# Explicit list: an op family exists because it is named here, not because a file is present.
FAMILIES = (
    "array_ops",
    "math_ops",
    "nn_ops",
    "image_ops",
    "resource_ops",
    "function_ops",
    "parsing_ops",
    "control_flow_ops",
    "list_ops",
    "dataflow_ops",
    "string_ops",
    "lookup_ops",
    "sparse_ops",
    "tensor_array_ops",
    "logging_ops",
)

_loaded = False


def load_all_op_definitions() -> None:
    global _loaded
    if not _loaded:
        for family in FAMILIES:
            importlib.import_module(f"runtime.ops.{family}")
        _loaded = True
