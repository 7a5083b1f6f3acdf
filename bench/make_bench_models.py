"""Benchmark-only SavedModels, made by TensorFlow into ``bench/.cache/models/`` (never committed).

    .venv-tf/bin/python bench/make_bench_models.py [--out bench/.cache/models] [--models A,B]
        [--force]

``mlp_wide``: a dense 256 -> 1024 -> 1024 -> 16 network (ReLU between layers, linear output),
float32, signature ``serving_default``: ``features [N, 256] -> output_0 [N, 16]``. About 1.3 M
multiply-adds per row, so a batch-1 call is dominated by reading 5 MB of weights: the kind of
model where batching pays. Weights come from a fixed seed, so every build is the same model.

Convnets from ``keras.applications`` with random weights (``weights=None``, a fixed seed), for
``convnet_bench.py``: ``resnet50``, ``mobilenet`` (v1), ``mobilenet_v2``, ``efficientnet_b0``
(224x224x3) and ``xception`` (299x299x3, its default), float32, exported with Keras'
``model.export``: ``images [N, H, W, 3] -> output_0 [N, 1000]``, the logits (no softmax, so the
output check compares numbers of ordinary size). Freshly initialised batch-norm statistics
(mean 0, variance 1) let activations shrink layer after layer (MobileNet's logits come out near
1e-19, where any difference looks small), so before export each model runs one training-mode
forward pass over a random calibration batch with the batch norms' momentum at 0: every moving
mean and variance becomes that batch's statistics, and activations stay of unit size as in a
trained net. EfficientNetB0 rescales its input inside the model, so it is fed pixels in
[0, 255]; the others values in [-1, 1].

Next to the version directory it writes ``expected.npz`` in the fixtures' layout
(``serving_default/<case>/in/<alias>``, ``.../out/output_0``; batch1 and batch8), TensorFlow's own
answers for fixed inputs, and ``spec.json``; a model whose ``spec.json`` matches is not rebuilt.
Runs in TensorFlow's environment only: the benchmark itself never imports TensorFlow.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / ".cache" / "models"

CASES = {"batch1": 1, "batch8": 8}


def _application(name: str, seed: int, size: int = 224, pixels: bool = False) -> dict:
    low, high = (0.0, 255.0) if pixels else (-1.0, 1.0)
    return {"application": name, "input": [size, size, 3], "input_range": [low, high],
            "calibration_batch": 4, "seed": seed, "cases": CASES}


SPECS: dict[str, dict] = {
    "mlp_wide": {"layers": [256, 1024, 1024, 16], "seed": 5, "cases": CASES},
    "resnet50": _application("ResNet50", seed=11),
    "mobilenet": _application("MobileNet", seed=12),
    "mobilenet_v2": _application("MobileNetV2", seed=13),
    "efficientnet_b0": _application("EfficientNetB0", seed=14, pixels=True),
    "xception": _application("Xception", seed=15, size=299),
}


def build(name: str, spec: dict, target: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    rng = np.random.default_rng(spec["seed"])
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        export = export_application if "application" in spec else export_dense
        make_input = export(name, spec, rng, staging / "1")
        # Expected outputs from the saved model as TensorFlow loads it, not from the model object.
        serve = tf.saved_model.load(str(staging / "1")).signatures["serving_default"]
        (alias,) = serve.structured_input_signature[1]
        arrays: dict[str, np.ndarray] = {}
        for case, rows in spec["cases"].items():
            x = make_input(rows)
            y = serve(**{alias: tf.constant(x)})["output_0"].numpy()
            arrays[f"serving_default/{case}/in/{alias}"] = x
            arrays[f"serving_default/{case}/out/output_0"] = y
        np.savez(staging / "expected.npz", **arrays)
        (staging / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # whole or not at all: a half-built model is never cached
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def export_dense(
    name: str, spec: dict, rng: np.random.Generator, path: Path
) -> Callable[[int], np.ndarray]:
    import tensorflow as tf

    sizes = spec["layers"]

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
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    # The same generator, after the weights: inputs stay what earlier builds recorded.
    return lambda rows: rng.uniform(-1.0, 1.0, (rows, sizes[0])).astype(np.float32)


def export_application(
    name: str, spec: dict, rng: np.random.Generator, path: Path
) -> Callable[[int], np.ndarray]:
    import keras
    import tensorflow as tf

    keras.backend.clear_session()
    keras.utils.set_random_seed(spec["seed"])  # the initializers draw from Keras' global seed
    shape = tuple(spec["input"])
    low, high = spec["input_range"]
    model = getattr(keras.applications, spec["application"])(
        weights=None, input_shape=shape, classifier_activation=None
    )

    def make_input(rows: int) -> np.ndarray:
        return rng.uniform(low, high, (rows, *shape)).astype(np.float32)

    # Momentum 0: one training-mode pass sets every moving statistic to the batch's own.
    norms = [layer for layer in model.layers
             if isinstance(layer, keras.layers.BatchNormalization)]
    momenta = [layer.momentum for layer in norms]
    for layer in norms:
        layer.momentum = 0.0
    model(make_input(spec["calibration_batch"]), training=True)
    for layer, momentum in zip(norms, momenta, strict=True):
        layer.momentum = momentum
    model.export(str(path), verbose=False,
                 input_signature=[tf.TensorSpec([None, *shape], tf.float32, name="images")])
    return make_input


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
        start = time.perf_counter()
        build(name, SPECS[name], target)
        print(f"{name}: built in {target} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
