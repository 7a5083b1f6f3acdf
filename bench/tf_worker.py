"""The peers' side of the benchmark, run in TensorFlow's environment (never in ours).

    .venv-tf/bin/python bench/tf_worker.py REQUEST.json

``runtime_bench.py`` writes the request (models, input files per batch size, budget, threads) and
reads the result JSON this script rewrites after every model, so a crash keeps what was done.
Engines, one after another, never at the same time:

- ``tf1``: ``tf.compat.v1.Session`` + ``saved_model.loader.load`` and ``sess.run`` on the
  signature's tensor names, the path TensorFlow Serving takes;
- ``tf2``: ``tf.saved_model.load(...).signatures[name](**tensors)``, eager, outputs to numpy;
- ``ort``: the SavedModel converted once by tf2onnx (cached by content hash), run by ONNX Runtime
  on the CPU provider.

It also saves TensorFlow's outputs for each batch (the driver compares our runtime against them)
and, when asked, the checkpoint's variables (for the numpy ceiling).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tensors import max_abs_diff, storable
from bench.timing import Budget, measure


def log(message: str) -> None:
    # The driver shows lines with this prefix and keeps the rest (TensorFlow's chatter) in a log.
    print(f"[worker] {message}", file=sys.stderr, flush=True)


def short_reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    return text[:300]


def load_batches(files: dict[str, str]) -> dict[int, dict[str, np.ndarray]]:
    batches: dict[int, dict[str, np.ndarray]] = {}
    for batch, path in files.items():
        with np.load(path, allow_pickle=False) as data:
            batches[int(batch)] = {alias: data[alias] for alias in data.files}
    return batches


def save_outputs(path: Path, outputs: dict[str, np.ndarray]) -> str:
    np.savez(path, **{alias: storable(v) for alias, v in outputs.items()})
    return str(path)


def tf1_session(tf: Any, model_dir: str, threads: int) -> tuple[Any, Any]:
    """A ``Session`` (intra-op and inter-op parallelism ``threads``) with the SavedModel's
    serve graph loaded, and its meta graph: TensorFlow Serving's path."""
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=threads)
    graph = tf.Graph()
    with graph.as_default():
        sess = tf.compat.v1.Session(graph=graph, config=config)
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], model_dir)
    return sess, meta


def tf2_call(tf: Any, fn: Any, arrays: dict[str, np.ndarray]
             ) -> Callable[[], dict[str, np.ndarray]]:
    """A call of the loaded signature ``fn`` on ``arrays``: numpy in, numpy out, like the other
    engines."""
    def call() -> dict[str, np.ndarray]:
        result = fn(**{a: tf.constant(v) for a, v in arrays.items()})
        return {k: v.numpy() for k, v in result.items()}

    return call


