"""The logistic function and Swish (``x * sigmoid(x)``), in place, for the Sigmoid kernel and the
fused activations.

float32 tensors go through ``_logistic`` (``_logistic.c``, built with the package): one AVX2 pass
of about 1.7 ns a value where numpy's passes take about 4.5, most of it numpy's ``exp``. Where
that module was not built (no C compiler at install) or the CPU lacks AVX2 and FMA, and for other
dtypes, numpy computes the same formulas. The two agree to float32 rounding (a few ulp), not bit
for bit: the compiled ``exp`` is a polynomial of its own.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

_compiled: ModuleType | None
try:
    from runtime.kernels import _logistic as _compiled
except ImportError:  # built without a C compiler
    _compiled = None

# Whether float32 tensors take the compiled loop; tests and benchmarks read it.
COMPILED = _compiled is not None and _compiled.supported()


def _takes_compiled(y: np.ndarray) -> bool:
    return (COMPILED and y.dtype == np.float32
            and (y.ndim == 0 or y.shape[-1] <= 1 or y.strides[-1] == 4))


def numpy_sigmoid_(y: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-y))`` in numpy, in place; exp overflowing to inf gives the limit 0."""
    np.negative(y, out=y)
    np.exp(y, out=y)
    y += 1
    np.reciprocal(y, out=y)
    return y


def numpy_swish_(y: np.ndarray) -> np.ndarray:
    """``y / (1 + exp(-y))`` in numpy, in place: one division for the reciprocal and product."""
    e = np.negative(y, out=np.empty_like(y))  # an array, also for rank 0
    np.exp(e, out=e)
    e += 1
    np.divide(y, e, out=y)
    return y


def sigmoid_(y: np.ndarray) -> np.ndarray:
    """The logistic function of ``y``, written into ``y``."""
    if _compiled is not None and _takes_compiled(y):
        _compiled.sigmoid(y, y)
        return y
    return numpy_sigmoid_(y)


def swish_(y: np.ndarray) -> np.ndarray:
    """``y * sigmoid(y)``, written into ``y``."""
    if _compiled is not None and _takes_compiled(y):
        _compiled.swish(y, y)
        return y
    return numpy_swish_(y)
