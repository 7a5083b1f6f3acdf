"""Tensor values as JSON tokens, printed exactly as TensorFlow Serving prints them.

TensorFlow Serving writes a float as ``%.6g`` when that text parses back to the same value at
the tensor's precision, else with ``max_digits10`` significant digits (``%.9g`` for float32,
``%.17g`` for float64), then appends ``.0`` when the text has neither ``.`` nor ``e``. So
``3.0``, ``0.1``, ``9e+06``, ``0.731058598``; NaN and infinities become the bare tokens ``NaN``,
``Infinity`` and ``-Infinity``. This is *not* the shortest round-trip form: a float32 that needs
7 or 8 digits is printed with 9 (numpy's shortest repr would print ``0.7310586``).

The literal steps format each value twice and parse it once. Here the decision (does the
6-digit form read back? is it a whole number?) is made for the whole array with numpy, so each
value is formatted exactly once, with the one printf format that yields TensorFlow's text.
Values where that arithmetic is not provably exact go through the reference steps. Those numpy
steps cost tens of microseconds whatever the size, so small arrays (a batch-1 prediction) take
the literal steps per value instead, which is several times faster there.
"""

from __future__ import annotations

import math
import struct

import numpy as np

# Exact float64 powers of ten (10**22 is the largest exactly representable one).
_POW10 = 10.0 ** np.arange(23)
_MAX_DIGITS = {np.dtype(np.float32): 9, np.dtype(np.float64): 17}


def reference_float_token(value: float, dtype: np.dtype) -> str:
    """One value, following TensorFlow Serving's steps literally (the oracle for the fast path)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = format(value, ".6g")
    if np.dtype(dtype).type(float(text)) != np.dtype(dtype).type(value):
        text = format(value, f".{_MAX_DIGITS[np.dtype(dtype)]}g")
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _round_to_digits(a: np.ndarray, exp10: np.ndarray, digits: int) -> tuple[np.ndarray, ...]:
    """Round positive ``a`` to ``digits`` significant digits: integer ``q`` and exponent ``x``
    with value ~= q * 10**(x - digits + 1) and 10**(digits-1) <= q < 10**digits.

    Also returns ``k`` (the power of ten applied) so callers can tell whether the scaling was
    done with an exact power. ``exp10`` is a first guess of floor(log10(a)), corrected here.
    """
    x = exp10.copy()
    lo, hi = 10.0 ** (digits - 1), 10.0**digits
    for _ in range(3):
        k = (digits - 1) - x
        scaled = np.where(
            k >= 0, a * _POW10[np.clip(k, 0, 22)], a / _POW10[np.clip(-k, 0, 22)]
        )
        q = np.rint(scaled)
        too_big, too_small = q >= hi, q < lo
        if not (too_big.any() or too_small.any()):
            break
        # A wrong first guess, or rounding that carries into a new digit (999999.7 ->
        # 1000000), moves the exponent by one.
        x = x + too_big - too_small
    return q, x, (digits - 1) - x


# Below this many values the per-value steps beat the whole-array arithmetic (measured: ~0.5 µs
# per value against ~45 µs + 0.25 µs per value).
SMALL_ARRAY = 128
_SPECIAL = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_F32 = struct.Struct("f")


def _small_float_tokens(values: list[float], single: bool) -> list[str]:
    """TensorFlow Serving's steps, value by value. ``single``: the values are float32 (the
    round trip is checked at float32 precision: struct's "f" rounds a double to nearest, as
    numpy does)."""
    pack, unpack = _F32.pack, _F32.unpack
    long_format = ".9g" if single else ".17g"
    tokens = []
    for value in values:
        text = format(value, ".6g")
        back = float(text)
        if single:
            try:
                back = unpack(pack(back))[0]
            except OverflowError:
                back = math.inf
        if back != value:
            text = format(value, long_format)
        if "." not in text and "e" not in text:
            text = _SPECIAL.get(text) or text + ".0"
        tokens.append(text)
    return tokens


def float_tokens(values: np.ndarray) -> list[str]:
    """JSON tokens for a float32 or float64 array, in row-major order."""
    flat = np.ascontiguousarray(values).reshape(-1)
    dtype = flat.dtype
    if flat.size <= SMALL_ARRAY:
        return _small_float_tokens(flat.tolist(), dtype == np.float32)
    digits_max = _MAX_DIGITS[dtype]
    tokens = np.empty(flat.shape, dtype=object)

    finite = np.isfinite(flat)
    if not finite.all():
        tokens[np.isnan(flat)] = "NaN"
        tokens[flat == np.inf] = "Infinity"
        tokens[flat == -np.inf] = "-Infinity"
    todo = np.flatnonzero(finite & (flat != 0))
    zero = np.flatnonzero(flat == 0)
    if zero.size:
        tokens[zero] = np.where(np.signbit(flat[zero]), "-0.0", "0.0").tolist()
    if todo.size == 0:
        return tokens.tolist()

    vals = flat[todo]
    a = np.abs(vals.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.floor(np.log10(a)).astype(np.int64)
    # Does the 6-digit form read back as the same value? Decided numerically where the power of
    # ten is exact (then the scaled value is exact enough; see _round_to_digits), by the
    # reference steps elsewhere.
    q6, _, k6 = _round_to_digits(a, guess, 6)
    exact = np.abs(k6) <= 22
    kc = np.clip(k6, -22, 22)
    back = np.where(kc >= 0, q6 / _POW10[np.abs(kc)], q6 * _POW10[np.abs(kc)])
    six = exact & (back.astype(dtype) == np.abs(vals))
    # Whole numbers that print without '.' or 'e' get TensorFlow's '.0': exactly '%.1f'.
    whole = (a == np.floor(a)) & np.where(six, a < 1e6, a < 10.0**digits_max)

    groups = (
        (exact & whole, "%.1f"),
        (exact & six & ~whole, "%.6g"),
        (exact & ~six & ~whole, "%." + str(digits_max) + "g"),
    )
    for mask, fmt in groups:
        idx = np.flatnonzero(mask)
        if idx.size:
            tokens[todo[idx]] = list(map(fmt.__mod__, vals[idx].tolist()))
    rest = np.flatnonzero(~exact)
    if rest.size:
        tokens[todo[rest]] = [reference_float_token(v, dtype) for v in vals[rest].tolist()]
    return tokens.tolist()


def int_tokens(values: np.ndarray) -> list[str]:
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size <= SMALL_ARRAY:
        return list(map(str, flat.tolist()))
    tokens: list[str] = flat.astype(str).tolist()
    return tokens


def bool_tokens(values: np.ndarray) -> list[str]:
    tokens: list[str] = np.where(np.asarray(values).reshape(-1), "true", "false").tolist()
    return tokens
