"""Running a plan of calls with Triton's own client (``triton_client.py``, in ``.venv-triton``,
whose protobuf cannot share graphserve's) against a daemon, and reading its answers."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import REPO

TRITON_PYTHON = REPO / ".venv-triton" / "bin" / "python"
CLIENT = REPO / "tests" / "serving" / "v2" / "triton_client.py"

Results = dict[str, dict[str, Any]]  # by call id


def run_triton(
    server: ServerProcess, work: Path, arrays: dict[str, np.ndarray],
    calls: list[dict[str, Any]], timeout_s: float = 300,
) -> tuple[Results, dict[str, np.ndarray]]:
    """Every call of the plan, in order: (results by call id, numeric outputs by key).
    Skips the test where Triton's environment is missing."""
    if not TRITON_PYTHON.exists():
        pytest.skip("needs Triton's client environment (.venv-triton)")
    np.savez(work / "in.npz", **arrays)
    (work / "plan.json").write_text(json.dumps({
        "http": f"127.0.0.1:{server.port}", "grpc": f"127.0.0.1:{server.grpc_port}",
        "arrays": str(work / "in.npz"), "out_arrays": str(work / "out.npz"), "calls": calls,
    }))
    run = subprocess.run([str(TRITON_PYTHON), str(CLIENT), str(work / "plan.json")],
                         check=False, capture_output=True, text=True, timeout=timeout_s)
    assert run.returncode == 0, run.stderr[-5000:]
    results = {r["id"]: r for r in json.loads(run.stdout)}
    assert list(results) == [c["id"] for c in calls]
    with np.load(work / "out.npz", allow_pickle=False) as out:
        return results, {key: out[key] for key in out.files}


def output_array(result: dict[str, Any], name: str, out: dict[str, np.ndarray],
                 strings: type = object) -> np.ndarray:
    """One output Triton's client decoded: numeric from ``out``, BYTES from their base64 (as
    ``strings``: object, or ``bytes`` for an ``S`` array)."""
    info = result["outputs"][name]
    if "bytes" in info:
        values = [base64.b64decode(v) for v in info["bytes"]]
        return np.array(values, dtype=strings).reshape(info["shape"])
    return out[info["key"]]
