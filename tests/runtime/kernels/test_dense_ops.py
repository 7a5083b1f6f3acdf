"""Dense-layer, attention and normalization kernels on the paths the serving graphs take: fused
matmuls with baked weights and rank-3 inputs, the exact GELU, the fused layer norm, softmax over
many short rows and Einsum's direct matmul path, each against float64 numpy references or the
unfused kernels they replace."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from runtime.dtypes import DataType
from runtime.errors import OpError
from runtime.kernels.registry import instantiate
from runtime.optimize import internal_ops  # noqa: F401 - defines the internal ops

F32 = DataType.DT_FLOAT
RNG = np.random.default_rng(11)
_erfc = np.vectorize(math.erfc)


@pytest.fixture(autouse=True)
def _ieee_quiet() -> Iterator[None]:
    with np.errstate(all="ignore"):
        yield


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _gelu64(y: np.ndarray) -> np.ndarray:
    y64 = y.astype(np.float64)
    return 0.5 * y64 * _erfc(-y64 / math.sqrt(2))


# --- _FusedMatMul -------------------------------------------------------------------------------


def _fused(fused_ops: list[str], baked: dict[int, np.ndarray] | None = None, **attrs: object):
    return instantiate(
        "_FusedMatMul",
        {"T": F32, "num_args": 1, "fused_ops": fused_ops, **attrs},
        constant_inputs=baked,
    )


@pytest.mark.parametrize("baked", [False, True])
@pytest.mark.parametrize("shape", [(5, 6), (2, 3, 6), (2, 1, 4, 6)])
@pytest.mark.parametrize("activation", [None, "Relu", "Tanh", "GeluExact"])
def test_fused_matmul_over_the_last_axis(baked, shape, activation) -> None:
    a, w, bias = _normal(*shape) * 2, _normal(6, 4), _normal(4)
    fused_ops = ["BiasAdd"] + ([activation] if activation else [])
    kernel = _fused(fused_ops, {1: w, 2: bias} if baked else None)
    result = kernel(a, w, bias)
    y = a.astype(np.float64) @ w + bias
    expected = {None: y, "Relu": np.maximum(y, 0), "Tanh": np.tanh(y),
                "GeluExact": _gelu64(y)}[activation]
    assert result.dtype == np.float32 and result.shape == shape[:-1] + (4,)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("baked", [False, True])
def test_fused_matmul_transposed_weights_and_errors(baked) -> None:
    a, w, bias = _normal(3, 6), _normal(4, 6), _normal(4)
    kernel = _fused(["BiasAdd", "Relu"], {1: w, 2: bias} if baked else None, transpose_b=True)
    np.testing.assert_allclose(kernel(a, w, bias), np.maximum(a @ w.T + bias, 0), rtol=1e-5)
    with pytest.raises((OpError, ValueError)):
        kernel(_normal(3, 5), w, bias)  # inner dims differ
    with pytest.raises(OpError):
        kernel(_normal(6), w, bias)  # rank 1


def test_fused_matmul_bakes_only_what_it_can_check() -> None:
    w = _normal(6, 4)
    # A bias of the wrong length is not baked: the call reports it as the unbaked kernel does.
    kernel = _fused(["BiasAdd"], {1: w, 2: _normal(5)})
    with pytest.raises(OpError, match="bias"):
        kernel(_normal(2, 6), w, _normal(5))
    # Half precision keeps the unbaked float32-accumulating path.
    half = _fused(["BiasAdd"], {1: w.astype(np.float16), 2: _normal(4).astype(np.float16)})
    assert half(_normal(2, 6).astype(np.float16), w.astype(np.float16),
                _normal(4).astype(np.float16)).dtype == np.float16


def test_gelu_exact_keeps_the_negative_tail() -> None:
    # 1 + erf(y / sqrt(2)) cancels to nothing here; tf.nn.gelu's erfc form does not. (What is
    # left is float32's rounding of y / sqrt(2), magnified by erfc's slope far out.)
    y = np.array([[-9.0, -7.5, -5.0, -2.0, 0.0, 0.5, 3.0, 12.0]], np.float32)
    kernel = _fused(["BiasAdd", "GeluExact"])
    result = kernel(y, np.eye(8, dtype=np.float32), np.zeros(8, np.float32))
    np.testing.assert_allclose(result, _gelu64(y), rtol=1e-5, atol=0)


# --- _FusedLayerNorm ----------------------------------------------------------------------------


def _composed_layer_norm(x, gamma, beta, epsilon):
    """The unfused kernels, in the order Keras' graph runs them."""
    axes = np.array([-1], np.int32)
    mean = instantiate("Mean", {"keep_dims": True})(x, axes)
    var = instantiate("Mean", {"keep_dims": True})(
        instantiate("SquaredDifference")(x, mean), axes)
    inv = instantiate("Rsqrt")(var + np.float32(epsilon)) * gamma
    return x * inv + (instantiate("Neg")(mean) * inv + beta)


