"""The convolution-family algorithms (channel-major phase grid, patch matrix, pointwise,
depthwise, transposed convolution by phases, tiling pools, blocked bilinear resize) against direct
numpy definitions, on shapes chosen to select each algorithm and each blocking case."""

from __future__ import annotations

import dataclasses
import itertools
import threading

import numpy as np
import pytest

from runtime.errors import OpError
from runtime.kernels import nn_ops_common, nn_ops_conv_gemm, nn_ops_depthwise
from runtime.kernels.clamps import relu_
from runtime.kernels.nn_ops_common import (
    Derived,
    Window,
    channel_op,
    is_constant,
    scratch,
    window,
)
from runtime.kernels.nn_ops_conv_gemm import (
    ChannelMajor,
    ConvShape,
    Empty,
    Patches,
    Pointwise,
    block_rows,
    choose,
    tiling,
)
from runtime.kernels.nn_ops_conv_winograd import Winograd
from runtime.kernels.nn_ops_conv_winograd import applies as winograd_applies
from runtime.kernels.nn_ops_depthwise import (
    Depthwise,
    DepthwiseShape,
    DepthwiseTaps,
    choose_depthwise,
)
from runtime.kernels.registry import instantiate

RNG = np.random.default_rng(11)
F32 = np.float32


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(F32)


def frozen(a: np.ndarray) -> np.ndarray:
    """A read-only copy, as constants reach the kernels."""
    a = np.array(a)
    a.flags.writeable = False
    return a


# --- references --------------------------------------------------------------------------------


def pads_of(padding: str, size: tuple[int, int], k: tuple[int, int], strides: tuple[int, int],
            dilations: tuple[int, int], explicit: tuple[tuple[int, int], ...] | None):
    if padding == "EXPLICIT":
        return explicit
    result = []
    for n, kk, s, d in zip(size, k, strides, dilations):
        w = window(n, kk, s, d, padding)
        result.append((w.pad_before, w.pad_after))
    return tuple(result)


