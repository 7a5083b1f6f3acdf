"""Shared test helpers: model locations and expected outputs recorded with TensorFlow."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from serving.config import ModelConfig
from serving.core.server_core import CoreOptions, ServerCore

REPO = Path(__file__).resolve().parents[2]
HALF_PLUS_TWO = REPO / "saved_models" / "half_plus_two"
FIXTURE_MODELS = REPO / "tests" / "fixtures" / "models"


def expected_cases(model_dir: Path) -> dict[tuple[str, str], dict[str, dict[str, np.ndarray]]]:
    """(signature, case) -> {"in": {alias: array}, "out": {alias: array}} from expected.npz."""
    cases: dict[tuple[str, str], dict[str, dict[str, np.ndarray]]] = {}
    with np.load(model_dir / "expected.npz", allow_pickle=False) as data:
        for key in data.files:
            signature, case, direction, alias = key.split("/", 3)
            entry = cases.setdefault((signature, case), {"in": {}, "out": {}})
            entry[direction][alias] = data[key]
    return cases


def start_core(configs: list[ModelConfig], timeout_s: float = 120.0) -> ServerCore:
    """An in-process ServerCore serving ``configs`` once every model is AVAILABLE. Labels are
    applied after the load, as TensorFlow Serving only lets labels name available versions."""
    core = ServerCore(CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0))
    try:
        core.reload_config([replace(c, version_labels={}) for c in configs])
        if not core.wait_until_ready(timeout_s):
            raise TimeoutError(f"models not ready: {core.readiness()}")
        core.reload_config(configs)
    except BaseException:
        core.close()
        raise
    return core
