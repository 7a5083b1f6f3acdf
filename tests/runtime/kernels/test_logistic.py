"""The compiled logistic function and Swish (``runtime/kernels/_logistic.c``) against float64
and against the numpy forms they replace, over the values where exp is hard: its overflow and
underflow edges, infinities, NaN, signed zero, subnormals, and every tail length of the 8-lane
loop."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from runtime.kernels import logistic

needs_compiled = pytest.mark.skipif(not logistic.COMPILED, reason="the compiled loop is not in use")

EDGES = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-40, -1e-40, 88.37, 88.38, 88.8,
     -87.33, -87.34, -88.8, -103.0, 103.0, 1e30, -1e30, 16.0, -16.0, 17.5, -17.5],
    np.float32)


def _values() -> np.ndarray:
    rng = np.random.default_rng(11)
    spread = [rng.standard_normal(4000) * scale for scale in (0.5, 4.0, 40.0)]
    return np.concatenate([EDGES, *spread]).astype(np.float32)


def _exp_of_minus(x: np.ndarray) -> np.ndarray:
    # exp(-x) in float64, overflowing to inf where float32's does: the formulas' limits (0 for
    # the logistic function, -0 or NaN for Swish) come from that overflow.
    with np.errstate(over="ignore"):
        e = np.exp(-x.astype(np.float64))
    e[e > np.finfo(np.float32).max] = np.inf
    return e


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + _exp_of_minus(x))


def _swish64(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return x.astype(np.float64) / (1.0 + _exp_of_minus(x))


FORMS = {
    "sigmoid": (logistic.sigmoid_, logistic.numpy_sigmoid_, _sigmoid64),
    "swish": (logistic.swish_, logistic.numpy_swish_, _swish64),
}


def _apply(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    y = x.copy()
    with np.errstate(all="ignore"):
        out = fn(y)
    assert out is y  # in place
    return y


@needs_compiled
@pytest.mark.parametrize("form", sorted(FORMS))
def test_compiled_matches_float64_within_float32_rounding(form: str) -> None:
    compiled, _, exact = FORMS[form]
    x = _values()
    got, want = _apply(compiled, x), exact(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    number = np.isfinite(want)
    assert np.array_equal(np.signbit(got[number]), np.signbit(want[number]))
    # Where float32 holds the value only as a subnormal, its own spacing is the measure.
    error = np.abs(got[number] - want[number])
    scale = np.maximum(np.abs(want[number]), np.finfo(np.float32).tiny)
    assert (error / scale).max() < 4 * np.finfo(np.float32).eps


@needs_compiled
@pytest.mark.parametrize("form", sorted(FORMS))
def test_compiled_agrees_with_numpy_on_every_tail_and_layout(form: str) -> None:
    compiled, numpy_form, _ = FORMS[form]
    x = _values()
    views: list[Callable[[np.ndarray], np.ndarray]] = [
        *(lambda a, n=n: a[:n] for n in range(18)),  # every tail of the 8-lane loop
        lambda a: a[:2400].reshape(40, 60)[:, 3:50],  # rows apart, last axis contiguous
        lambda a: a[:2400].reshape(4, 10, 60).transpose(1, 0, 2),  # leading axes permuted
        lambda a: a[:2400].reshape(40, 60)[::2, 5:13],
        lambda a: a[:2400].reshape(40, 60)[:, :1],
        lambda a: a[:2400].reshape(40, 60)[:, 0:60:7],  # last axis strided: numpy's path
        lambda a: a[5:6].reshape(()),  # rank 0
    ]
    for view in views:
        # Each form works in place on the same view of its own copy.
        mine, theirs = x.copy(), x.copy()
        with np.errstate(all="ignore"):
            assert compiled(view(mine)) is not None and numpy_form(view(theirs)) is not None
        got, want = view(mine), view(theirs)
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float32).eps, atol=1e-37)
        # Outside the view nothing was written.
        outside = np.ones(x.shape, bool)
        view(outside)[...] = False
        assert mine[outside].tobytes() == x[outside].tobytes()


@needs_compiled
def test_compiled_writes_the_destination_and_leaves_the_source() -> None:
    from runtime.kernels import _logistic

    x = _values()[:1003]
    before = x.copy()
    out = np.full_like(x, 7.0)
    _logistic.swish(x, out)
    assert x.tobytes() == before.tobytes()
    np.testing.assert_allclose(out, _apply(logistic.numpy_swish_, x), rtol=1e-6, atol=1e-37)


@needs_compiled
def test_compiled_refuses_what_it_cannot_read() -> None:
    from runtime.kernels import _logistic

    x = np.ones((4, 6), np.float32)
    with pytest.raises(TypeError, match="float32"):
        _logistic.sigmoid(x.astype(np.float64), x)
    with pytest.raises(ValueError, match="contiguous last axis"):
        _logistic.sigmoid(x[:, ::2], x[:, :3])
    with pytest.raises(ValueError, match="shape"):
        _logistic.swish(x, x[:2])
    frozen = x.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _logistic.swish(x, frozen)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_other_dtypes_take_the_numpy_form(form: str) -> None:
    compiled, numpy_form, _ = FORMS[form]
    x = _values().astype(np.float64)
    got = _apply(compiled, x)
    assert got.dtype == np.float64
    assert got.tobytes() == _apply(numpy_form, x).tobytes()