def reference_conv(x, f, strides, dilations, pads):
    """Conv2D by its definition, float64, NHWC/HWIO, grouped when the depths say so."""
    n, c = x.shape[0], x.shape[3]
    kh, kw, fc, o = f.shape
    groups = c // fc
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = max(0, (xp.shape[1] - eh) // strides[0] + 1)
    ow = max(0, (xp.shape[2] - ew) // strides[1] + 1)
    out = np.zeros((n, oh, ow, o))
    og = o // groups
    for y, z in itertools.product(range(oh), range(ow)):
        patch = xp[:, y * strides[0]:y * strides[0] + eh:dilations[0],
                   z * strides[1]:z * strides[1] + ew:dilations[1], :]
        for g in range(groups):
            out[:, y, z, g * og:(g + 1) * og] = np.tensordot(
                patch[..., g * fc:(g + 1) * fc], f[..., g * og:(g + 1) * og].astype(np.float64),
                axes=3,
            )
    return out


def reference_depthwise(x, f, strides, dilations, pads):
    c, m = x.shape[3], f.shape[3]
    # Depthwise is a grouped convolution with one input channel per group.
    grouped = f.reshape(f.shape[0], f.shape[1], 1, c * m)
    return reference_conv(x, grouped, strides, dilations, pads)


def reference_transpose(sizes, f, dy, strides, dilations, pads):
    """Conv2DBackpropInput by scattering every output gradient through the filter."""
    n, h, w, c = sizes
    kh, kw, _, _ = f.shape
    hp, wp = h + pads[0][0] + pads[0][1], w + pads[1][0] + pads[1][1]
    dx = np.zeros((n, hp + kh * dilations[0], wp + kw * dilations[1], c))
    for y, z in itertools.product(range(dy.shape[1]), range(dy.shape[2])):
        for i, j in itertools.product(range(kh), range(kw)):
            r, q = y * strides[0] + i * dilations[0], z * strides[1] + j * dilations[1]
            dx[:, r, q, :] += dy[:, y, z, :].astype(np.float64) @ f[i, j].T.astype(np.float64)
    return dx[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + w, :]


def conv_attrs(strides, dilations, padding, explicit=None, data_format="NHWC"):
    def four(pair):
        return [1, 1, *pair] if data_format == "NCHW" else [1, *pair, 1]

    attrs = {"strides": four(strides), "dilations": four(dilations), "padding": padding,
             "data_format": data_format}
    if padding == "EXPLICIT":
        flat = [0, 0, *explicit[0], *explicit[1], 0, 0]
        if data_format == "NCHW":
            flat = [0, 0, 0, 0, *explicit[0], *explicit[1]]
        attrs["explicit_paddings"] = flat
    return attrs


def conv_shape(x_shape, f_shape, strides, dilations, padding, explicit=None):
    n, h, w, c = x_shape
    kh, kw, fc, o = f_shape
    if padding == "EXPLICIT":
        rows = window(h, kh, strides[0], dilations[0], padding, explicit[0])
        cols = window(w, kw, strides[1], dilations[1], padding, explicit[1])
    else:
        rows = window(h, kh, strides[0], dilations[0], padding)
        cols = window(w, kw, strides[1], dilations[1], padding)
    return ConvShape(n, h, w, fc, kh, kw, o // (c // fc), strides, dilations, rows, cols,
                     np.dtype(F32))


def depthwise_shape(x_shape, f_shape, strides, dilations, padding, explicit=None):
    n, h, w, c = x_shape
    kh, kw, _, m = f_shape
    shape = conv_shape(x_shape, (kh, kw, c, c * m), strides, dilations, padding, explicit)
    return DepthwiseShape(n, h, w, c, kh, kw, m, strides, dilations, shape.rows, shape.cols,
                          np.dtype(F32))


# --- Conv2D ------------------------------------------------------------------------------------

# (name, x shape, filter shape, strides, dilations, padding, explicit pads, expected algorithm)
CONV_CASES = [
    ("cm_same_c3", (2, 9, 8, 3), (3, 3, 3, 5), (1, 1), (1, 1), "SAME", None, ChannelMajor),
    ("cm_valid_c1", (2, 7, 9, 1), (3, 2, 1, 4), (1, 1), (1, 1), "VALID", None, ChannelMajor),
    ("cm_explicit_c5", (1, 6, 7, 5), (3, 3, 5, 2), (1, 1), (1, 1), "EXPLICIT",
     ((2, 0), (1, 3)), ChannelMajor),
    ("cm_dilated_c4", (2, 11, 10, 4), (3, 3, 4, 3), (1, 1), (2, 3), "SAME", None, ChannelMajor),
    ("cm_strided_c3", (2, 11, 12, 3), (3, 3, 3, 4), (2, 2), (1, 1), "SAME", None, ChannelMajor),
    ("cm_stride3_c2", (1, 13, 11, 2), (4, 5, 2, 3), (3, 2), (1, 1), "VALID", None, ChannelMajor),
    ("cm_strided_dilated", (1, 15, 14, 3), (3, 3, 3, 2), (2, 3), (2, 2), "SAME", None,
     ChannelMajor),
    ("cm_leftover_rows", (1, 10, 10, 2), (3, 3, 2, 2), (2, 2), (1, 1), "VALID", None,
     ChannelMajor),
    ("cm_big_explicit", (1, 4, 5, 3), (2, 2, 3, 2), (1, 1), (1, 1), "EXPLICIT",
     ((4, 3), (0, 5)), ChannelMajor),
    ("patches_c8", (2, 7, 8, 8), (3, 3, 8, 5), (1, 1), (1, 1), "SAME", None, Patches),
    ("patches_c16_s2", (2, 9, 8, 16), (3, 3, 16, 4), (2, 2), (1, 1), "VALID", None, Patches),
    ("patches_c4_s2", (1, 9, 10, 4), (3, 3, 4, 3), (2, 1), (1, 1), "SAME", None, Patches),
    ("patches_dilated_w", (1, 9, 11, 9), (2, 3, 9, 3), (1, 1), (2, 2), "SAME", None, Patches),
    ("patches_explicit", (1, 6, 6, 10), (3, 3, 10, 2), (2, 2), (1, 1), "EXPLICIT",
     ((2, 0), (1, 1)), Patches),
    ("patches_no_pad", (2, 6, 7, 12), (3, 3, 12, 6), (1, 1), (1, 1), "VALID", None, Patches),
    ("pointwise", (2, 4, 5, 6), (1, 1, 6, 7), (1, 1), (1, 1), "VALID", None, Pointwise),
    ("pointwise_s2", (2, 5, 6, 3), (1, 1, 3, 4), (2, 2), (1, 1), "SAME", None, Pointwise),
    ("pointwise_explicit", (1, 3, 4, 8), (1, 1, 8, 2), (1, 1), (1, 1), "EXPLICIT",
     ((1, 0), (0, 2)), Patches),
    ("pointwise_explicit_c2", (1, 3, 4, 2), (1, 1, 2, 2), (1, 1), (1, 1), "EXPLICIT",
     ((1, 0), (0, 2)), ChannelMajor),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv2d_algorithms_match_definition(case) -> None:
    _, x_shape, f_shape, strides, dilations, padding, explicit, algorithm = case
    assert type(choose(conv_shape(x_shape, f_shape, strides, dilations, padding,
                                  explicit))) is algorithm
    x, f = normal(*x_shape), normal(*f_shape)
    pads = pads_of(padding, x_shape[1:3], f_shape[:2], strides, dilations, explicit)
    expected = reference_conv(x, f, strides, dilations, pads)
    kernel = instantiate("Conv2D", conv_attrs(strides, dilations, padding, explicit))
    for filt in (f, frozen(f)):  # derived weights computed afresh, then remembered
        result = kernel(x, filt)
        assert result.dtype == F32 and result.flags.c_contiguous
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(kernel(x, filt), expected, rtol=1e-5, atol=1e-5)


# (name, x shape, filter shape, padding, explicit pads): 3x3 at stride 1, Winograd's F(2x2, 3x3)
# (chosen only for larger layers; here built directly).
WINOGRAD_CASES = [
    ("same_even", (1, 8, 10, 32), (3, 3, 32, 40), "SAME", None),
    ("same_odd", (2, 7, 9, 33), (3, 3, 33, 32), "SAME", None),  # the last tiles half cropped
    ("valid", (1, 9, 8, 32), (3, 3, 32, 48), "VALID", None),
    ("explicit", (1, 6, 7, 40), (3, 3, 40, 32), "EXPLICIT", ((2, 0), (0, 3))),
    ("one_tile_row", (3, 2, 11, 32), (3, 3, 32, 32), "SAME", None),
    ("one_output", (1, 3, 3, 8), (3, 3, 8, 4), "VALID", None),
    # More tiles than a block holds: blocks of tile rows.
    ("blocks", (2, 70, 42, 16), (3, 3, 16, 24), "SAME", None),
]


@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=[c[0] for c in WINOGRAD_CASES])
def test_winograd_matches_definition(case) -> None:
    _, x_shape, f_shape, padding, explicit = case
    algorithm = Winograd(conv_shape(x_shape, f_shape, (1, 1), (1, 1), padding, explicit))
    x, f, bias = normal(*x_shape), normal(*f_shape), normal(f_shape[3])
    pads = pads_of(padding, x_shape[1:3], f_shape[:2], (1, 1), (1, 1), explicit)
    expected = reference_conv(x, f, (1, 1), (1, 1), pads)
    result = algorithm(x, algorithm.prepare(f, None), None)
    assert result.dtype == F32 and result.flags.c_contiguous
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)
    # The bias and a fused Relu, into a given output.
    out = np.full(expected.shape, np.nan, F32)
    assert algorithm(x, algorithm.prepare(f, bias), relu_, out) is out
    np.testing.assert_allclose(out, np.maximum(expected + bias, 0), rtol=1e-5, atol=1e-4)


def test_conv2d_takes_winograd_for_a_large_3x3_layer() -> None:
    x, f, bias = normal(1, 28, 28, 64), normal(3, 3, 64, 64), normal(64)
    assert winograd_applies(conv_shape(x.shape, f.shape, (1, 1), (1, 1), "SAME"))
    expected = reference_conv(x, f, (1, 1), (1, 1), ((1, 1), (1, 1)))
    attrs = conv_attrs((1, 1), (1, 1), "SAME")
    for filt in (f, frozen(f)):  # derived weights computed afresh, then remembered
        np.testing.assert_allclose(instantiate("Conv2D", attrs)(x, filt), expected, rtol=1e-5,
                                   atol=1e-4)
    fused = instantiate("_FusedConv2D", {**attrs, "fused_ops": ["BiasAdd", "Relu"],
                                         "num_args": 1})
    np.testing.assert_allclose(fused(x, frozen(f), frozen(bias)),
                               np.maximum(expected + bias, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("x_shape,f_shape,strides,dilations,dtype", [
    ((1, 28, 28, 63), (3, 3, 63, 64), (1, 1), (1, 1), F32),  # too few input channels
    ((1, 28, 28, 64), (3, 3, 64, 63), (1, 1), (1, 1), F32),  # too few output channels
    ((1, 14, 14, 64), (3, 3, 64, 64), (1, 1), (1, 1), F32),  # too little work
    ((1, 28, 28, 64), (3, 3, 64, 64), (2, 2), (1, 1), F32),
    ((1, 28, 28, 64), (3, 3, 64, 64), (1, 1), (2, 2), F32),
    ((1, 28, 28, 64), (5, 5, 64, 64), (1, 1), (1, 1), F32),
    ((1, 28, 28, 64), (3, 3, 64, 64), (1, 1), (1, 1), np.float64),  # float64 keeps its precision
])
def test_winograd_is_only_for_large_3x3_stride_1_float32_layers(
        x_shape, f_shape, strides, dilations, dtype) -> None:
    shape = conv_shape(x_shape, f_shape, strides, dilations, "SAME")
    assert not winograd_applies(dataclasses.replace(shape, dtype=np.dtype(dtype)))


@pytest.mark.parametrize("case", CONV_CASES[:4] + CONV_CASES[9:11], ids=lambda c: c[0])
def test_conv2d_nchw(case) -> None:
    _, x_shape, f_shape, strides, dilations, padding, explicit, _ = case
    x, f = normal(*x_shape), normal(*f_shape)
    pads = pads_of(padding, x_shape[1:3], f_shape[:2], strides, dilations, explicit)
    expected = reference_conv(x, f, strides, dilations, pads).transpose(0, 3, 1, 2)
    kernel = instantiate("Conv2D", conv_attrs(strides, dilations, padding, explicit, "NCHW"))
    np.testing.assert_allclose(kernel(x.transpose(0, 3, 1, 2), f), expected, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("x_shape,f_shape,algorithm", [
    ((45, 16, 16, 3), (3, 3, 3, 8), ChannelMajor),  # several blocks of images, a partial one
    ((2, 50, 60, 3), (3, 3, 3, 4), ChannelMajor),  # an image larger than a block
    ((70, 8, 8, 8), (3, 3, 8, 12), Patches),  # several blocks, a partial one
    ((2, 40, 45, 8), (3, 3, 8, 6), Patches),  # blocks of rows within an image
    ((40, 20, 20, 5), (1, 1, 5, 7), Pointwise),
])
def test_conv2d_blocks(x_shape, f_shape, algorithm) -> None:
    shape = conv_shape(x_shape, f_shape, (1, 1), (1, 1), "SAME")
    chosen = choose(shape)
    assert type(chosen) is algorithm
    blocks = getattr(chosen, "blocks", [None, None])
    assert len(blocks) > 1 or algorithm is Pointwise
    x, f = normal(*x_shape), normal(*f_shape)
    pads = pads_of("SAME", x_shape[1:3], f_shape[:2], (1, 1), (1, 1), None)
    result = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "SAME"))(x, f)
    np.testing.assert_allclose(result, reference_conv(x, f, (1, 1), (1, 1), pads), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("c,groups", [(6, 2), (6, 3), (12, 4), (16, 2)])
def test_grouped_conv2d(c, groups) -> None:
    x, f = normal(3, 7, 6, c), normal(3, 3, c // groups, 2 * groups)
    pads = pads_of("SAME", (7, 6), (3, 3), (1, 1), (1, 1), None)
    result = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "SAME"))(x, f)
    np.testing.assert_allclose(result, reference_conv(x, f, (1, 1), (1, 1), pads), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("x_shape,f_shape,padding,out_shape", [
    ((0, 5, 5, 3), (3, 3, 3, 2), "SAME", (0, 5, 5, 2)),
    ((0, 5, 5, 12), (3, 3, 12, 2), "VALID", (0, 3, 3, 2)),
    ((2, 2, 2, 3), (3, 3, 3, 4), "VALID", (2, 0, 0, 4)),
    ((1, 4, 4, 3), (3, 3, 3, 0), "SAME", (1, 4, 4, 0)),
])
def test_conv2d_empty(x_shape, f_shape, padding, out_shape) -> None:
    assert type(choose(conv_shape(x_shape, f_shape, (1, 1), (1, 1), padding))) is Empty
    result = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), padding))(
        normal(*x_shape), normal(*f_shape))
    assert result.shape == out_shape


