"""The compiled loops are built by the README's install and used on a CPU that can run them: a
silent fall back to numpy would leave them untested by the rest of the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.kernels.compiled import compiled_loops


def _cpu_has_avx2_fma() -> bool:
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return {"avx2", "fma"} <= flags


@pytest.mark.skipif(not _cpu_has_avx2_fma(), reason="the CPU lacks AVX2 or FMA")
def test_every_compiled_loop_is_built_and_in_use() -> None:
    assert compiled_loops() == ["logistic", "depthwise"]
