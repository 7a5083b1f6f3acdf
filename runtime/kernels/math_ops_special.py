"""erf and erfc over numpy arrays.

numpy has neither, and calling ``math.erf`` per element is far too slow for a kernel. These use
W. J. Cody's rational Chebyshev approximations ("Rational Chebyshev approximations for the error
function", Math. Comp. 23, 1969), evaluated in float64 on three intervals of |x|:

* |x| <= 0.46875: erf(x) = x * A(x^2) / B(x^2)
* 0.46875 < |x| <= 4: erfc(|x|) = exp(-x^2) * C(|x|) / D(|x|)
* |x| > 4: erfc(|x|) = exp(-x^2) / |x| * (1/sqrt(pi) + R(1/x^2) / x^2)

which is accurate to about 1e-16 relative in float64. That takes some hundred numpy calls, so
``erf`` of float32 (and of half and bfloat16, through float32) uses one rational function instead,
evaluated in float32: within 7 ulp of the true value.

``erfc`` of float32 needs relative accuracy in its tail, which ``1 - erf`` cannot give. It is
written as ``erfc(a) = t * exp(-a*a + s * Q(v))`` for ``a = |x|``, with ``t = 1 / (1 + p*a)``,
``s = 1 - t`` and ``v = 1 - 2*s``, and ``erfc(-a) = 2 - erfc(a)``; ``Q`` is a polynomial of degree
8 in ``v``, a weighted least-squares fit (Lawson reweighting towards minimax) of the exponent over
``0 <= a <= 10.1``, whose own error is below 1.5e-8. ``a*a`` is split as ``h*h + (a-h)*(a+h)`` with
``h`` holding ``a``'s top 12 bits, so that ``exp(-h*h)`` sees an exact argument. All of it runs in
float32 (about forty numpy calls, no masks): within 7 ulp of the true value.
"""

from __future__ import annotations

import numpy as np

# Coefficients run from the constant term upwards; the denominators are monic (their leading
# coefficient 1 is left implicit).
_A = (
    3.20937758913846947e03,
    3.77485237685302021e02,
    1.13864154151050156e02,
    3.16112374387056560e00,
    1.85777706184603153e-1,
)
_B = (
    2.84423683343917062e03,
    1.28261652607737228e03,
    2.44024637934444173e02,
    2.36012909523441209e01,
)
_C = (
    1.23033935479799725e03,
    2.05107837782607147e03,
    1.71204761263407058e03,
    8.81952221241769090e02,
    2.98635138197400131e02,
    6.61191906371416295e01,
    8.88314979438837594e00,
    5.64188496988670089e-1,
    2.15311535474403846e-8,
)
_D = (
    1.23033935480374942e03,
    3.43936767414372164e03,
    4.36261909014324716e03,
    3.29079923573345963e03,
    1.62138957456669019e03,
    5.37181101862009858e02,
    1.17693950891312499e02,
    1.57449261107098347e01,
)
_P = (
    6.58749161529837803e-4,
    1.60837851487422766e-2,
    1.25781726111229246e-1,
    3.60344899949804439e-1,
    3.05326634961232344e-1,
    1.63153871373020978e-2,
)
_Q = (
    2.33520497626869185e-3,
    6.05183413124413191e-2,
    5.27905102951428412e-1,
    1.87295284992346725e00,
    2.56852019228982242e00,
)
_INV_SQRT_PI = 5.6418958354775628695e-1
_SMALL = 0.46875

# erf(x) / x = F_P(x*x) / F_Q(x*x) on |x| <= 4 (erf rounds to +-1 in float32 beyond): a rational
# fit of degree (6, 5), weighted least squares on relative error with Lawson reweighting, whose
# own error is below 2.1e-9 relative; float32 rounding of the evaluation dominates.
_F32_P = (
    1.1283791693235428,
    0.18520573624889017,
    0.054317331026798546,
    0.0038497291003321346,
    0.0003796149061528245,
    4.684862924391714e-06,
    -1.3202802259395398e-08,
)
_F32_Q = (
    1.0,
    0.4974677234766574,
    0.11395953258252553,
    0.015462340340859323,
    0.0013076025708165645,
    6.311146536925276e-05,
)
_F32_CLAMP = 4.0
_BLOCK = 1 << 15  # elements per pass of the float32 path: keeps its temporaries in cache

# erfc of float32: t = 1 / (1 + _ERFC_P * a) and the exponent's polynomial Q(v), constant term
# first (see the module docstring).
_ERFC_P = np.float32(0.46)
_ERFC_Q = tuple(
    np.float32(c)
    for c in (
        -1.4845898630411438,
        -0.06666404559795305,
        0.0965015191919663,
        0.017951382545400386,
        -0.01573732189030924,
        -0.004021925300413783,
        0.0035585280146349456,
        0.0007104597108231451,
        -0.0007093689600449375,
    )
)
_ERFC_CLAMP = np.float32(16.0)  # erfc(16) is 0 in float32; keeps inf out of the arithmetic
_HIGH_12_BITS = np.int32(-4096)  # float32 bit mask keeping sign, exponent and 12 mantissa bits
_ONE32 = np.float32(1.0)
_ABS_BITS = np.int32(0x7FFFFFFF)
_SIGN_BIT = np.int32(-0x80000000)
_ONE_BITS = np.float32(1.0).view(np.int32)


def _poly(coeffs: tuple[float, ...], t: np.ndarray) -> np.ndarray:
    """sum(coeffs[i] * t**i) by Horner's rule."""
    acc = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc *= t
        acc += c
    return acc