class Worker:
    def __init__(self, request: dict[str, Any]) -> None:
        import tensorflow as tf

        self.tf = tf
        self.request = request
        self.threads = int(request["threads"])
        # Eager threading must be set before TensorFlow's runtime starts.
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(self.threads)
        self.budget = Budget(**request["budget"])
        self.engines: list[str] = request["engines"]
        self.out_dir = Path(request["out_dir"])
        self.cache_dir = Path(request["cache_dir"])
        self.result: dict[str, Any] = {"versions": self.versions(), "threads": {}, "models": {}}

    def versions(self) -> dict[str, str]:
        versions = {"tensorflow": self.tf.__version__, "numpy": np.__version__}
        try:
            import onnxruntime
            import tf2onnx

            versions["onnxruntime"] = onnxruntime.__version__
            versions["tf2onnx"] = tf2onnx.__version__
        except ImportError as err:
            versions["onnx"] = f"unavailable: {err}"
        return versions

    def write(self) -> None:
        path = Path(self.request["result"])
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.result, indent=1))
        tmp.replace(path)

    def run(self) -> None:
        for model in self.request["models"]:
            entry: dict[str, Any] = {}
            self.result["models"][model["name"]] = entry
            batches = load_batches(model["batches"])
            reference: dict[int, dict[str, np.ndarray]] = {}
            for engine in ("tf1", "tf2", "ort"):
                if engine not in self.engines and not (engine == "tf1" and model["reference"]):
                    continue
                try:
                    entry[engine] = getattr(self, engine)(model, batches, reference)
                except Exception as exc:  # noqa: BLE001 - one engine must not hide the rest
                    log(f"{model['name']} {engine}: {short_reason(exc)}")
                    entry[engine] = {"error": short_reason(exc), "trace": traceback.format_exc()}
                self.write()
            if model.get("weights"):
                try:
                    entry["weights"] = self.weights(model)
                except Exception as exc:  # noqa: BLE001 - reported in its cell
                    entry["weights"] = {"error": short_reason(exc)}
            self.write()

    # -- TensorFlow 1 style session: TensorFlow Serving's path ----------------------------------

    def tf1(
        self,
        model: dict[str, Any],
        batches: dict[int, dict[str, np.ndarray]],
        reference: dict[int, dict[str, np.ndarray]],
    ) -> dict[str, Any]:
        self.result["threads"]["tf1"] = {
            "intra_op": self.threads, "inter_op": self.threads
        }
        start = time.perf_counter()
        sess, meta = tf1_session(self.tf, model["dir"], self.threads)
        load_ms = (time.perf_counter() - start) * 1000
        sig = meta.signature_def[model["signature"]]
        feed_names = {alias: info.name for alias, info in sig.inputs.items()}
        out_aliases = sorted(sig.outputs)
        fetch_names = [sig.outputs[a].name for a in out_aliases]
        out: dict[str, Any] = {
            "load_ms": load_ms,
            "feeds": feed_names,
            "fetches": dict(zip(out_aliases, fetch_names)),
            "cells": {},
            "outputs": {},
        }
        try:
            for batch, arrays in batches.items():
                feed = {feed_names[a]: v for a, v in arrays.items()}
                values = sess.run(fetch_names, feed)
                reference[batch] = dict(zip(out_aliases, values))
                path = self.out_dir / f"{model['name']}-tf1-b{batch}.npz"
                out["outputs"][str(batch)] = save_outputs(path, reference[batch])
                if "tf1" not in self.engines:
                    continue
                stats = measure(lambda feed=feed: sess.run(fetch_names, feed), self.budget)
                out["cells"][str(batch)] = stats.as_dict()
                log(f"{model['name']} b={batch} tf1 {stats.median_us:.1f} us")
        finally:
            sess.close()
        return out

    # -- TensorFlow 2 eager signature call -------------------------------------------------------

    def tf2(
        self,
        model: dict[str, Any],
        batches: dict[int, dict[str, np.ndarray]],
        reference: dict[int, dict[str, np.ndarray]],
    ) -> dict[str, Any]:
        tf = self.tf
        start = time.perf_counter()
        loaded = tf.saved_model.load(model["dir"])
        fn = loaded.signatures[model["signature"]]
        load_ms = (time.perf_counter() - start) * 1000
        out: dict[str, Any] = {"load_ms": load_ms, "cells": {}, "diff": {}}

        for batch, arrays in batches.items():
            call = tf2_call(tf, fn, arrays)
            if batch in reference:
                out["diff"][str(batch)] = max_abs_diff(call(), reference[batch])
            stats = measure(call, self.budget)
            out["cells"][str(batch)] = stats.as_dict()
            log(f"{model['name']} b={batch} tf2 {stats.median_us:.1f} us")
        return out

    # -- ONNX Runtime on the tf2onnx conversion --------------------------------------------------

    def onnx_path(self, model: dict[str, Any]) -> tuple[Path, float | None]:
        """The converted model, converting (or replaying a cached failure) as needed."""
        import tf2onnx

        model_dir = Path(model["dir"])
        if not (model_dir / "saved_model.pb").exists():
            raise FileNotFoundError(f"no saved_model.pb in {model_dir}")
        digest = _content_hash(model_dir, f"{tf2onnx.__version__}|{model['signature']}")
        stem = f"{model['name']}-{digest}"
        onnx_dir = self.cache_dir / "onnx"
        onnx_dir.mkdir(parents=True, exist_ok=True)
        target = onnx_dir / f"{stem}.onnx"
        failed = onnx_dir / f"{stem}.failed.txt"
        if target.exists():
            return target, None
        if failed.exists():
            raise RuntimeError(f"conversion failed (cached): {failed.read_text().strip()}")
        tmp = onnx_dir / f"{stem}.partial.onnx"
        command = [
            sys.executable, "-m", "tf2onnx.convert",
            "--saved-model", str(model_dir),
            "--signature_def", model["signature"],
            "--output", str(tmp),
        ]
        log(f"{model['name']}: converting to ONNX with tf2onnx")
        start = time.perf_counter()
        proc = subprocess.run(command, check=False, capture_output=True, text=True, timeout=900)
        seconds = time.perf_counter() - start
        text = proc.stdout + proc.stderr
        log_path = onnx_dir / f"{stem}.log"
        log_path.write_text(text)
        reason = _conversion_failure(proc.returncode, text, tmp.exists())
        if reason is not None:
            tmp.unlink(missing_ok=True)
            # Remember a failure only if the model did not change under us (a re-export).
            if _content_hash(model_dir, f"{tf2onnx.__version__}|{model['signature']}") == digest:
                failed.write_text(reason + "\n")
            raise RuntimeError(f"conversion failed: {reason} (log: {_shown(log_path)})")
        tmp.replace(target)
        _drop_stale(onnx_dir, model["name"], keep=stem)
        return target, seconds

    def ort(
        self,
        model: dict[str, Any],
        batches: dict[int, dict[str, np.ndarray]],
        reference: dict[int, dict[str, np.ndarray]],
    ) -> dict[str, Any]:
        import onnxruntime as ort

        path, convert_s = self.onnx_path(model)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.result["threads"]["ort"] = {
            "intra_op": self.threads, "inter_op": 1, "execution_mode": "sequential"
        }
        start = time.perf_counter()
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        load_ms = (time.perf_counter() - start) * 1000
        in_names = {i.name: i for i in session.get_inputs()}
        out_names = [o.name for o in session.get_outputs()]
        out: dict[str, Any] = {
            "load_ms": load_ms, "convert_s": convert_s, "onnx": str(path),
            "cells": {}, "diff": {},
        }

        for batch, arrays in batches.items():
            feed = {}
            for alias, value in arrays.items():
                name = _match_name(alias, in_names)
                if in_names[name].type == "tensor(string)":
                    # ONNX Runtime takes strings as str objects, not bytes.
                    value = np.array([s.decode("utf-8", "replace") for s in value.ravel()],
                                     dtype=object).reshape(value.shape)
                feed[name] = value
            aliases = {name: _alias_of(name) for name in out_names}

            def call(feed: dict[str, np.ndarray] = feed) -> list[np.ndarray]:
                return session.run(out_names, feed)

            if batch in reference:
                got = dict(zip((aliases[n] for n in out_names), call()))
                got = {a: v for a, v in got.items() if a in reference[batch]}
                out["diff"][str(batch)] = max_abs_diff(got, reference[batch])
            stats = measure(call, self.budget)
            out["cells"][str(batch)] = stats.as_dict()
            log(f"{model['name']} b={batch} ort {stats.median_us:.1f} us")
        return out

    # -- weights for the numpy ceiling -----------------------------------------------------------

    def weights(self, model: dict[str, Any]) -> dict[str, Any]:
        reader = self.tf.train.load_checkpoint(str(Path(model["dir"]) / "variables" / "variables"))
        dtypes = reader.get_variable_to_dtype_map()
        names = sorted(n for n, dt in dtypes.items() if dt != self.tf.string)
        arrays = {f"v{i:04d}": np.asarray(reader.get_tensor(n)) for i, n in enumerate(names)}
        path = self.out_dir / f"{model['name']}-weights.npz"
        np.savez(path, **arrays)
        return {"path": str(path), "names": dict(zip(arrays, names))}