def test_conv2d_float64_int32_and_float16() -> None:
    x, f = normal(2, 6, 6, 3), normal(3, 3, 3, 2)
    pads = pads_of("SAME", (6, 6), (3, 3), (1, 1), (1, 1), None)
    kernel = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "SAME"))
    expected = reference_conv(x, f, (1, 1), (1, 1), pads)
    result = kernel(x.astype(np.float64), f.astype(np.float64))
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)
    xi, fi = RNG.integers(-3, 4, (2, 6, 6, 9), dtype=np.int32), RNG.integers(-2, 3, (3, 3, 9, 2),
                                                                             dtype=np.int32)
    result = kernel(xi, fi)
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, reference_conv(xi, fi, (1, 1), (1, 1), pads))
    result = kernel(x.astype(np.float16), f.astype(np.float16))
    assert result.dtype == np.float16
    np.testing.assert_allclose(result.astype(F32), expected, rtol=1e-2, atol=2e-2)


def test_conv2d_reads_strided_input() -> None:
    base = normal(2, 9, 10, 8)
    x = base[:, 1:8, ::2, 1:4]  # not contiguous
    f = normal(3, 3, 3, 4)
    pads = pads_of("VALID", x.shape[1:3], (3, 3), (1, 1), (1, 1), None)
    result = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "VALID"))(x, f)
    np.testing.assert_allclose(result, reference_conv(x, f, (1, 1), (1, 1), pads), rtol=1e-5,
                               atol=1e-5)


def test_conv2d_sees_a_changed_writable_filter() -> None:
    x, f = normal(1, 5, 5, 3), normal(3, 3, 3, 2)
    pads = pads_of("SAME", (5, 5), (3, 3), (1, 1), (1, 1), None)
    kernel = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "SAME"))
    kernel(x, f)
    f *= 2  # the same array object, new values
    np.testing.assert_allclose(kernel(x, f), reference_conv(x, f, (1, 1), (1, 1), pads),
                               rtol=1e-5, atol=1e-5)