@pytest.mark.parametrize("baked", [False, True])
@pytest.mark.parametrize("shape, gamma_shape, beta_shape", [
    ((4, 6, 16), (16,), (16,)), ((4, 6, 16), (1, 1, 16), (16,)), ((3, 5), (5,), (5,)),
    ((2, 3, 7), (7,), (1, 7)),
    ((4, 6), (1,), (6,)), ((4, 1), (1,), (5,)), ((4, 1), (5,), (1,)),  # size-1 broadcasts
    ((1, 16), (1, 1, 16), (16,)),  # parameters of higher rank than x: the result takes theirs
])
def test_fused_layer_norm_matches_its_composition(baked, shape, gamma_shape, beta_shape) -> None:
    x = _normal(*shape) * 3 + 1
    gamma, beta = _normal(*gamma_shape), _normal(*beta_shape)
    kernel = instantiate("_FusedLayerNorm", {"epsilon": 1e-3, "T": F32},
                         constant_inputs={1: gamma, 2: beta} if baked else None)
    result = kernel(x, gamma, beta)
    expected = _composed_layer_norm(x, gamma, beta, 1e-3)
    assert result.dtype == np.float32 and result.shape == expected.shape
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    x64 = x.astype(np.float64)
    reference = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(result, reference * gamma + beta, rtol=1e-4, atol=1e-4)


def test_fused_layer_norm_rejects_integers() -> None:
    kernel = instantiate("_FusedLayerNorm", {"epsilon": 1e-3})
    with pytest.raises(OpError):
        kernel(np.ones((2, 3), np.int32), np.ones(3, np.int32), np.zeros(3, np.int32))


# --- Softmax over many short rows -----------------------------------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(300, 2, 6), (64, 16), (40, 3), (2, 5), (8, 40)])
def test_softmax_rows(op, shape) -> None:
    x = _normal(*shape) * 4
    x[0, ..., 0] = 80.0
    result = instantiate(op)(x)
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(-1, keepdims=True)
    log = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    expected = log if op == "LogSoftmax" else np.exp(log)
    assert result.dtype == np.float32 and result.shape == shape
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    x[1, ..., 1] = np.nan
    assert np.isnan(instantiate(op)(x)[1]).all()


# --- Einsum's direct matmul path ------------------------------------------------------------------


@pytest.mark.parametrize("equation, shapes", [
    ("BTNH,BSNH->BNTS", [(3, 6, 2, 8), (3, 5, 2, 8)]),
    ("BNTS,BSNH->BTNH", [(3, 2, 6, 5), (3, 5, 2, 8)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
])
def test_einsum_attention_equations(equation, shapes) -> None:
    operands = [_normal(*s) for s in shapes]
    kernel = instantiate("Einsum", {"equation": equation, "T": F32})
    expected = np.einsum(equation, *(o.astype(np.float64) for o in operands))
    np.testing.assert_allclose(kernel(*operands), expected, rtol=1e-5, atol=1e-5)
    # Mixed or half precision operands take the general path and still agree.
    half = kernel(*(o.astype(np.float16) for o in operands))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float64), expected, rtol=2e-2, atol=2e-2)


def test_einsum_batch_mismatch_is_an_error() -> None:
    kernel = instantiate("Einsum", {"equation": "bij,bjk->bik"})
    with pytest.raises(OpError, match="batch dimensions"):
        kernel(_normal(2, 3, 4), _normal(3, 4, 5))
    with pytest.raises(OpError, match="contracted"):
        kernel(_normal(2, 3, 4), _normal(2, 5, 5))