def _drop_stale(onnx_dir: Path, name: str, keep: str) -> None:
    """Remove conversions of earlier exports of this model, so the cache does not grow."""
    pattern = re.compile(rf"^{re.escape(name)}-[0-9a-f]{{16}}(\.onnx|\.log|\.failed\.txt)$")
    for path in onnx_dir.iterdir():
        if pattern.match(path.name) and not path.name.startswith(f"{keep}."):
            path.unlink(missing_ok=True)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _content_hash(model_dir: Path, salt: str) -> str:
    digest = hashlib.sha256(salt.encode())
    for path in sorted(model_dir.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(model_dir)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _conversion_failure(returncode: int, log_text: str, produced: bool) -> str | None:
    """Why a tf2onnx run did not give a usable model, or None when it did."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    # tf2onnx exits 0 and writes a model that ONNX Runtime rejects when ops are unsupported.
    unsupported = [ln for ln in lines if "Unsupported ops" in ln]
    if unsupported:
        return "tf2onnx: " + unsupported[-1].split("Unsupported ops", 1)[1].strip(" :")[:200] \
            + " unsupported"
    if returncode == 0 and produced:
        return None
    # The last exception line says most; drop the module path in front of its class name.
    raised = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception): ", ln)]
    if raised:
        return re.sub(r"^[\w.]+\.(\w+:)", r"\1", raised[-1])[:300]
    return (lines or [f"exit code {returncode}, no output"])[-1][:300]


def _alias_of(onnx_name: str) -> str:
    # tf2onnx keeps signature aliases as names; older conversions append ":0".
    return onnx_name.split(":")[0]


def _match_name(alias: str, names: dict[str, Any]) -> str:
    for candidate in (alias, f"{alias}:0", f"serving_default_{alias}:0"):
        if candidate in names:
            return candidate
    raise KeyError(f"ONNX model has no input for {alias!r}; inputs: {sorted(names)}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text())
    worker = Worker(request)
    worker.write()
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