def test_conv2d_is_thread_safe() -> None:
    kernel = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "SAME"))
    f = frozen(normal(3, 3, 3, 4))
    inputs = [normal(20, 12, 12, 3) for _ in range(4)]
    pads = pads_of("SAME", (12, 12), (3, 3), (1, 1), (1, 1), None)
    expected = [reference_conv(x, f, (1, 1), (1, 1), pads) for x in inputs]
    failures: list[str] = []

    def work(index: int) -> None:
        for _ in range(15):
            result = kernel(inputs[index], f)
            if not np.allclose(result, expected[index], rtol=1e-4, atol=1e-4):
                failures.append(f"thread {index}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


# --- fused forms -------------------------------------------------------------------------------


def _activation(name: str, y: np.ndarray) -> np.ndarray:
    if name == "Relu":
        return np.fmax(y, 0)
    if name == "Relu6":
        return np.minimum(np.fmax(y, 0), 6)
    return y


@pytest.mark.parametrize("op,c", [("_FusedConv2D", 3), ("_FusedConv2D", 8),
                                  ("_FusedDepthwiseConv2dNative", 3),
                                  ("_FusedDepthwiseConv2dNative", 64)])  # tap by tap
@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"],
                                       ["BiasAdd", "Relu", "Mul", "AddV2"],
                                       ["BiasAdd", "Relu", "AddV2"], ["BiasAdd", "Elu", "Mul"]])
def test_fused_conv_epilogues(op, c, fused_ops) -> None:
    depthwise = op == "_FusedDepthwiseConv2dNative"
    x = normal(3, 8, 7, c)
    x[0, 2, 3, 0] = np.nan  # TensorFlow's fused Relu maps NaN to 0
    multiplier = 1 if c >= 64 else 2
    f = normal(3, 3, c, multiplier) if depthwise else normal(3, 3, c, 5)
    channels = c * multiplier if depthwise else 5
    bias, scale, shift = normal(channels), normal(channels), normal(channels)
    args = [bias] + [{"Mul": scale, "AddV2": shift}[name] for name in fused_ops[2:]]
    attrs = {**conv_attrs((1, 1), (1, 1), "SAME"), "fused_ops": fused_ops,
             "num_args": len(args)}
    result = instantiate(op, attrs)(x, frozen(f), *map(frozen, args))
    pads = pads_of("SAME", (8, 7), (3, 3), (1, 1), (1, 1), None)
    reference = reference_depthwise if depthwise else reference_conv
    y = reference(x, f, (1, 1), (1, 1), pads) + bias
    activation = fused_ops[1] if len(fused_ops) > 1 else ""
    if activation == "Elu":
        y = np.where(y > 0, y, np.expm1(np.minimum(y, 0)))
    else:
        y = _activation(activation, y)
    for name in fused_ops[2:]:
        y = y * scale if name == "Mul" else y + shift
    np.testing.assert_allclose(result, y, rtol=1e-5, atol=1e-5)


def test_fused_conv_rejects_post_activation_steps_in_nchw() -> None:
    attrs = {**conv_attrs((1, 1), (1, 1), "SAME", data_format="NCHW"),
             "fused_ops": ["BiasAdd", "Relu", "Mul"], "num_args": 2}
    with pytest.raises(OpError):
        instantiate("_FusedConv2D", attrs)


def test_fused_conv_rejects_a_wrong_bias() -> None:
    attrs = {**conv_attrs((1, 1), (1, 1), "SAME"), "fused_ops": ["BiasAdd", "Relu"],
             "num_args": 1}
    with pytest.raises(OpError):
        instantiate("_FusedConv2D", attrs)(normal(1, 4, 4, 3), normal(3, 3, 3, 5), normal(4))


# --- DepthwiseConv2dNative ---------------------------------------------------------------------

DEPTHWISE_CASES = [
    ("same", (2, 7, 8, 4), (3, 3, 4, 1), (1, 1), (1, 1), "SAME", None),
    ("multiplier_s2_valid", (2, 15, 15, 4), (3, 3, 4, 2), (2, 2), (1, 1), "VALID", None),
    ("multiplier3_s3", (1, 10, 11, 3), (3, 4, 3, 3), (3, 2), (1, 1), "SAME", None),
    ("dilated", (1, 9, 9, 5), (3, 3, 5, 2), (1, 1), (2, 3), "SAME", None),
    ("strided_dilated", (1, 12, 13, 2), (3, 3, 2, 2), (2, 2), (2, 1), "SAME", None),
    ("explicit", (2, 6, 7, 4), (3, 3, 4, 2), (1, 1), (1, 1), "EXPLICIT", ((1, 2), (3, 0))),
    ("channels_strided", (2, 7, 7, 15), (3, 3, 15, 1), (2, 2), (1, 1), "SAME", None),
    ("blocks", (50, 9, 9, 3), (3, 3, 3, 2), (1, 1), (1, 1), "SAME", None),
    ("large_image", (1, 60, 50, 2), (3, 3, 2, 1), (1, 1), (1, 1), "SAME", None),
    # Tap by tap (one filter per channel, many channels).
    ("taps_same", (2, 9, 10, 64), (3, 3, 64, 1), (1, 1), (1, 1), "SAME", None),
    ("taps_strided_valid", (1, 15, 14, 96), (3, 3, 96, 1), (2, 2), (1, 1), "VALID", None),
    ("taps_5x5_s2_same", (2, 11, 12, 80), (5, 5, 80, 1), (2, 2), (1, 1), "SAME", None),
    ("taps_dilated", (1, 12, 11, 64), (3, 2, 64, 1), (1, 1), (2, 3), "SAME", None),
    ("taps_explicit", (2, 6, 7, 64), (3, 3, 64, 1), (1, 2), (1, 1), "EXPLICIT",
     ((1, 2), (3, 0))),
    ("taps_many_chunks", (3, 70, 65, 64), (3, 3, 64, 1), (1, 1), (1, 1), "SAME", None),
    # Three column phases, the dilated taps reading them out of order (0, 2, 1).
    ("taps_strided_dilated", (1, 13, 17, 64), (3, 3, 64, 1), (2, 3), (2, 2), "SAME", None),
    ("taps_few_channels", (2, 6, 6, 33), (3, 3, 33, 1), (1, 1), (1, 1), "SAME", None),
    ("taps_rows_strided", (1, 11, 9, 32), (3, 3, 32, 1), (2, 1), (1, 1), "VALID", None),
    ("taps_few_channels_strided", (2, 9, 9, 32), (3, 3, 32, 1), (2, 2), (1, 1), "SAME", None),
    # The compiled loop's forms: runs of 8 output columns inside the image (3 or 5 wide, stride 1
    # or 2) with the columns left over, channels past the last whole 8, rows and columns whose
    # taps all fall in the padding, and a width it has no tiled form for.
    ("taps_tiles_3x3", (1, 20, 37, 24), (3, 3, 24, 1), (1, 1), (1, 1), "SAME", None),
    ("taps_tiles_channel_tail", (1, 9, 30, 21), (3, 3, 21, 1), (1, 1), (1, 1), "SAME", None),
    ("taps_tiles_5x5_s2", (2, 23, 41, 40), (5, 5, 40, 1), (2, 2), (1, 1), "SAME", None),
    ("taps_tiles_3x3_s2_valid", (1, 9, 40, 16), (3, 3, 16, 1), (2, 2), (1, 1), "VALID", None),
    ("taps_tiles_5x5_channel_tail", (1, 12, 26, 19), (5, 5, 19, 1), (1, 1), (1, 1), "SAME",
     None),
    ("taps_all_padding", (1, 4, 12, 16), (3, 3, 16, 1), (1, 1), (1, 1), "EXPLICIT",
     ((4, 3), (5, 6))),
    ("taps_7x7", (1, 10, 30, 16), (7, 7, 16, 1), (1, 1), (1, 1), "SAME", None),
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=[c[0] for c in DEPTHWISE_CASES])
def test_depthwise_matches_definition(case) -> None:
    name, x_shape, f_shape, strides, dilations, padding, explicit = case
    shape = depthwise_shape(x_shape, f_shape, strides, dilations, padding, explicit)
    chosen = choose_depthwise(shape)
    assert type(chosen) is (DepthwiseTaps if name.startswith("taps") else Depthwise)
    x, f = normal(*x_shape), normal(*f_shape)
    pads = pads_of(padding, x_shape[1:3], f_shape[:2], strides, dilations, explicit)
    expected = reference_depthwise(x, f, strides, dilations, pads)
    kernel = instantiate("DepthwiseConv2dNative",
                         conv_attrs(strides, dilations, padding, explicit))
    for filt in (f, frozen(f)):
        np.testing.assert_allclose(kernel(x, filt), expected, rtol=1e-5, atol=1e-5)
    nchw = instantiate("DepthwiseConv2dNative",
                       conv_attrs(strides, dilations, padding, explicit, "NCHW"))
    np.testing.assert_allclose(nchw(x.transpose(0, 3, 1, 2), f), expected.transpose(0, 3, 1, 2),
                               rtol=1e-5, atol=1e-5)


