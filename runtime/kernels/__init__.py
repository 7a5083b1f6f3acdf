"""CPU kernels over numpy, one module per op family; see ``registry`` for the contract."""

from __future__ import annotations

import importlib

from runtime.kernels.registry import CPU, KERNELS, KernelError, NodeContext, kernel

__all__ = ["CPU", "KERNELS", "KernelError", "NodeContext", "kernel", "load_all_kernels"]

# Explicit list: a kernel family exists because it is named here, not because a file is present.
FAMILIES = (
    "array_ops",
    "math_ops",
    "nn_ops",
    "image_ops",
    "resource_ops",
    "parsing_ops",
    "sequence_parsing_ops",
    "csv_decode",
    "raw_decode",
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


def load_all_kernels() -> None:
    global _loaded
    if not _loaded:
        for family in FAMILIES:
            importlib.import_module(f"runtime.kernels.{family}")
        _loaded = True


KERNELS.load_all = load_all_kernels
