"""nn_ops kernels against TensorFlow's recorded results; the fused internal ops against the
composition of the unfused kernels; Einsum and Conv2D against numpy references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from runtime.dtypes import DataType
from runtime.errors import OpError
from runtime.kernels.registry import instantiate
from tests.runtime.kernels.cases_nn_ops import CASES
from tests.runtime.kernels.check import check_case, kernel_attrs, load_recording

RECORDING = load_recording("nn_ops")
F32 = DataType.DT_FLOAT

# Kernels that are numpy functions themselves: numpy's ValueError reaches the plan, which turns it
# into InvalidArgument; everything else must raise a status error directly.
_NUMPY_REJECTIONS = {"MatMul_mismatch", "BiasAdd_mismatch"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case) -> None:
    check_case(case, RECORDING)


@pytest.mark.parametrize(
    "case", [c for c in CASES if f"{c.name}/error" in RECORDING], ids=lambda c: c.name
)
def test_rejections_are_op_errors(case) -> None:
    attrs = kernel_attrs(case)
    expected = (OpError, ValueError) if case.name in _NUMPY_REJECTIONS else OpError
    with pytest.raises(expected):
        instantiate(case.op, attrs, num_outputs=2)(*case.flat_inputs())


def test_every_recorded_case_has_a_result() -> None:
    for case in CASES:
        assert any(key.startswith(f"{case.name}/") for key in RECORDING), case.name


# --- TopKV2 sorted=False -----------------------------------------------------------------------


def test_top_k_unsorted_returns_the_sorted_top_k() -> None:
    # TF returns heap order here; any order of the same entries is allowed by the op's contract.
    x = np.random.default_rng(3).integers(0, 5, (4, 40)).astype(np.float32)
    unsorted_values, unsorted_indices = instantiate("TopKV2", {"sorted": False})(x, np.int32(7))
    values, indices = instantiate("TopKV2", {"sorted": True})(x, np.int32(7))
    np.testing.assert_array_equal(np.sort(unsorted_indices, -1), np.sort(indices, -1))
    np.testing.assert_array_equal(np.sort(unsorted_values, -1), np.sort(values, -1))


def test_top_k_large_row_prefers_lower_indices() -> None:
    x = np.zeros((2, 1000), np.float32)
    x[0, [10, 500, 900]] = 1.0
    values, indices = instantiate("TopKV2")(x, np.int32(5))
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(indices[0], [10, 500, 900, 0, 1])
    np.testing.assert_array_equal(indices[1], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(values[0], [1, 1, 1, 0, 0])


# --- fused ops against their unfused composition -----------------------------------------------

RNG = np.random.default_rng(5)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _activation(name: str, y: np.ndarray, alpha: float = 0.2) -> np.ndarray:
    y64 = y.astype(np.float64)
    if name in ("Relu", "Relu6", "Elu", "Selu", "LeakyRelu"):
        attrs = {"alpha": alpha} if name == "LeakyRelu" else {}
        return instantiate(name, attrs)(y)
    erf = np.vectorize(math.erf)
    reference = {
        "Tanh": np.tanh(y64),
        "Sigmoid": 1 / (1 + np.exp(-y64)),
        "Swish": y64 / (1 + np.exp(-y64)),
        "GeluExact": 0.5 * y64 * (1 + erf(y64 / math.sqrt(2))),
        "GeluApproximate": 0.5 * y64 * (
            1 + np.tanh(math.sqrt(2 / math.pi) * (y64 + 0.044715 * y64**3))
        ),
    }
    return reference[name].astype(y.dtype)


ACTIVATIONS = ["Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Tanh", "Sigmoid", "Swish",
               "GeluExact", "GeluApproximate"]


@pytest.mark.parametrize("activation", [None, *ACTIVATIONS])
@pytest.mark.parametrize("transpose", [(False, False), (True, False), (False, True)])
def test_fused_matmul_bias_activation(activation, transpose) -> None:
    ta, tb = transpose
    a, b, bias = _normal(4, 6) * 2, _normal(6, 5), _normal(5)
    fused_ops = ["BiasAdd"] + ([activation] if activation else [])
    kernel = instantiate("_FusedMatMul", {"transpose_a": ta, "transpose_b": tb, "T": F32,
                                          "num_args": 1, "fused_ops": fused_ops,
                                          "leakyrelu_alpha": 0.3})
    result = kernel(a.T.copy() if ta else a, b.T.copy() if tb else b, bias)
    expected = instantiate("BiasAdd")(instantiate("MatMul")(a, b), bias)
    if activation:
        expected = _activation(activation, expected, alpha=0.3)
    assert result.dtype == np.float32 and result.shape == (4, 5)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_fused_matmul_half_precision() -> None:
    a, b, bias = _normal(3, 8).astype(np.float16), _normal(8, 4).astype(np.float16), _normal(4)
    kernel = instantiate("_FusedMatMul", {"num_args": 1, "fused_ops": ["BiasAdd", "Relu"]})
    result = kernel(a, b, bias.astype(np.float16))
    expected = np.maximum(a.astype(np.float32) @ b.astype(np.float32) + bias, 0)
    assert result.dtype == np.float16
    np.testing.assert_allclose(result.astype(np.float32), expected, rtol=1e-2, atol=1e-2)


def test_fused_matmul_rejects_unknown_fusion() -> None:
    with pytest.raises(OpError):
        instantiate("_FusedMatMul", {"num_args": 1, "fused_ops": ["BiasAdd", "Softmax"]})
    with pytest.raises(OpError):
        instantiate("_FusedMatMul", {"num_args": 2, "fused_ops": ["BiasAdd"]})


def _conv_attrs(data_format: str = "NHWC", **extra: object) -> dict:
    strides = [1, 1, 2, 2] if data_format == "NCHW" else [1, 2, 2, 1]
    return {"strides": strides, "padding": "SAME", "data_format": data_format, "T": F32, **extra}


def _batch_norm_args(c: int) -> list[np.ndarray]:
    return [_normal(c), _normal(c), _normal(c), (RNG.random(c) + 0.5).astype(np.float32)]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"],
                                       ["BiasAdd", "Elu"], ["BiasAdd", "LeakyRelu"],
                                       ["FusedBatchNorm"], ["FusedBatchNorm", "Relu"],
                                       ["BiasAdd", "Add", "Relu"]])
def test_fused_conv2d(data_format, fused_ops) -> None:
    nhwc = data_format == "NHWC"
    x = _normal(2, 7, 7, 5) if nhwc else _normal(2, 5, 7, 7)
    f = _normal(3, 3, 5, 6)
    args = _batch_norm_args(6) if fused_ops[0] == "FusedBatchNorm" else [_normal(6)]
    side = _normal(2, 4, 4, 6) if nhwc else _normal(2, 6, 4, 4)
    if "Add" in fused_ops:
        args.append(side)
    attrs = _conv_attrs(data_format, fused_ops=fused_ops, num_args=len(args), epsilon=0.01,
                        TArgs=[F32] * len(args))
    result = instantiate("_FusedConv2D", attrs)(x, f, *args)

    y = instantiate("Conv2D", _conv_attrs(data_format))(x, f)
    if fused_ops[0] == "BiasAdd":
        y = instantiate("BiasAdd", {"data_format": data_format})(y, args[0])
    else:
        y = instantiate("FusedBatchNormV3", {"is_training": False, "epsilon": 0.01,
                                              "data_format": data_format},
                        num_outputs=6)(y, *args[:4])[0]
    if "Add" in fused_ops:
        y = y + side
    if fused_ops[-1] not in ("BiasAdd", "FusedBatchNorm", "Add"):
        y = _activation(fused_ops[-1], y)
    np.testing.assert_allclose(result, y, rtol=1e-5, atol=1e-5)


def test_fused_depthwise_conv2d() -> None:
    x, f, bias = _normal(1, 6, 6, 4), _normal(3, 3, 4, 2), _normal(8)
    attrs = _conv_attrs(fused_ops=["BiasAdd", "Relu6"], num_args=1)
    result = instantiate("_FusedDepthwiseConv2dNative", attrs)(x, f, bias)
    y = instantiate("DepthwiseConv2dNative", _conv_attrs())(x, f)
    np.testing.assert_allclose(result, np.clip(y + bias, 0, 6), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_fused_batch_norm_ex(data_format) -> None:
    x = _normal(2, 3, 3, 4) if data_format == "NHWC" else _normal(2, 4, 3, 3)
    side = _normal(*x.shape)
    stats = _batch_norm_args(4)
    common = {"is_training": False, "epsilon": 0.001, "data_format": data_format}
    fused = instantiate("_FusedBatchNormEx", {**common, "num_side_inputs": 1,
                                              "activation_mode": "Relu"}, num_outputs=6)
    outputs = fused(x, *stats, side)
    plain = instantiate("FusedBatchNormV3", common, num_outputs=6)(x, *stats)
    np.testing.assert_allclose(outputs[0], np.maximum(plain[0] + side, 0), rtol=1e-5, atol=1e-5)
    for ours, theirs in zip(outputs[1:], plain[1:]):
        np.testing.assert_array_equal(ours, theirs)


# --- Einsum against np.einsum ------------------------------------------------------------------


def _random_equations(count: int) -> list[tuple[str, list[tuple[int, ...]]]]:
    rng = np.random.default_rng(17)
    sizes = dict(zip("abcdefg", (2, 3, 4, 1, 5, 2, 3)))
    equations = []
    while len(equations) < count:
        labels = list(rng.permutation(list(sizes))[: rng.integers(1, 7)])
        a = [c for c in labels if rng.random() < 0.7]
        b = [c for c in labels if rng.random() < 0.7]
        if not a or not b:
            continue
        used = sorted(set(a) | set(b))
        out = [c for c in rng.permutation(used) if rng.random() < 0.6]
        equation = f"{''.join(a)},{''.join(b)}->{''.join(out)}"
        equations.append((equation, [tuple(sizes[c] for c in a), tuple(sizes[c] for c in b)]))
    return equations


@pytest.mark.parametrize("equation,shapes", _random_equations(120))
def test_einsum_matches_numpy(equation, shapes) -> None:
    rng = np.random.default_rng(len(equation))
    operands = [rng.standard_normal(s) for s in shapes]
    result = instantiate("Einsum", {"equation": equation})(*operands)
    np.testing.assert_allclose(result, np.einsum(equation, *operands), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("equation,shapes", [
    ("...ij,jk->...ik", [(2, 3, 4, 5), (5, 6)]),
    ("ij,...jk->...ik", [(4, 5), (2, 5, 6)]),
    ("...ij,...jk->...ik", [(3, 1, 4, 5), (2, 5, 6)]),
    ("a...,a...->...", [(3, 2, 4), (3, 1, 4)]),
    ("...a,b...->...ab", [(2, 3), (4, 2)]),
])
def test_einsum_ellipsis_matches_numpy(equation, shapes) -> None:
    rng = np.random.default_rng(1)
    operands = [rng.standard_normal(s) for s in shapes]
    kernel = instantiate("Einsum", {"equation": equation})
    expected = np.einsum(equation, *operands)
    np.testing.assert_allclose(kernel(*operands), expected, rtol=1e-10, atol=1e-10)
    # The plan is cached per operand ranks; a second call with other sizes reuses it.
    bigger = [rng.standard_normal(tuple(d + 1 if d > 1 else d for d in s)) for s in shapes]
    expected = np.einsum(equation, *bigger)
    np.testing.assert_allclose(kernel(*bigger), expected, rtol=1e-10, atol=1e-10)


# --- Conv2D against a direct numpy definition --------------------------------------------------


def _reference_conv(x, f, strides, dilations, pads):
    n, c = x.shape[0], x.shape[3]
    kh, kw, fc, o = f.shape
    groups = c // fc
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[1] - eh) // strides[0] + 1
    ow = (xp.shape[2] - ew) // strides[1] + 1
    out = np.zeros((n, oh, ow, o))
    og = o // groups
    for y, z in itertools.product(range(oh), range(ow)):
        patch = xp[:, y * strides[0]:y * strides[0] + eh:dilations[0],
                   z * strides[1]:z * strides[1] + ew:dilations[1], :]
        for g in range(groups):
            out[:, y, z, g * og:(g + 1) * og] = np.tensordot(
                patch[..., g * fc:(g + 1) * fc], f[..., g * og:(g + 1) * og], axes=3
            )
    return out


@pytest.mark.parametrize("channels", [2, 16])
@pytest.mark.parametrize("strides,dilations", [((1, 1), (1, 1)), ((2, 3), (1, 1)),
                                               ((1, 2), (2, 1))])
@pytest.mark.parametrize("groups", [1, 2])
def test_conv2d_matches_direct_definition(channels, strides, dilations, groups) -> None:
    rng = np.random.default_rng(channels + groups)
    x = rng.standard_normal((2, 9, 8, channels)).astype(np.float32)
    f = rng.standard_normal((3, 2, channels // groups, 4)).astype(np.float32)
    pads = ((1, 2), (0, 1))
    attrs = {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1], "padding": "EXPLICIT",
             "explicit_paddings": [0, 0, *pads[0], *pads[1], 0, 0]}
    result = instantiate("Conv2D", attrs)(x, f)
    expected = _reference_conv(x, f, strides, dilations, pads)
    np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4)


def test_conv2d_large_batch_goes_through_blocked_im2col() -> None:
    # 10 images of 30x30 outputs: above the im2col threshold, in blocks of 2 images.
    rng = np.random.default_rng(8)
    x = rng.standard_normal((10, 30, 30, 12)).astype(np.float32)
    f = rng.standard_normal((3, 3, 12, 5)).astype(np.float32)
    result = instantiate("Conv2D", {"strides": [1, 1, 1, 1], "padding": "SAME"})(x, f)
    expected = _reference_conv(x, f, (1, 1), (1, 1), ((1, 1), (1, 1)))
    np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4)


def test_conv2d_empty_batch() -> None:
    # TensorFlow's oneDNN kernel returns its input unchanged for an empty batch.
    x, f = np.zeros((0, 5, 5, 3), np.float32), _normal(3, 3, 3, 2)
    result = instantiate("Conv2D", {"strides": [1, 1, 1, 1], "padding": "SAME"})(x, f)
    assert result.shape == (0, 5, 5, 2)


def test_conv2d_zero_sized_output() -> None:
    # TensorFlow's oneDNN kernel returns its input unchanged here; the correct output is empty.
    x, f = _normal(1, 2, 2, 4), _normal(3, 3, 4, 6)
    result = instantiate("Conv2D", {"strides": [1, 1, 1, 1], "padding": "VALID"})(x, f)
    assert result.shape == (1, 0, 0, 6)


def test_max_pool_zero_sized_output() -> None:
    # TensorFlow's MaxPool crashes (SIGFPE) on this; an empty result is the op's meaning.
    x = _normal(1, 3, 3, 2)
    attrs = {"ksize": [1, 4, 4, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}
    assert instantiate("MaxPool", attrs)(x).shape == (1, 0, 0, 2)


def _window_max(x: np.ndarray, ksize: tuple[int, int], strides: tuple[int, int],
                padding: str) -> np.ndarray:
    """MaxPool by its definition: every window's max, padding never winning."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw) = ksize, strides
    if padding == "SAME":
        oh, ow = -(-h // sh), -(-w // sw)
        pt = max(0, (oh - 1) * sh + kh - h) // 2
        pl = max(0, (ow - 1) * sw + kw - w) // 2
    else:
        oh, ow, pt, pl = (h - kh) // sh + 1, (w - kw) // sw + 1, 0, 0
    out = np.empty((n, oh, ow, c), x.dtype)
    for r in range(oh):
        for q in range(ow):
            y0, x0 = r * sh - pt, q * sw - pl
            out[:, r, q] = x[:, max(0, y0):y0 + kh, max(0, x0):x0 + kw].max(axis=(1, 2))
    return out


@pytest.mark.parametrize("chunk_bytes", [1, 4096, 1 << 20])
@pytest.mark.parametrize("ksize,strides,padding", [((3, 3), (2, 2), "SAME"),
                                                   ((3, 2), (1, 2), "SAME"),
                                                   ((2, 3), (2, 1), "VALID"),
                                                   ((3, 3), (2, 2), "VALID")])
def test_max_pool_in_chunks_of_rows_is_the_window_max(chunk_bytes: int, ksize: tuple,
                                                      strides: tuple, padding: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks of one output row, of a few, and whole images: the edge chunks read padding rows
    # that the chunks between them fill with input.
    from runtime.kernels import nn_ops_pool

    monkeypatch.setattr(nn_ops_pool, "_POOL_CHUNK_BYTES", chunk_bytes)
    x = _normal(2, 23, 20, 8)
    attrs = {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1], "padding": padding}
    kernel = instantiate("MaxPool", attrs)
    for _ in range(2):  # scratch reused
        np.testing.assert_array_equal(kernel(x), _window_max(x, ksize, strides, padding))


def test_conv2d_rejects_short_explicit_paddings() -> None:
    with pytest.raises(OpError):
        instantiate("Conv2D", {"strides": [1, 1, 1, 1], "padding": "EXPLICIT",
                               "explicit_paddings": [0, 0, 1, 1]})


@pytest.mark.parametrize("op", ["BiasAdd", "BiasAddV1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_add_with_a_constant_bias_matches_broadcasting(op, dtype) -> None:
    rng = np.random.default_rng(3)
    bias = rng.standard_normal(6).astype(dtype)
    bias.flags.writeable = False
    kernel = instantiate(op, constant_inputs={1: bias})
    x = rng.standard_normal((8, 12, 14, 6)).astype(dtype)
    x[1, 2, 3] = np.inf
    for value in (x, x[:, ::2], x[:2, :2, :2], x.reshape(-1, 6), x[0, 0, 0]):
        got = kernel(value, bias)
        assert got.dtype == value.dtype and got.shape == value.shape
        np.testing.assert_array_equal(got, value + bias)
    with pytest.raises(ValueError):
        kernel(x[..., :4], bias)