TAPS_CASES = [case for case in DEPTHWISE_CASES if case[0].startswith("taps")]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("case", TAPS_CASES, ids=[c[0] for c in TAPS_CASES])
def test_depthwise_taps_both_ways_match_definition(case, compiled, monkeypatch) -> None:
    # The compiled loop where it was built, and numpy's einsums, with a bias (summed in the
    # compiled loop) and without.
    if compiled and not nn_ops_depthwise.COMPILED:
        pytest.skip("the compiled depthwise loop is not built or the CPU lacks AVX2 and FMA")
    monkeypatch.setattr(nn_ops_depthwise, "COMPILED", compiled)
    _, x_shape, f_shape, strides, dilations, padding, explicit = case
    x, f, bias = normal(*x_shape), normal(*f_shape), normal(x_shape[3])
    pads = pads_of(padding, x_shape[1:3], f_shape[:2], strides, dilations, explicit)
    expected = reference_depthwise(x, f, strides, dilations, pads)
    attrs = conv_attrs(strides, dilations, padding, explicit)
    fused = instantiate("_FusedDepthwiseConv2dNative",
                        {**attrs, "fused_ops": ["BiasAdd"], "num_args": 1})
    plain = instantiate("DepthwiseConv2dNative", attrs)
    np.testing.assert_allclose(plain(x, f), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused(x, frozen(f), frozen(bias)), expected + bias, rtol=1e-5,
                               atol=1e-5)
    shape = depthwise_shape(x_shape, f_shape, strides, dilations, padding, explicit)
    assert choose_depthwise(shape).compiled == compiled


def test_depthwise_taps_beyond_the_compiled_loops_window_run_in_numpy() -> None:
    # 33x33 taps: more than the compiled loop takes, so numpy sums them.
    x, f = normal(1, 40, 36, 16), normal(33, 33, 16, 1)
    shape = depthwise_shape(x.shape, f.shape, (1, 1), (1, 1), "VALID")
    assert not choose_depthwise(shape).compiled
    kernel = instantiate("DepthwiseConv2dNative", conv_attrs((1, 1), (1, 1), "VALID"))
    expected = reference_depthwise(x, f, (1, 1), (1, 1), ((0, 0), (0, 0)))
    np.testing.assert_allclose(kernel(x, f), expected, rtol=1e-4, atol=1e-4)


def test_depthwise_empty_batch_and_output() -> None:
    kernel = instantiate("DepthwiseConv2dNative", conv_attrs((1, 1), (1, 1), "VALID"))
    assert kernel(normal(0, 5, 5, 3), normal(3, 3, 3, 2)).shape == (0, 3, 3, 6)
    assert kernel(normal(2, 2, 2, 3), normal(3, 3, 3, 2)).shape == (2, 0, 0, 6)


# --- Conv2DBackpropInput -----------------------------------------------------------------------

TRANSPOSE_CASES = [
    ("s2_same", (2, 14, 14, 6), (3, 3, 6, 8), (2, 2), (1, 1), "SAME", None),
    ("s2_same_odd", (2, 7, 9, 3), (3, 3, 3, 5), (2, 2), (1, 1), "SAME", None),
    ("s1_valid", (2, 15, 15, 4), (2, 2, 4, 6), (1, 1), (1, 1), "VALID", None),
    ("s1_same_c8", (1, 6, 7, 8), (3, 3, 8, 4), (1, 1), (1, 1), "SAME", None),
    ("s3_valid_leftover", (1, 11, 10, 2), (3, 2, 2, 3), (3, 3), (1, 1), "VALID", None),
    ("s2_k4", (1, 8, 8, 3), (4, 4, 3, 2), (2, 2), (1, 1), "SAME", None),
    ("s2_k1", (1, 7, 8, 3), (1, 1, 3, 2), (2, 2), (1, 1), "VALID", None),
    ("dilated", (1, 7, 7, 2), (3, 3, 2, 3), (1, 1), (2, 2), "SAME", None),
    ("strided_dilated", (1, 9, 10, 2), (3, 3, 2, 2), (2, 3), (2, 1), "SAME", None),
    ("explicit", (1, 6, 6, 2), (3, 3, 2, 3), (1, 1), (1, 1), "EXPLICIT", ((1, 2), (0, 1))),
    ("explicit_wide", (1, 5, 6, 2), (2, 2, 2, 3), (2, 2), (1, 1), "EXPLICIT", ((5, 1), (3, 4))),
    ("many_channels", (2, 6, 6, 16), (3, 3, 16, 12), (2, 2), (1, 1), "SAME", None),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=[c[0] for c in TRANSPOSE_CASES])