def _monic(coeffs: tuple[float, ...], t: np.ndarray) -> np.ndarray:
    """t**n + sum(coeffs[i] * t**i), n = len(coeffs)."""
    acc = t + coeffs[-1]
    for c in coeffs[-2::-1]:
        acc *= t
        acc += c
    return acc


def _erf_small(x: np.ndarray) -> np.ndarray:
    t = x * x
    result: np.ndarray = x * _poly(_A, t) / _monic(_B, t)
    return result


def _exp_minus_square(y: np.ndarray) -> np.ndarray:
    """exp(-y*y) without the rounding error of y*y growing with y: y = h + r, h a multiple of
    1/16 (h*h is exact), and exp(-y*y) = exp(-h*h) * exp(-(y - h) * (y + h))."""
    y = np.minimum(y, 64.0)  # exp(-y*y) is 0 long before; keeps inf out of y - h
    h = np.trunc(y * 16.0) / 16.0
    return np.exp(-h * h) * np.exp(-(y - h) * (y + h))


def _erfc_large(y: np.ndarray) -> np.ndarray:
    """erfc(y) for y > 0.46875 (y may be inf)."""
    result = np.empty_like(y)
    mid = y <= 4.0
    ym = y[mid]
    result[mid] = _exp_minus_square(ym) * _poly(_C, ym) / _monic(_D, ym)
    far = ~mid
    yf = y[far]
    t = np.square(1.0 / yf)  # not 1 / (yf * yf): that overflows for huge yf
    tail = t * _poly(_P, t) / _monic(_Q, t)
    result[far] = _exp_minus_square(yf) * (_INV_SQRT_PI - tail) / yf
    return result


def _as_float64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1)


def _erf_float32_block(x: np.ndarray) -> np.ndarray:
    x = np.minimum(np.maximum(x, -_F32_CLAMP), _F32_CLAMP)  # NaN stays NaN
    t = x * x
    p: np.ndarray = t * _F32_P[-1]
    p += _F32_P[-2]
    for c in _F32_P[-3::-1]:
        p *= t
        p += c
    q = t * _F32_Q[-1]
    q += _F32_Q[-2]
    for c in _F32_Q[-3::-1]:
        q *= t
        q += c
    p *= x
    p /= q
    return p


def _erf_float32(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(-1)
    if flat.size <= _BLOCK:
        return _erf_float32_block(flat).reshape(x.shape)
    out = np.empty_like(flat)
    for start in range(0, flat.size, _BLOCK):
        out[start : start + _BLOCK] = _erf_float32_block(flat[start : start + _BLOCK])
    return out.reshape(x.shape)


def erf(x: np.ndarray) -> np.ndarray:
    """Element-wise error function; keeps the input's float dtype."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return _erf_float32(x)
    if x.dtype != np.float64:
        return _erf_float32(x.astype(np.float32)).astype(x.dtype)
    flat = _as_float64(x)
    y = np.abs(flat)
    small = ~(y > _SMALL)  # NaN goes through the small-argument branch and stays NaN
    out = np.empty_like(flat)
    out[small] = _erf_small(flat[small])
    big = ~small
    if big.any():
        xb = flat[big]
        out[big] = np.copysign(1.0 - _erfc_large(np.abs(xb)), xb)
    return out.reshape(x.shape).astype(x.dtype, copy=False)


def _erfc_float32(x: np.ndarray) -> np.ndarray:
    """erfc of a 1-D float32 array (see the module docstring for the method)."""
    bits = x.view(np.int32)
    a = (bits & _ABS_BITS).view(np.float32)  # |x|, NaN kept
    np.minimum(a, _ERFC_CLAMP, out=a)
    s = a * _ERFC_P
    den = s + _ONE32  # 1 / t
    s /= den
    v = s * np.float32(-2.0)
    v += _ONE32
    acc = v * _ERFC_Q[-1]
    acc += _ERFC_Q[-2]
    for c in _ERFC_Q[-3::-1]:
        acc *= v
        acc += c
    acc *= s
    h = (a.view(np.int32) & _HIGH_12_BITS).view(np.float32)
    low = a - h
    a += h
    a *= low  # a*a - h*h, exactly enough
    acc -= a
    np.exp(acc, out=acc)
    np.multiply(h, h, out=h)
    np.negative(h, out=h)
    np.exp(h, out=h)
    acc *= h
    acc /= den
    # Negative x: 2 - erfc(|x|), as sign * r + (1 - sign) with sign = -1 (one rounding).
    sign = ((bits & _SIGN_BIT) | _ONE_BITS).view(np.float32)  # copysign(1, x)
    acc *= sign
    sign -= _ONE32
    acc -= sign
    return acc


def erfc(x: np.ndarray) -> np.ndarray:
    """Element-wise complementary error function; keeps the input's float dtype."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return _erfc_float32(x.reshape(-1)).reshape(x.shape)
    if x.dtype != np.float64:
        return _erfc_float32(x.astype(np.float32).reshape(-1)).reshape(x.shape).astype(x.dtype)
    flat = _as_float64(x)
    y = np.abs(flat)
    small = ~(y > _SMALL)
    out = np.empty_like(flat)
    out[small] = 1.0 - _erf_small(flat[small])
    big = ~small
    if big.any():
        xb = flat[big]
        tail = _erfc_large(np.abs(xb))
        out[big] = np.where(xb < 0, 2.0 - tail, tail)
    return out.reshape(x.shape)
