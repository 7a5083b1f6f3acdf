"""CPU kernels: math_ops element-wise arithmetic, comparisons, logic and bit operations.

Most kernels are numpy ufuncs returned as they are: TF's element-wise ops broadcast like numpy and
never promote (both operands share ``T``), so the ufunc already has TF's semantics. The exceptions
below are where TF differs from numpy: integer division by zero is an error, division and modulo
follow C truncation or floor rules per op, shifts clamp their shift amount, and a few functions
numpy lacks (erf, sigmoid, rsqrt).

IEEE exceptions (division by zero, overflow, invalid) are values, not errors, in TF. The kernels
leave numpy's floating point error state alone: they are meant to run under
``np.errstate(all="ignore")``, set once per plan run rather than once per kernel call.

Reductions and scans live in ``math_ops_reduce``; Cast, Select, AddN, Range and the like in
``math_ops_misc``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.intra_op import run_blocks, threads, worth_threads
from runtime.kernels import (  # noqa: F401 - they register kernels
    math_ops_bincount,
    math_ops_gamma,
    math_ops_misc,
    math_ops_reduce,
    math_ops_segment,
)
from runtime.kernels.logistic import COMPILED as LOGISTIC_COMPILED
from runtime.kernels.logistic import sigmoid_
from runtime.kernels.math_ops_common import (
    BFLOAT16,
    Kernel,
    Tensor,
    by_int_or_float,
    float_kernel,
    is_float,
    is_float_or_complex,
    is_int,
    is_low_float,
    require_types,
    type_attr,
)
from runtime.kernels.math_ops_special import erf, erfc
from runtime.kernels.nn_ops_common import WIDE_MIN_SIZE, tiled
from runtime.kernels.registry import NodeContext, kernel


def _fixed(
    fn: Kernel, allowed: Callable[[np.dtype], bool] | None, what: str
) -> Callable[[NodeContext], Kernel]:
    """A factory returning ``fn`` whatever the attrs, rejecting a known T outside ``allowed``."""

    def factory(node: NodeContext) -> Kernel:
        if allowed is not None:
            require_types(node, allowed, what)
        return fn

    return factory


def _register(table: dict[str, tuple[Kernel, Callable[[np.dtype], bool] | None, str]]) -> None:
    for op, (fn, allowed, what) in table.items():
        kernel(op)(_fixed(fn, allowed, what))


# --- functions numpy lacks --------------------------------------------------------------------


def _sigmoid(x: Tensor) -> Tensor:
    # 1 / (1 + exp(-x)) keeps full relative precision for large negative x, where
    # the tanh form would cancel; exp overflowing to inf gives the right limit 0.
    if LOGISTIC_COMPILED and type(x) is np.ndarray and x.ndim and x.dtype == np.float32:
        return sigmoid_(np.positive(x))
    e = np.exp(np.negative(x))
    e += 1
    if type(e) is np.ndarray:
        return np.reciprocal(e, out=e)
    return np.reciprocal(e)


# numpy's float32 exp takes about as long as this many multiply-adds of a matrix product (about
# 4 ns an element on the 2-core machine measured), the compiled loop (logistic.py) about a third:
# a large Sigmoid is worth spreading over the threads inside a run.
_EXP_MACS = 32
_COMPILED_EXP_MACS = 10


def _sigmoid_of(dtype: np.dtype) -> Kernel:
    """``_sigmoid`` for a known ``dtype``: a third less time on small tensors.

    On an LSTM step's few elements the ufunc calls' fixed costs are the whole cost, and a Python
    scalar operand (converted on every call) or a keyword ``out=`` adds to them. Here the 1 is a
    ready rank-0 array of the dtype, and the calls after the first write into the first one's
    result, passed positionally (one allocation instead of two, which large tensors gain from).
    In numpy these are ``_sigmoid``'s bits. float32 goes through the compiled loop where it was
    built (``logistic.COMPILED``): a copy, then the whole function in place.
    """
    one = np.ones((), dtype)
    negative, exp, add, reciprocal = np.negative, np.exp, np.add, np.reciprocal

    def numpy_rest(e: np.ndarray) -> None:
        exp(e, e)
        add(e, one, e)
        reciprocal(e, e)

    first: Callable[[Tensor], Tensor] = negative
    rest: Callable[[np.ndarray], object] = numpy_rest
    macs = _EXP_MACS
    if LOGISTIC_COMPILED and dtype == np.float32:
        first, rest, macs = np.positive, sigmoid_, _COMPILED_EXP_MACS

    def sigmoid(x: Tensor) -> Tensor:
        e = first(x)
        if type(e) is not np.ndarray:  # a numpy scalar, from a rank-0 input
            return _sigmoid(x)
        if worth_threads(e.size * macs):
            # Elementwise, so the blocks' results are the serial ones bit for bit.
            flat = e.reshape(-1)
            step = -(-flat.size // threads())

            def block(i: int) -> None:
                rest(flat[i * step:(i + 1) * step])

            run_blocks(block, -(-flat.size // step))
            return e
        rest(e)
        return e

    return sigmoid


def _rsqrt(x: Tensor) -> Tensor:
    r = np.sqrt(x)
    if type(r) is np.ndarray:
        return np.reciprocal(r, out=r)
    return np.reciprocal(r)


def _identity(x: Tensor) -> Tensor:
    return x


_FLOAT = (is_float, "a float type")
_FLOAT_C = (is_float_or_complex, "a float or complex type")
_INT = (is_int, "an integer type")

_UNARY: dict[str, tuple[Kernel, Callable[[np.dtype], bool] | None, str]] = {
    "Neg": (np.negative, None, ""),
    "Abs": (np.absolute, None, ""),
    "Square": (np.square, None, ""),
    "Sign": (np.sign, None, ""),
    "Exp": (np.exp, *_FLOAT_C),
    "Expm1": (np.expm1, *_FLOAT_C),
    "Log": (np.log, *_FLOAT_C),
    "Log1p": (np.log1p, *_FLOAT_C),
    "Sqrt": (np.sqrt, *_FLOAT_C),
    "Rsqrt": (_rsqrt, *_FLOAT_C),
    "Reciprocal": (np.reciprocal, *_FLOAT_C),
    "Inv": (np.reciprocal, *_FLOAT_C),
    "Tanh": (np.tanh, *_FLOAT_C),
    "Sin": (np.sin, *_FLOAT_C),
    "Cos": (np.cos, *_FLOAT_C),
    "Tan": (np.tan, *_FLOAT_C),
    "Asin": (np.arcsin, *_FLOAT_C),
    "Acos": (np.arccos, *_FLOAT_C),
    "Atan": (np.arctan, *_FLOAT_C),
    "Sinh": (np.sinh, *_FLOAT_C),
    "Cosh": (np.cosh, *_FLOAT_C),
    "Asinh": (np.arcsinh, *_FLOAT_C),
    "Acosh": (np.arccosh, *_FLOAT_C),
    "Atanh": (np.arctanh, *_FLOAT_C),
    "Erf": (erf, *_FLOAT),
    "Erfc": (erfc, *_FLOAT),
    "Floor": (np.floor, *_FLOAT),
    "Ceil": (np.ceil, *_FLOAT),
    "Rint": (np.rint, *_FLOAT),
    "IsNan": (np.isnan, *_FLOAT),
    "IsInf": (np.isinf, *_FLOAT),
    "IsFinite": (np.isfinite, *_FLOAT),
    "LogicalNot": (np.logical_not, None, ""),
    "Invert": (np.invert, *_INT),
}
_register(_UNARY)


@kernel("Sigmoid")
def _sigmoid_kernel(node: NodeContext) -> Kernel:
    require_types(node, *_FLOAT_C)
    dtype = type_attr(node)
    if dtype is not None and not is_low_float(dtype):
        return _sigmoid_of(dtype)
    # half and bfloat16 are computed in float32: exp(-x) overflows half already at x < -11.
    return float_kernel(node, _sigmoid)


@kernel("Round")
def _round(node: NodeContext) -> Kernel:
    # np.rint rounds half to even, like TF. Integers round to themselves (TF 2.21's CPU kernel
    # returns zeros for integer input, which contradicts the op's documentation).
    return by_int_or_float(node, _identity, np.rint)


# --- binary arithmetic ----------------------------------------------------------------------


def _check_divisor(y: Tensor) -> None:
    if not y.all():
        raise InvalidArgumentError("Integer division by zero")


def _int_truncate_div(x: Tensor, y: Tensor) -> Tensor:
    _check_divisor(y)
    if y.dtype.kind == "u":
        return np.floor_divide(x, y)
    # x - fmod(x, y) is an exact multiple of y, so floor division of it truncates.
    return np.floor_divide(np.subtract(x, np.fmod(x, y)), y)


def _int_floor_div(x: Tensor, y: Tensor) -> Tensor:
    _check_divisor(y)
    return np.floor_divide(x, y)


def _int_floor_mod(x: Tensor, y: Tensor) -> Tensor:
    _check_divisor(y)
    return np.remainder(x, y)


def _int_truncate_mod(x: Tensor, y: Tensor) -> Tensor:
    _check_divisor(y)
    return np.fmod(x, y)


def _float_floor_div(x: Tensor, y: Tensor) -> Tensor:
    # floor(x / y), as TF computes it; np.floor_divide differs (it is consistent with fmod:
    # np.floor_divide(1.0, 0.1) == 9.0 while floor(1.0 / 0.1) == 10.0).
    return np.floor(np.divide(x, y))


def _float_truncate_div(x: Tensor, y: Tensor) -> Tensor:
    return np.trunc(np.divide(x, y))


def _div_no_nan(x: Tensor, y: Tensor) -> Tensor:
    return np.where(y == 0, x.dtype.type(0), np.divide(x, y))


def _mul_no_nan(x: Tensor, y: Tensor) -> Tensor:
    return np.where(y == 0, x.dtype.type(0), np.multiply(x, y))


def _squared_difference(x: Tensor, y: Tensor) -> Tensor:
    d = np.subtract(x, y)
    if d.dtype.kind == "c":
        return np.multiply(d, np.conjugate(d))
    return np.multiply(d, d)


def _xlogy(x: Tensor, y: Tensor) -> Tensor:
    return np.where(x == 0, x.dtype.type(0), np.multiply(x, np.log(y)))


def _xlog1py(x: Tensor, y: Tensor) -> Tensor:
    return np.where(x == 0, x.dtype.type(0), np.multiply(x, np.log1p(y)))


def _xdivy(x: Tensor, y: Tensor) -> Tensor:
    return np.where(x == 0, x.dtype.type(0), np.divide(x, y))


_BINARY: dict[str, tuple[Kernel, Callable[[np.dtype], bool] | None, str]] = {
    "Add": (np.add, None, ""),  # also concatenates strings (object arrays of bytes)
    "AddV2": (np.add, None, ""),
    "Sub": (np.subtract, None, ""),
    "Mul": (np.multiply, None, ""),
    "RealDiv": (np.true_divide, *_FLOAT_C),
    "DivNoNan": (_div_no_nan, *_FLOAT_C),
    "MulNoNan": (_mul_no_nan, *_FLOAT_C),
    "SquaredDifference": (_squared_difference, None, ""),
    "Maximum": (np.maximum, None, ""),  # both propagate NaN, as TF's do
    "Minimum": (np.minimum, None, ""),
    "Atan2": (np.arctan2, *_FLOAT),
    "Xlogy": (_xlogy, *_FLOAT_C),
    "Xlog1py": (_xlog1py, *_FLOAT_C),
    "Xdivy": (_xdivy, *_FLOAT_C),
    "Less": (np.less, None, ""),
    "LessEqual": (np.less_equal, None, ""),
    "Greater": (np.greater, None, ""),
    "GreaterEqual": (np.greater_equal, None, ""),
    "LogicalAnd": (np.logical_and, None, ""),
    "LogicalOr": (np.logical_or, None, ""),
    "BitwiseAnd": (np.bitwise_and, *_INT),
    "BitwiseOr": (np.bitwise_or, *_INT),
    "BitwiseXor": (np.bitwise_xor, *_INT),
}


# --- a constant per-channel vector ---------------------------------------------------------------
# numpy broadcasts a [C] vector over a [..., W, C] feature map with an inner loop only C long,
# slow for the few channels of small convolutional layers; tiling the vector along a whole image
# row (``nn_ops_common.tiled``) makes the inner loop W * C long. Decided once, at plan time, for a
# binary op whose one input is a constant 1-D vector; the other operand's shape is checked per
# call and anything else (small, other shapes, other dtypes) takes the plain ufunc, so the result
# is exactly the ufunc's.

_CHANNEL_OPS = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum"})


def _is_channel_vector(value: Any) -> bool:
    return (
        isinstance(value, np.ndarray)
        and value.ndim == 1
        and value.shape[0] > 0
        and (value.dtype.kind in "fiu" or value.dtype == BFLOAT16)
    )


def channel_kernel(ufunc: Kernel, vector: np.ndarray, vector_first: bool) -> Kernel:
    """``ufunc(x, vector)`` (``ufunc(vector, x)`` with ``vector_first``) for a constant [C]."""
    channels, dtype = vector.shape[0], vector.dtype

    def run(x: Tensor) -> Tensor:
        if (type(x) is not np.ndarray or x.ndim < 3 or x.size < WIDE_MIN_SIZE
                or x.shape[-1] != channels or x.dtype != dtype or not x.flags.c_contiguous):
            return ufunc(vector, x) if vector_first else ufunc(x, vector)
        width = x.shape[-2] * channels
        rows = x.reshape(-1, width)
        row = tiled(vector, x.shape[-2])
        out = np.empty_like(x)
        if vector_first:
            ufunc(row, rows, out=out.reshape(-1, width))
        else:
            ufunc(rows, row, out=out.reshape(-1, width))
        return out

    return run


def _channel_binary(fn: Kernel, allowed: Callable[[np.dtype], bool] | None,
                    what: str) -> Callable[[NodeContext], Kernel]:
    def factory(node: NodeContext) -> Kernel:
        if allowed is not None:
            require_types(node, allowed, what)
        for index in (1, 0):
            vector = node.constant_input(index)
            if _is_channel_vector(vector):
                return node.bake(channel_kernel(fn, vector, vector_first=index == 0), index)
        return fn

    return factory


_register({op: entry for op, entry in _BINARY.items() if op not in _CHANNEL_OPS})
for _op in sorted(_CHANNEL_OPS):
    kernel(_op)(_channel_binary(*_BINARY[_op]))


def _int_pow(x: Tensor, y: Tensor) -> Tensor:
    if y.dtype.kind == "i" and (y < 0).any():
        raise InvalidArgumentError("Integers to negative integer powers are not allowed")
    return np.power(x, y)


@kernel("Pow")
def _pow(node: NodeContext) -> Kernel:
    return by_int_or_float(node, _int_pow, np.power)


@kernel("Div")
def _div(node: NodeContext) -> Kernel:
    # Integer Div truncates (C semantics); float Div is RealDiv.
    return by_int_or_float(node, _int_truncate_div, np.true_divide)


@kernel("TruncateDiv")
def _truncate_div(node: NodeContext) -> Kernel:
    return by_int_or_float(node, _int_truncate_div, _float_truncate_div)


@kernel("FloorDiv")
def _floor_div(node: NodeContext) -> Kernel:
    return by_int_or_float(node, _int_floor_div, _float_floor_div)


@kernel("FloorMod")
def _floor_mod(node: NodeContext) -> Kernel:
    # np.remainder has the divisor's sign, like TF's FloorMod (floats included).
    return by_int_or_float(node, _int_floor_mod, np.remainder)


@kernel("TruncateMod", "Mod")
def _truncate_mod(node: NodeContext) -> Kernel:
    return by_int_or_float(node, _int_truncate_mod, np.fmod)


def _shift(ufunc: np.ufunc) -> Callable[[NodeContext], Kernel]:
    """TF clamps the shift amount to [0, bits - 1] instead of leaving it undefined."""

    def factory(node: NodeContext) -> Kernel:
        require_types(node, *_INT)

        def shift(x: Tensor, y: Tensor) -> Tensor:
            top = x.dtype.itemsize * 8 - 1
            if y.dtype.kind == "u":
                return ufunc(x, np.minimum(y, top))
            return ufunc(x, np.clip(y, 0, top))

        return shift

    return factory


kernel("LeftShift")(_shift(np.left_shift))
kernel("RightShift")(_shift(np.right_shift))


# --- comparisons with attrs -----------------------------------------------------------------


def _equality(ufunc: np.ufunc, mismatch: bool) -> Callable[[NodeContext], Kernel]:
    def factory(node: NodeContext) -> Kernel:
        if node.attr("incompatible_shape_error", True):
            return ufunc
        answer = np.array(mismatch)

        def compare(x: Tensor, y: Tensor) -> Tensor:
            try:
                return ufunc(x, y)
            except ValueError:
                try:
                    np.broadcast_shapes(x.shape, y.shape)
                except ValueError:
                    # Shapes that cannot broadcast compare unequal as a whole (a scalar).
                    return answer
                raise

        return compare

    return factory


kernel("Equal")(_equality(np.equal, False))
kernel("NotEqual")(_equality(np.not_equal, True))


@kernel("ApproximateEqual")
def _approximate_equal(node: NodeContext) -> Kernel:
    tolerance = float(node.attr("tolerance", 1e-5))

    def approximate_equal(x: Tensor, y: Tensor) -> Tensor:
        if x.shape != y.shape:
            raise InvalidArgumentError(
                f"x and y must be of the same shape. x shape: {list(x.shape)}. "
                f"y shape: {list(y.shape)}"
            )
        return np.less(np.abs(np.subtract(x, y)), x.dtype.type(tolerance))

    return approximate_equal