def test_conv2d_backprop_input_matches_definition(case) -> None:
    _, sizes, f_shape, strides, dilations, padding, explicit = case
    n, h, w, c = sizes
    rows = window(h, f_shape[0], strides[0], dilations[0], padding,
                  explicit[0] if explicit else (0, 0))
    cols = window(w, f_shape[1], strides[1], dilations[1], padding,
                  explicit[1] if explicit else (0, 0))
    dy, f = normal(n, rows.out, cols.out, f_shape[3]), normal(*f_shape)
    pads = ((rows.pad_before, rows.pad_after), (cols.pad_before, cols.pad_after))
    expected = reference_transpose(sizes, f, dy, strides, dilations, pads)
    kernel = instantiate("Conv2DBackpropInput", conv_attrs(strides, dilations, padding, explicit))
    for filt in (f, frozen(f)):
        result = kernel(np.array(sizes, np.int32), filt, dy)
        assert result.shape == sizes and result.flags.c_contiguous
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    nchw = instantiate("Conv2DBackpropInput",
                       conv_attrs(strides, dilations, padding, explicit, "NCHW"))
    result = nchw(np.array([n, c, h, w], np.int32), f, dy.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(result, expected.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("where", ["dy", "filter"])
@pytest.mark.parametrize("case", [TRANSPOSE_CASES[0], TRANSPOSE_CASES[2], TRANSPOSE_CASES[7]],
                         ids=lambda c: c[0])
def test_conv2d_backprop_input_non_finite(case, where) -> None:
    # NaN and infinity reach exactly the outputs that TensorFlow's scatter reaches.
    _, sizes, f_shape, strides, dilations, padding, _ = case
    n, h, w, _ = sizes
    rows = window(h, f_shape[0], strides[0], dilations[0], padding)
    cols = window(w, f_shape[1], strides[1], dilations[1], padding)
    dy, f = normal(n, rows.out, cols.out, f_shape[3]), normal(*f_shape)
    if where == "dy":
        dy[0, 1, 2, 0], dy[-1, 0, 0, 1] = np.nan, np.inf
    else:
        f[0, 0, 1, 0] = np.nan
    pads = ((rows.pad_before, rows.pad_after), (cols.pad_before, cols.pad_after))
    with np.errstate(invalid="ignore"):
        expected = reference_transpose(sizes, f, dy, strides, dilations, pads)
        kernel = instantiate("Conv2DBackpropInput", conv_attrs(strides, dilations, padding))
        result = kernel(np.array(sizes, np.int32), frozen(f), dy)
    np.testing.assert_array_equal(np.isnan(result), np.isnan(expected))
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_conv2d_backprop_input_empty_batch() -> None:
    kernel = instantiate("Conv2DBackpropInput", conv_attrs((2, 2), (1, 1), "SAME"))
    result = kernel(np.array([0, 8, 8, 3], np.int32), normal(3, 3, 3, 4), normal(0, 4, 4, 4))
    assert result.shape == (0, 8, 8, 3)


def test_conv2d_backprop_input_large_batch() -> None:
    sizes, f = (40, 14, 14, 6), normal(3, 3, 6, 8)
    dy = normal(40, 7, 7, 8)
    kernel = instantiate("Conv2DBackpropInput", conv_attrs((2, 2), (1, 1), "SAME"))
    expected = reference_transpose(sizes, f, dy, (2, 2), (1, 1), ((0, 1), (0, 1)))
    np.testing.assert_allclose(kernel(np.array(sizes, np.int32), f, dy), expected, rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"],
                                       ["BiasAdd", "Relu", "Mul", "AddV2"]])
@pytest.mark.parametrize("case", [TRANSPOSE_CASES[0], TRANSPOSE_CASES[2]], ids=lambda c: c[0])
def test_fused_conv2d_backprop_input(case, fused_ops, data_format) -> None:
    _, sizes, f_shape, strides, dilations, padding, explicit = case
    if data_format == "NCHW" and len(fused_ops) > 2:
        return  # post-activation steps are channels-last only (rejected below)
    n, h, w, c = sizes
    rows = window(h, f_shape[0], strides[0], dilations[0], padding)
    cols = window(w, f_shape[1], strides[1], dilations[1], padding)
    dy, f = normal(n, rows.out, cols.out, f_shape[3]), normal(*f_shape)
    dy[0, 1, 1, 0] = np.nan
    bias, scale, shift = normal(c), normal(c), normal(c)
    args = [bias] + [{"Mul": scale, "AddV2": shift}[name] for name in fused_ops[2:]]
    attrs = {**conv_attrs(strides, dilations, padding, explicit, data_format),
             "fused_ops": fused_ops, "num_args": len(args)}
    pads = ((rows.pad_before, rows.pad_after), (cols.pad_before, cols.pad_after))
    y = reference_transpose(sizes, f, dy, strides, dilations, pads) + bias
    y = _activation(fused_ops[1] if len(fused_ops) > 1 else "", y)
    for name in fused_ops[2:]:
        y = y * scale if name == "Mul" else y + shift
    kernel = instantiate("_FusedConv2DBackpropInput", attrs)
    if data_format == "NCHW":
        result = kernel(np.array([n, c, h, w], np.int32), frozen(f), dy.transpose(0, 3, 1, 2),
                        *args)
        y = y.transpose(0, 3, 1, 2)
    else:
        result = kernel(np.array(sizes, np.int32), frozen(f), dy, *map(frozen, args))
    np.testing.assert_allclose(result, y, rtol=1e-5, atol=1e-5)


def test_fused_conv2d_backprop_input_rejects_unsupported_fusions() -> None:
    base = conv_attrs((2, 2), (1, 1), "SAME")
    with pytest.raises(OpError):
        instantiate("_FusedConv2DBackpropInput",
                    {**base, "fused_ops": ["BiasAdd", "Add"], "num_args": 2})
    with pytest.raises(OpError):
        instantiate("_FusedConv2DBackpropInput", {**base, "fused_ops": ["FusedBatchNorm"],
                                                  "num_args": 4})


# --- pooling -----------------------------------------------------------------------------------


def reference_pool(x, ksize, strides, padding, reduce):
    n, h, w, c = x.shape
    rows = window(h, ksize[0], strides[0], 1, padding)
    cols = window(w, ksize[1], strides[1], 1, padding)
    out = np.zeros((n, rows.out, cols.out, c), np.float64)
    for y, z in itertools.product(range(rows.out), range(cols.out)):
        r0, q0 = y * strides[0] - rows.pad_before, z * strides[1] - cols.pad_before
        patch = x[:, max(r0, 0):r0 + ksize[0], max(q0, 0):q0 + ksize[1], :].astype(np.float64)
        out[:, y, z, :] = reduce(patch.reshape(n, -1, c), axis=1)
    return out


@pytest.mark.parametrize("x_shape,ksize,padding", [
    ((3, 16, 16, 8), (2, 2), "VALID"),
    ((2, 7, 9, 3), (2, 2), "VALID"),  # leftover row and column dropped
    ((2, 9, 12, 5), (3, 3), "VALID"),
    ((2, 8, 12, 4), (2, 3), "SAME"),  # divides exactly: no padding
    ((1, 6, 6, 2), (1, 2), "VALID"),
    ((1, 6, 6, 2), (3, 1), "VALID"),
])
def test_tiling_pools(x_shape, ksize, padding) -> None:
    x = normal(*x_shape)
    attrs = {"ksize": [1, *ksize, 1], "strides": [1, *ksize, 1], "padding": padding}
    np.testing.assert_allclose(instantiate("MaxPool", attrs)(x),
                               reference_pool(x, ksize, ksize, padding, np.max), rtol=1e-6)
    np.testing.assert_allclose(instantiate("AvgPool", attrs)(x),
                               reference_pool(x, ksize, ksize, padding, np.mean), rtol=1e-5,
                               atol=1e-6)


def test_tiling_max_pool_skips_nan_and_keeps_integers() -> None:
    x = normal(1, 4, 4, 2)
    x[0, 0, 0, 0] = np.nan
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    result = instantiate("MaxPool", attrs)(x)
    assert result[0, 0, 0, 0] == np.max(x[0, :2, :2, 0][~np.isnan(x[0, :2, :2, 0])])
    xi = RNG.integers(-100, 100, (2, 6, 6, 3), dtype=np.int32)
    result = instantiate("MaxPool", attrs)(xi)
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, reference_pool(xi, (2, 2), (2, 2), "VALID", np.max))


