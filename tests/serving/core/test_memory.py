"""Loading and unloading a model many times gives its memory back.

Resident memory is read from /proc after 100 load/predict/unload cycles of the largest fixture
model through the real manager; it must stay within 10% of where it was after a few warm-up
cycles (the first ones fill import and allocator caches). Run with ``-s`` to see the numbers.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from runtime.saved_model import load_saved_model
from serving.core.aspired import AspiredVersion
from serving.core.manager import AspiredVersionsManager
from serving.core.state_monitor import ServableStateMonitor
from serving.servable import ManagerState, ServableId, ServableRequest
from tests.serving.support import FIXTURE_MODELS, expected_cases

MODEL_DIR = FIXTURE_MODELS / "transformer_block"
WARM_CYCLES = 5
CYCLES = 100

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_load_unload_cycles_return_memory() -> None:
    case = next(c for (sig, _), c in expected_cases(MODEL_DIR).items()
                if sig == "serving_default")
    monitor = ServableStateMonitor()
    manager = AspiredVersionsManager(
        lambda id, path: load_saved_model(path), monitor, autostart=False, inline_actions=True,
        load_retry_interval_s=0,
    )

    def cycle(version: int) -> None:
        manager.set_aspired_versions("m", [AspiredVersion(version, MODEL_DIR / "1")])
        while manager.step():
            pass
        with manager.handle(ServableRequest("m")) as handle:
            outputs = handle.servable.run("serving_default", case["in"])
        for alias, want in case["out"].items():
            np.testing.assert_allclose(outputs[alias], want, rtol=1e-5, atol=1e-6)
        manager.set_aspired_versions("m", [])
        while manager.step():
            pass
        latest = monitor.states("m")[0]
        assert (latest.id, latest.state) == (ServableId("m", version), ManagerState.END)

    try:
        for version in range(WARM_CYCLES):
            cycle(version)
        gc.collect()
        start = resident_bytes()
        for version in range(WARM_CYCLES, WARM_CYCLES + CYCLES):
            cycle(version)
        gc.collect()
        end = resident_bytes()
    finally:
        manager.close()
    print(f"\nresident memory: {start / 2**20:.1f} MiB after {WARM_CYCLES} warm-up cycles, "
          f"{end / 2**20:.1f} MiB after {CYCLES} more ({(end - start) / start:+.1%})")
    assert end <= start * 1.10


def test_unload_drops_every_reference_to_the_model() -> None:
    import weakref

    monitor = ServableStateMonitor()
    loaded: list[weakref.ref[object]] = []

    def load(id: ServableId, path: Path) -> object:
        model = load_saved_model(path)
        loaded.append(weakref.ref(model))
        return model

    manager = AspiredVersionsManager(
        load, monitor, autostart=False, inline_actions=True, load_retry_interval_s=0
    )
    try:
        manager.set_aspired_versions("m", [AspiredVersion(1, MODEL_DIR / "1")])
        while manager.step():
            pass
        assert loaded[0]() is not None
        manager.set_aspired_versions("m", [])
        while manager.step():
            pass
        gc.collect()
        assert loaded[0]() is None
    finally:
        manager.close()
