"""CPU kernels: nn_ops (matrix products, convolution, pooling, normalization, activations, top-k).

The family is split over sibling modules, imported here so that naming ``nn_ops`` in the kernel
family list registers all of them. This module holds BiasAdd and the top-k kernels.
"""

from __future__ import annotations

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import (  # noqa: F401 - imported for their kernel registrations
    nn_ops_activation,
    nn_ops_conv,
    nn_ops_einsum,
    nn_ops_lrn,
    nn_ops_matmul,
    nn_ops_norm,
    nn_ops_pool,
    nn_ops_separable,
)
from runtime.kernels.math_ops import channel_kernel
from runtime.kernels.math_ops_common import Kernel, Tensor, type_attr
from runtime.kernels.nn_ops_common import scalar_int
from runtime.kernels.registry import NodeContext, kernel

# --- BiasAdd -----------------------------------------------------------------------------------


def _bias_add_channels_first(value: np.ndarray, bias: np.ndarray) -> Tensor:
    # NCHW-style: the channel dim is 1 for rank >= 3, the last dim for a matrix.
    if value.ndim < 3:
        return value + bias
    if bias.ndim != 1 or bias.shape[0] != value.shape[1]:
        raise InvalidArgumentError(
            f"Must provide as many biases as the channel dimension of the input tensor: "
            f"{list(bias.shape)} vs. {list(value.shape)}"
        )
    return value + bias.reshape((-1,) + (1,) * (value.ndim - 2))


@kernel("BiasAdd")
def bias_add(node: NodeContext) -> Kernel:
    fmt = node.attr("data_format", "NHWC")
    if fmt == "NCHW":
        return _bias_add_channels_first
    if fmt != "NHWC":
        raise InvalidArgumentError(f"BiasAdd: invalid data_format {fmt!r}", node=node.name,
                                   op=node.op)
    return _channels_last_bias(node)


def _channels_last_bias(node: NodeContext) -> Kernel:
    # Channels last is numpy broadcasting itself. A shape mismatch raises from numpy; a
    # length-1 bias broadcasts where TF would reject it. A constant bias (the usual case) is
    # added a whole image row at a time (see ``math_ops.channel_kernel``).
    bias = node.constant_input(1)
    if isinstance(bias, np.ndarray) and bias.ndim == 1 and bias.dtype.kind == "f":
        return node.bake(channel_kernel(np.add, bias, vector_first=False), 1)
    return np.add


@kernel("BiasAddV1")
def bias_add_v1(node: NodeContext) -> Kernel:
    return _channels_last_bias(node)


# --- TopK --------------------------------------------------------------------------------------


def top_k(x: np.ndarray, k: int, index_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The k largest entries along the last axis, largest first, ties to the lower index."""
    if k < 0:
        raise InvalidArgumentError(f"Need k >= 0, got {k}")
    if x.ndim < 1:
        raise InvalidArgumentError(f"input must be >= 1-D, got shape {list(x.shape)}")
    n = x.shape[-1]
    if n < k:
        raise InvalidArgumentError(f"input must have at least k columns. Had {n}, needed {k}")
    if k == 1:
        indices = np.argmax(x, axis=-1, keepdims=True)  # the first maximum
    elif k == 0:
        indices = np.zeros(x.shape[:-1] + (0,), dtype=np.int64)
    else:
        # A stable ascending sort of the reversed row, read backwards, orders by value descending
        # and, among equal values, by original index ascending.
        order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
        indices = (n - 1) - order
    values = np.take_along_axis(x, indices, axis=-1)
    return values, indices.astype(index_dtype, copy=False)


@kernel("TopKV2")
def top_k_v2(node: NodeContext) -> Kernel:
    # sorted=False lets TF return the top k in any order; sorted order is one of them.
    index_dtype = type_attr(node, "index_type") or np.dtype(np.int32)
    return lambda x, k: top_k(x, scalar_int(k, "k", "TopKV2"), index_dtype)


@kernel("TopK")
def top_k_v1(node: NodeContext) -> Kernel:
    k = int(node.attr("k"))
    index_dtype = np.dtype(np.int32)
    return lambda x: top_k(x, k, index_dtype)


# --- InTopK ------------------------------------------------------------------------------------


def in_top_k(predictions: np.ndarray, targets: np.ndarray, k: int) -> Tensor:
    """Whether each row's target class is among its k largest predictions (ties included); a row
    with a non-finite prediction or an out-of-range target is False."""
    if predictions.ndim != 2:
        raise InvalidArgumentError(
            f"predictions must be 2-dimensional, got {list(predictions.shape)}"
        )
    if targets.ndim != 1:
        raise InvalidArgumentError(f"targets must be 1-dimensional, got {list(targets.shape)}")
    rows, classes = predictions.shape
    if targets.shape[0] != rows:
        raise InvalidArgumentError(
            f"First dimension of predictions {rows} must match length of targets "
            f"{targets.shape[0]}"
        )
    if classes == 0:
        return np.zeros(rows, dtype=bool)
    valid = (targets >= 0) & (targets < classes)
    safe_targets = np.where(valid, targets, 0)
    target_values = predictions[np.arange(rows), safe_targets]
    larger = (predictions > target_values[:, None]).sum(axis=1)
    finite = np.isfinite(predictions).all(axis=1)
    return valid & finite & (larger < k)


@kernel("InTopKV2")
def in_top_k_v2(node: NodeContext) -> Kernel:
    return lambda predictions, targets, k: in_top_k(
        predictions, targets, scalar_int(k, "k", "InTopKV2")
    )


@kernel("InTopK")
def in_top_k_v1(node: NodeContext) -> Kernel:
    k = int(node.attr("k"))
    return lambda predictions, targets: in_top_k(predictions, targets, k)
