"""Activation kernels (Relu, Relu6, Elu, Selu, LeakyRelu, Softplus, Softsign, Softmax, LogSoftmax)
and the in-place activations that the fused matmul/convolution kernels apply to their own output.

Kernels run under ``np.errstate(all="ignore")`` (see ``runtime.plan``), but the formulas still avoid
overflowing intermediates (``exp`` of large inputs) so that they stay exact where TF is.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels import clamps, logistic
from runtime.kernels.math_ops_common import (
    FLOAT32,
    Kernel,
    Tensor,
    float_kernel,
    reduce_last_axis,
    type_attr,
)
from runtime.kernels.math_ops_special import erfc
from runtime.kernels.nn_ops_common import LOW_FLOATS
from runtime.kernels.registry import NodeContext, kernel

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717
_SQRT_HALF = math.sqrt(0.5)
_GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)


@kernel("Relu")
def relu(node: NodeContext) -> Kernel:
    return clamps.relu


@kernel("Relu6")
def relu6(node: NodeContext) -> Kernel:
    return clamps.relu6


def _elu(x: np.ndarray) -> np.ndarray:
    # expm1 of min(x, 0): the positive branch never evaluates an overflowing exponential.
    return np.where(x < 0, np.expm1(np.minimum(x, 0)), x)


def _selu(x: np.ndarray) -> Tensor:
    negative = np.expm1(np.minimum(x, 0))
    negative *= _SELU_ALPHA
    return np.where(x < 0, negative, x) * x.dtype.type(_SELU_SCALE)


def _softsign(x: np.ndarray) -> Tensor:
    denominator = np.abs(x)
    denominator += 1
    return x / denominator


@functools.cache
def _softplus_threshold(dtype: np.dtype) -> float:
    # TF's cut-offs: above -(log(eps) + 2) softplus(x) is x, below log(eps) + 2 it is exp(x),
    # both to within the type's epsilon.
    eps = ml_dtypes.finfo(dtype).eps  # type: ignore[no-untyped-call]  # ml_dtypes is untyped
    return math.log(float(eps)) + 2.0


def _softplus(x: np.ndarray) -> np.ndarray:
    threshold = _softplus_threshold(x.dtype)
    compute = x.astype(FLOAT32) if x.dtype in LOW_FLOATS else x
    exp = np.exp(np.minimum(compute, -threshold))
    middle = np.log1p(exp)
    result = np.where(compute > -threshold, compute, np.where(compute < threshold, exp, middle))
    return result.astype(x.dtype, copy=False)


def _leaky_relu(alpha: float, dtype: np.dtype | None = None) -> Kernel:
    # alpha in T: a Python float would promote bfloat16 to float32.
    if dtype is not None:
        a = dtype.type(alpha)
        if 0.0 <= alpha <= 1.0:
            # max(x, alpha * x) equals TF's select(x > 0, x, alpha * x) for alpha in [0, 1].
            return lambda x: np.maximum(x, x * a)
        return lambda x: np.where(x > 0, x, x * a)
    if 0.0 <= alpha <= 1.0:
        return lambda x: np.maximum(x, x * x.dtype.type(alpha))
    return lambda x: np.where(x > 0, x, x * x.dtype.type(alpha))


# Elu, Selu and Softsign of half/bfloat16 run in float32: numpy's half transcendental loops are
# slow and bfloat16 has none.


@kernel("Elu")
def elu(node: NodeContext) -> Kernel:
    return float_kernel(node, _elu)


@kernel("Selu")
def selu(node: NodeContext) -> Kernel:
    return float_kernel(node, _selu)


@kernel("Softsign")
def softsign(node: NodeContext) -> Kernel:
    return float_kernel(node, _softsign)


@kernel("Softplus")
def softplus(node: NodeContext) -> Kernel:
    return _softplus


@kernel("LeakyRelu")
def leaky_relu(node: NodeContext) -> Kernel:
    return _leaky_relu(float(node.attr("alpha")), type_attr(node))


# --- softmax -----------------------------------------------------------------------------------


def _check_logits(logits: np.ndarray) -> None:
    if logits.ndim < 1:
        raise InvalidArgumentError(
            f"logits must have >= 1 dimension, got shape {list(logits.shape)}"
        )


def _softmax(logits: np.ndarray) -> Tensor:
    if logits.ndim < 1 or logits.size == 0:
        _check_logits(logits)
        return logits.copy()
    dtype = logits.dtype
    x = logits.astype(FLOAT32) if dtype in LOW_FLOATS else logits
    if x.size < _MANY_SHORT_ROWS:
        e = x - np.maximum.reduce(x, axis=-1, keepdims=True)
        np.exp(e, out=e)
        e /= np.add.reduce(e, axis=-1, keepdims=True)
    else:
        e = x - reduce_last_axis(np.maximum, x)[..., None]
        np.exp(e, out=e)
        e /= reduce_last_axis(np.add, e)[..., None]
    return e if e.dtype == dtype else e.astype(dtype)


_MANY_SHORT_ROWS = 512  # below this many elements, numpy's own reductions are cheapest


def _log_softmax(logits: np.ndarray) -> Tensor:
    if logits.ndim < 1 or logits.size == 0:
        _check_logits(logits)
        return logits.copy()
    x = logits.astype(FLOAT32) if logits.dtype in LOW_FLOATS else logits
    shifted = x - reduce_last_axis(np.maximum, x)[..., None]
    shifted -= np.log(reduce_last_axis(np.add, np.exp(shifted)))[..., None]
    return shifted.astype(logits.dtype, copy=False)


@kernel("Softmax")
def softmax(node: NodeContext) -> Kernel:
    return _softmax


@kernel("LogSoftmax")
def log_softmax(node: NodeContext) -> Kernel:
    return _log_softmax


# --- in-place activations for fused kernels ----------------------------------------------------
# Each takes a float32/float64 array the fused kernel owns and returns the activated array
# (in place where numpy allows).

InPlace = Callable[[np.ndarray], np.ndarray]


# TensorFlow's fused kernels clamp with a max that maps NaN to 0, unlike its unfused Relu (which
# keeps NaN); models' outputs depend on it (e.g. 0/0 from an all-padding row feeding a Dense+relu).
_relu_ = clamps.relu_
_relu6_ = clamps.relu6_


def _tanh_(y: np.ndarray) -> Tensor:
    return np.tanh(y, out=y)


def _gelu_exact_(y: np.ndarray) -> np.ndarray:
    # 0.5 * y * erfc(-y * sqrt(0.5)), as tf.nn.gelu computes it: erfc keeps the negative tail's
    # relative precision, which 1 + erf(y * sqrt(0.5)) would cancel away.
    cdf = erfc(y * y.dtype.type(-_SQRT_HALF))
    cdf *= 0.5
    y *= cdf
    return y


def _gelu_approximate_(y: np.ndarray) -> np.ndarray:
    inner = y * y
    inner *= 0.044715
    inner += 1
    inner *= y
    inner *= _GELU_TANH_SCALE
    np.tanh(inner, out=inner)
    inner += 1
    inner *= 0.5
    y *= inner
    return y


_FUSED: dict[str, InPlace] = {
    "Relu": _relu_,
    "Relu6": _relu6_,
    "Elu": _elu,
    "Selu": _selu,
    "Tanh": _tanh_,
    "Sigmoid": logistic.sigmoid_,
    "GeluExact": _gelu_exact_,
    "Swish": logistic.swish_,
    "GeluApproximate": _gelu_approximate_,
    "Identity": lambda y: y,
}
ACTIVATION_NAMES = frozenset(_FUSED) | {"LeakyRelu"}


def fused_activation(name: str, leakyrelu_alpha: float) -> InPlace:
    """The in-place form of a ``fused_ops`` activation name."""
    if name == "LeakyRelu":
        return _leaky_relu(leakyrelu_alpha)
    try:
        return _FUSED[name]
    except KeyError:
        raise UnimplementedError(f"unsupported fused activation {name!r}") from None
