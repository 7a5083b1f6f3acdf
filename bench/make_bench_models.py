"""Benchmark-only SavedModels, made by TensorFlow into ``bench/.cache/models/`` (never committed).

    .venv-tf/bin/python bench/make_bench_models.py [--out bench/.cache/models] [--force]

``mlp_wide``: a dense 256 -> 1024 -> 1024 -> 16 network (ReLU between layers, linear output),
float32, signature ``serving_default``: ``features [N, 256] -> output_0 [N, 16]``. About 1.3 M
multiply-adds per row, so a batch-1 call is dominated by reading 5 MB of weights: the kind of
model where batching pays. Weights come from a fixed seed, so every build is the same model.

Next to the version directory it writes ``expected.npz`` in the fixtures' layout
(``serving_default/<case>/in/features``, ``.../out/output_0``), TensorFlow's own answers for fixed
inputs, and ``spec.json``; a model whose ``spec.json`` matches is not rebuilt. Runs in
TensorFlow's environment only: the benchmark itself never imports TensorFlow.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / ".cache" / "models"

SPECS: dict[str, dict] = {
    "mlp_wide": {"layers": [256, 1024, 1024, 16], "seed": 5, "cases": {"batch1": 1, "batch8": 8}},
}


def build(name: str, spec: dict, target: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    sizes = spec["layers"]
    rng = np.random.default_rng(spec["seed"])

    class DenseStack(tf.Module):
        def __init__(self) -> None:
            super().__init__(name=name)
            self.weights = []
            self.biases = []
            for fan_in, fan_out in itertools.pairwise(sizes):
                # He-scaled weights keep activations near unit size through the ReLUs.
                w = rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_in, fan_out)).astype(np.float32)
                b = rng.normal(0.0, 0.05, fan_out).astype(np.float32)
                self.weights.append(tf.Variable(w))
                self.biases.append(tf.Variable(b))

        @tf.function(input_signature=[tf.TensorSpec([None, sizes[0]], tf.float32, "features")])
        def serve(self, features: tf.Tensor) -> dict[str, tf.Tensor]:
            x = features
            last = len(self.weights) - 1
            for i, (w, b) in enumerate(zip(self.weights, self.biases)):
                x = tf.nn.bias_add(tf.matmul(x, w), b)
                if i < last:
                    x = tf.nn.relu(x)
            return {"output_0": x}

    module = DenseStack()
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        tf.saved_model.save(module, str(staging / "1"),
                            signatures={"serving_default": module.serve})
        # Expected outputs from the saved model as TensorFlow loads it, not from the module.
        serve = tf.saved_model.load(str(staging / "1")).signatures["serving_default"]
        arrays: dict[str, np.ndarray] = {}
        for case, rows in spec["cases"].items():
            x = rng.uniform(-1.0, 1.0, (rows, sizes[0])).astype(np.float32)
            y = serve(features=tf.constant(x))["output_0"].numpy()
            arrays[f"serving_default/{case}/in/features"] = x
            arrays[f"serving_default/{case}/out/output_0"] = y
        np.savez(staging / "expected.npz", **arrays)
        (staging / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # whole or not at all: a half-built model is never cached
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def cached(target: Path, spec: dict) -> bool:
    try:
        return json.loads((target / "spec.json").read_text()) == spec
    except (OSError, ValueError):
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--models", default=",".join(SPECS), help="comma separated")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in [m for m in args.models.split(",") if m]:
        if name not in SPECS:
            parser.error(f"unknown model {name!r}; known: {', '.join(SPECS)}")
        target = args.out / name
        if not args.force and cached(target, SPECS[name]):
            print(f"{name}: cached in {target}")
            continue
        build(name, SPECS[name], target)
        print(f"{name}: built in {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
