"""CPU kernel: Reverse, the TF1 form of ReverseV2 that names the dimensions to flip with one bool
per dimension (``reverse_op.cc``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.registry import NodeContext, kernel

_MAX_RANK = 8  # TensorFlow instantiates the kernel for ranks 0..8 only


def _reverse(x: np.ndarray, dims: np.ndarray) -> np.ndarray:
    # Checked before anything else in TensorFlow, so an empty leading dimension is an error even
    # where there would be nothing to flip.
    if x.ndim > 0 and x.shape[0] == 0:
        raise InvalidArgumentError("Invalid input first dimension. Found 0.")
    if x.ndim == 0:
        return x
    if dims.ndim != 1:
        raise InvalidArgumentError(f"'dims' must be 1-dimension, not {dims.ndim}")
    if dims.shape[0] != x.ndim:
        raise InvalidArgumentError(
            "'dims' must have the same number of values as 'input' has dimensions. 'input' has "
            f"{x.ndim}'dims' has {dims.shape[0]} values"
        )
    if x.ndim > _MAX_RANK:
        raise UnimplementedError("reverse is not implemented for tensors of rank > 8.")
    axes = tuple(i for i, flip in enumerate(dims.tolist()) if flip)
    # A view: tensors are never written to once produced.
    return np.flip(x, axes) if axes else x


@kernel("Reverse")
def reverse(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return _reverse