# --- ResizeBilinear ----------------------------------------------------------------------------


def reference_bilinear(images, out_h, out_w):
    """TensorFlow's half-pixel bilinear resize, float32, lerp along x then y."""
    n, h, w, c = images.shape

    def weights(size, out):
        scale = F32(size) / F32(out)
        pos = (np.arange(out, dtype=F32) + F32(0.5)) * scale - F32(0.5)
        lo = np.maximum(np.floor(pos).astype(int), 0)
        hi = np.minimum(np.ceil(pos).astype(int), size - 1)
        return lo, hi, (pos - np.floor(pos)).astype(F32)

    ylo, yhi, yw = weights(h, out_h)
    xlo, xhi, xw = weights(w, out_w)
    out = np.empty((n, out_h, out_w, c), F32)
    for y in range(out_h):
        top = images[:, ylo[y]][:, xlo] + (images[:, ylo[y]][:, xhi] - images[:, ylo[y]][:, xlo]) \
            * xw[None, :, None]
        bottom = images[:, yhi[y]][:, xlo] + (images[:, yhi[y]][:, xhi]
                                              - images[:, yhi[y]][:, xlo]) * xw[None, :, None]
        out[:, y] = top + (bottom - top) * yw[y]
    return out


@pytest.mark.parametrize("shape,size", [
    ((40, 15, 15, 4), (30, 30)),  # several blocks of images
    ((3, 13, 11, 2), (26, 17)),
    ((5, 20, 9, 3), (4, 5)),  # shrinking: rows first
    ((1, 70, 80, 3), (140, 160)),  # one image per block
])
def test_resize_bilinear_blocks_match_definition(shape, size) -> None:
    images = RNG.uniform(0, 255, shape).astype(F32)
    kernel = instantiate("ResizeBilinear", {"half_pixel_centers": True})
    result = kernel(images, np.array(size, np.int32))
    np.testing.assert_array_equal(result, reference_bilinear(images, *size))


# --- helpers -----------------------------------------------------------------------------------


def test_scratch_is_per_thread_and_bounded(monkeypatch) -> None:
    class Buffer:
        def __init__(self, size: int) -> None:
            self.data = np.zeros(size, np.uint8)
            self.nbytes = size

    monkeypatch.setattr(nn_ops_common, "_SCRATCH_LIMIT", 1000)
    results: dict[str, object] = {}

    def work() -> None:
        first = scratch(("test-key", 1), lambda: Buffer(400))
        results["same"] = scratch(("test-key", 1), lambda: Buffer(400)) is first
        scratch(("test-key", 2), lambda: Buffer(400))
        scratch(("test-key", 3), lambda: Buffer(400))  # over the limit: the oldest goes
        results["evicted"] = scratch(("test-key", 1), lambda: Buffer(400)) is not first
        results["first"] = first

        huge = scratch(("test-key", 4), lambda: Buffer(2000))
        results["huge"] = scratch(("test-key", 4), lambda: Buffer(2000)) is not huge

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert results["same"] and results["evicted"] and results["huge"]
    # Another thread builds its own.
    assert scratch(("test-key", 1), lambda: Buffer(400)) is not results["first"]


def test_derived_values_are_remembered_only_for_constants() -> None:
    derived = Derived()
    calls = []

    def build() -> int:
        calls.append(1)
        return len(calls)

    constant, writable = frozen(np.arange(3.0)), np.arange(3.0)
    assert is_constant(constant) and not is_constant(writable)
    assert not is_constant(np.broadcast_to(writable, (2, 3)))
    assert derived.get((constant,), "k", build) == derived.get((constant,), "k", build) == 1
    assert derived.get((writable,), "k", build) == 2
    assert derived.get((writable,), "k", build) == 3
    assert derived.get((constant,), "other", build) == 4


@pytest.mark.parametrize("shape", [(64, 9, 10, 6), (2, 3, 4), (1, 2, 2, 3), (40, 6, 7, 1)])
@pytest.mark.parametrize("ufunc", [np.add, np.multiply])
def test_channel_op_matches_broadcasting(shape, ufunc) -> None:
    value, vector = normal(*shape), frozen(normal(shape[-1]))
    result = channel_op(ufunc, value, vector)
    np.testing.assert_array_equal(result, ufunc(value, vector))
    assert result is not value
    strided = normal(64, 10, 10, 12)[:, ::2, :, :6]
    np.testing.assert_array_equal(channel_op(ufunc, strided, vector[:1].repeat(6)),
                                  ufunc(strided, vector[:1].repeat(6)))


