"""Which of the package's optional compiled loops (``runtime/kernels/_*.c``) this process runs.

Each is built by the package install where a C compiler is at hand, and used where the CPU has
AVX2 and FMA; without it, its kernels run in numpy, to float32 rounding the same answers.
"""

from __future__ import annotations

from runtime.kernels import logistic, nn_ops_depthwise


def compiled_loops() -> list[str]:
    """The names of the compiled loops in use: ``logistic`` (Sigmoid and Swish) and
    ``depthwise`` (depthwise convolution with one filter per channel)."""
    used = {"logistic": logistic.COMPILED, "depthwise": nn_ops_depthwise.COMPILED}
    return [name for name, on in used.items() if on]