def test_window_geometry_used_by_the_grid() -> None:
    # SAME with stride 2 on an even size pads only after; the grid relies on these numbers.
    assert window(14, 3, 2, 1, "SAME") == Window(7, 0, 1)
    assert window(15, 3, 2, 1, "VALID") == Window(7, 0, 0)


def test_tiling_gives_each_thread_an_equal_share() -> None:
    # One thread, or too little work to share: blocks of at most block_rows, all columns.
    assert tiling(3136, 577, 64, 1).rows == min(3136, block_rows(577, 64))
    assert tiling(3136, 8, 8, 2).columns == ((0, 8),)
    # Row blocks, shared out as intra_op.run_blocks does: every thread gets about as many rows.
    for m, threads in [(3136, 2), (784, 2), (196, 2), (25088, 3), (200, 2), (130, 2)]:
        cut = tiling(m, 577, 64, threads)
        assert cut.columns == ((0, 64),) and cut.rows <= block_rows(577, 64)
        blocks = -(-m // cut.rows)
        ends = [min(m, blocks * i // threads * cut.rows) for i in range(threads + 1)]
        shares = [end - first for first, end in itertools.pairwise(ends)]
        assert min(shares) > 0 and max(shares) <= 1.1 * min(shares), (m, threads, shares)
    # Too few rows for each thread: one block, its columns shared on whole vector widths.
    cut = tiling(49, 4609, 512, 2)
    assert cut.rows == 49 and cut.columns == ((0, 256), (256, 512))
    assert tiling(49, 4609, 200, 3).columns == ((0, 64), (64, 128), (128, 200))
    assert tiling(49, 4609, 16, 2).columns == ((0, 16),)  # too narrow to share


# One case per algorithm, and the filter's columns shared (few rows, on threads).
RESIDUAL_CASES = [
    ("pointwise_in_place", (1, 20, 20, 32), (1, 1, 32, 16), (1, 1), "VALID"),
    ("pointwise_gathered", (2, 20, 20, 16), (1, 1, 16, 48), (2, 2), "VALID"),
    ("patches", (2, 30, 30, 16), (3, 3, 16, 24), (1, 1), "SAME"),
    ("channel_major", (1, 64, 64, 3), (7, 7, 3, 32), (2, 2), "SAME"),
    ("columns", (1, 7, 7, 256), (3, 3, 256, 200), (1, 1), "SAME"),
]


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("case", RESIDUAL_CASES, ids=[c[0] for c in RESIDUAL_CASES])
@pytest.mark.parametrize("activation", ["Relu", "Relu6", ""])
def test_fused_residual_add_is_added_block_by_block(case: tuple, activation: str, threads: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime import intra_op
    from runtime.kernels import nn_ops_conv

    blocks: list[tuple[int, ...]] = []
    adding = nn_ops_conv._adding

    def counted(side, act):  # type: ignore[no-untyped-def]
        block = adding(side, act)

        def run(y):  # type: ignore[no-untyped-def]
            blocks.append(y.shape)
            return block(y)

        return run

    monkeypatch.setattr(nn_ops_conv, "_adding", counted)
    _, x_shape, f_shape, strides, padding = case
    x, f, bias = normal(*x_shape), frozen(normal(*f_shape)), frozen(normal(f_shape[3]))
    fused_ops = ["BiasAdd", "Add", *([activation] if activation else [])]
    fused = instantiate("_FusedConv2D", {**conv_attrs(strides, (1, 1), padding),
                                         "fused_ops": fused_ops, "num_args": 2})
    conv = instantiate("Conv2D", conv_attrs(strides, (1, 1), padding))(x, f) + bias
    side = normal(*conv.shape) * 3
    intra_op.set_threads(threads)
    try:
        for _ in range(3):  # scratch reused, and the threads' shares in several orders
            result = fused(x, f, bias, side)
            expected = _activation(activation, conv + side)
            np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)
    finally:
        intra_op.set_threads(1)
    assert blocks  # added by the blocks as they were written
    # A side input that broadcasts: to the output's shape, and to a larger one.
    for other in (normal(1, 1, 1, f_shape[3]), normal(3, *conv.shape[1:]) if x_shape[0] == 1
                  else normal(*conv.shape[1:])):
        np.testing.assert_allclose(fused(x, f, bias, other), _activation(activation, conv + other),
                                   rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("blas_single_threaded", [True, False])
@pytest.mark.parametrize("x_shape,f_shape", [((2, 56, 56, 32), (3, 3, 32, 48)),
                                             ((1, 50, 50, 16), (1, 1, 16, 96))])
def test_blocks_for_either_kind_of_blas(blas_single_threaded: bool, x_shape: tuple,
                                        f_shape: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    # The block sizes depend on whether BLAS has threads of its own; both give the convolution.
    monkeypatch.setattr(nn_ops_conv_gemm, "BLAS_SINGLE_THREADED", blas_single_threaded)
    x, f = normal(*x_shape), normal(*f_shape)
    result = instantiate("Conv2D", conv_attrs((1, 1), (1, 1), "SAME"))(x, f)
    pads = pads_of("SAME", x_shape[1:3], f_shape[:2], (1, 1), (1, 1), None)
    np.testing.assert_allclose(result, reference_conv(x, f, (1, 1), (1, 1), pads), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"],
                                       ["BiasAdd", "Elu"]])
def test_pointwise_applies_bias_and_activation_block_by_block(fused_ops) -> None:
    x, f, bias = normal(1, 40, 40, 16), normal(1, 1, 16, 96), normal(96)
    shape = ConvShape(1, 40, 40, 16, 1, 1, 96, (1, 1), (1, 1), Window(40, 0, 0),
                      Window(40, 0, 0), np.dtype(np.float32))
    assert type(choose(shape)) is Pointwise and block_rows(16, 96) < 40 * 40  # several blocks
    attrs = {**conv_attrs((1, 1), (1, 1), "VALID"), "fused_ops": fused_ops, "num_args": 1}
    result = instantiate("_FusedConv2D", attrs)(x, frozen(f), frozen(bias))
    y = reference_conv(x, f, (1, 1), (1, 1), ((0, 0), (0, 0))) + bias
    activation = fused_ops[1] if len(fused_ops) > 1 else ""
    if activation == "Elu":
        y = np.where(y > 0, y, np.expm1(np.minimum(y, 0)))
    else:
        y = _activation(activation, y)
    np.testing.assert_allclose(result, y, rtol=1e-5, atol=1e-5)
