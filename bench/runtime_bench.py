"""Per-call latency of our runtime's ``Session.run`` beside TensorFlow and ONNX Runtime.

    .venv/bin/python bench/runtime_bench.py [--models NAME ...] [--batch-sizes 1,32,256]
        [--seconds-per-case S] [--quick] [--json PATH] [--engines ours,tf1,tf2,ort,numpy]

Same fixture SavedModels (``tests/fixtures/models/<name>/1/``), same inputs (the widest recorded
case of ``expected.npz``, tiled row by row to each batch size), one engine at a time:

1. TensorFlow and ONNX Runtime in a subprocess of TensorFlow's environment (``tf_worker.py``),
   which also hands back TensorFlow's outputs and, for the MLP, its weights;
2. then our runtime in this process (TensorFlow is never imported here), checked against
   TensorFlow's outputs, and a hand-written numpy forward pass where one exists (the ceiling a
   numpy-kernel runtime can approach).

Each cell warms up, then calls repeatedly for the time budget (at least 20 calls) and reports the
median and 90th percentile in µs. Never a pass/fail: it prints tables, and ``--json`` keeps the raw
numbers.

Recurrent models run one loop iteration per time step, so their cost per step is the number to
compare: ``NAME@T<steps>`` benchmarks NAME with its inputs' time axis (axis 1) repeated or cut to
that many steps (the model must take any length), and a model given at two or more step counts
gets a per-step table: the difference of medians divided by the difference of step counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import ours, report
from bench.numpy_ceiling import CEILINGS
from bench.tensors import max_abs_diff, recorded_cases, tile_rows, widest_case
from bench.timing import Budget, machine, measure

MODELS = (
    "mlp",
    "functional_multi_io",
    "cnn_bn",
    "separable_cnn",
    "text_classifier",
    "transformer_block",
    "custom_module",
    # TF1 graphs (reference variables; Switch/Merge and loop frames on the dataflow executor).
    "tf1_cnn",
    "tf1_control",
    # String inputs: lookup tables, vocabulary assets, text splitting.
    "keras_string_lookup",
    "vocab_asset",
    "keras_text_vectorization",
    # Recurrent models (one While loop per layer and direction), and the per-step pair.
    "stacked_lstm",
    "masked_gru",
    "bidirectional_rnn",
    "stacked_lstm@T8",
    "stacked_lstm@T40",
)
QUICK_MODELS = ("mlp", "functional_multi_io", "cnn_bn")
RNN_MODELS = ("stacked_lstm@T8", "stacked_lstm@T40")
ALL_ENGINES = ("ours", "tf1", "tf2", "ort", "numpy")
WORKER_ENGINES = ("tf1", "tf2", "ort")
CACHE = ROOT / "bench" / ".cache"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", help="fixture names (space or comma separated)")
    parser.add_argument("--batch-sizes", default="1,32,256")
    parser.add_argument("--seconds-per-case", type=float, help="time budget per cell (1.0)")
    parser.add_argument("--min-calls", type=int, default=20)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {', '.join(QUICK_MODELS)} at 0.2 s per cell")
    parser.add_argument("--rnn", action="store_true",
                        help=f"the recurrent per-step pair only: {', '.join(RNN_MODELS)}")
    parser.add_argument("--engines", default=",".join(ALL_ENGINES),
                        help="subset of ours,tf1,tf2,ort,numpy")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="TensorFlow intra/inter-op and ONNX Runtime intra-op threads")
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--models-root", type=Path, default=ROOT / "tests" / "fixtures" / "models")
    parser.add_argument("--tf-python", type=Path, default=ROOT / ".venv-tf" / "bin" / "python")
    parser.add_argument("--json", type=Path, help="write the raw numbers here")
    parser.add_argument("--keep-scratch", action="store_true",
                        help="keep the exchanged input/output files under bench/.cache/")
    args = parser.parse_args(argv)
    if args.seconds_per_case is None:
        args.seconds_per_case = 0.2 if args.quick else 1.0
    names = [n for item in (args.models or []) for n in item.split(",") if n]
    default = RNN_MODELS if args.rnn else QUICK_MODELS if args.quick else MODELS
    args.models = names or list(default)
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = sorted(set(args.engines) - set(ALL_ENGINES))
    if unknown:
        parser.error(f"unknown engines {unknown}; known: {', '.join(ALL_ENGINES)}")
    return args


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def error_cell(exc: BaseException, status: str = "n/a") -> dict[str, Any]:
    reason = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:2000]
    return {"status": status, "reason": reason}


def latest_version(base: Path) -> Path:
    """The highest numbered version directory under a model's base path (TF Serving's layout)."""
    versions = [p for p in base.glob("*") if p.name.isdigit() and (p / "saved_model.pb").exists()]
    return max(versions, key=lambda p: int(p.name)) if versions else base / "1"


# -- inputs ------------------------------------------------------------------------------------


def prepare(args: argparse.Namespace, scratch: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Results skeleton per model and the worker's model list, with tiled inputs written out."""
    results: dict[str, Any] = {}
    requests: list[dict[str, Any]] = []
    for name in args.models:
        base, steps = split_steps(name)
        model_dir = latest_version(args.models_root / base)
        expected = args.models_root / base / "expected.npz"
        if not (model_dir / "saved_model.pb").exists() or not expected.exists():
            results[name] = {"skipped": f"not exported yet ({shown(model_dir)})"}
            continue
        cases = recorded_cases(expected, args.signature)
        if not cases:
            results[name] = {"skipped": f"no recorded inputs for signature {args.signature!r}"}
            continue
        case, arrays = widest_case(cases)
        if steps is not None:
            arrays = with_steps(arrays, steps)
        entry: dict[str, Any] = {"dir": str(model_dir), "case": case, "load_ms": {},
                                 "batches": {}, "inputs": {}, "steps": steps}
        files: dict[str, str] = {}
        for batch in args.batch_sizes:
            tiled = tile_rows(arrays, batch)
            path = scratch / f"{name}-in-b{batch}.npz"
            np.savez(path, **tiled)
            files[str(batch)] = str(path)
            entry["inputs"][batch] = tiled
            entry["batches"][batch] = {"cells": {}, "diff": {}}
        results[name] = entry
        requests.append({
            "name": name,
            "dir": str(model_dir),
            "signature": args.signature,
            "batches": files,
            # TensorFlow's outputs are the reference for every check, even when TF is not timed.
            "reference": True,
            "weights": "numpy" in args.engines and name in CEILINGS,
        })
    return results, requests


def split_steps(name: str) -> tuple[str, int | None]:
    """``stacked_lstm@T40`` -> (``stacked_lstm``, 40); a plain name has no step count."""
    base, sep, steps = name.partition("@T")
    if sep and steps.isdigit() and int(steps) > 0:
        return base, int(steps)
    return name, None


def with_steps(arrays: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
    """Sequence inputs (rank 3 and up: batch, time, ...) with their time axis repeated or cut to
    ``steps``; other inputs unchanged."""
    out = {}
    for alias, array in arrays.items():
        if array.ndim >= 3 and array.shape[1] > 0:
            index = np.arange(steps) % array.shape[1]
            array = np.ascontiguousarray(np.take(array, index, axis=1))
        out[alias] = array
    return out


def per_step_table(results: dict[str, Any], engines: list[str]) -> str | None:
    """µs per time step, per engine and batch, for models benchmarked at several step counts:
    (median at the most steps - median at the fewest) / (difference in steps)."""
    by_base: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for name, entry in results.items():
        steps = entry.get("steps")
        if steps is not None and "skipped" not in entry:
            by_base.setdefault(split_steps(name)[0], []).append((steps, entry))
    shown = [e for e in report.ENGINES if e in engines]
    header = ["model", "steps", "batch", *(report.ENGINES[e] for e in shown), "TF/ours"]
    rows: list[list[str]] = []
    for base, runs in by_base.items():
        if len(runs) < 2:
            continue
        (few, short), (many, long) = min(runs, key=lambda r: r[0]), max(runs, key=lambda r: r[0])
        for batch in short["batches"]:
            per_step: dict[str, float | None] = {}
            for engine in shown:
                a = report.median(short["batches"][batch]["cells"].get(engine))
                b = report.median(long["batches"].get(batch, {}).get("cells", {}).get(engine))
                per_step[engine] = None if a is None or b is None else (b - a) / (many - few)
            rows.append([
                base,
                f"{few}->{many}",
                str(batch),
                *("-" if per_step[e] is None else f"{per_step[e]:.1f}" for e in shown),
                report.ratio(per_step.get("tf1"), per_step.get("ours")),
            ])
    if not rows:
        return None
    return report._render(rows, header, right_from=1)


# -- TensorFlow and ONNX Runtime (subprocess) ---------------------------------------------------


def run_worker(
    args: argparse.Namespace, budget: Budget, requests: list[dict[str, Any]], scratch: Path
) -> dict[str, Any]:
    request = {
        "threads": args.threads,
        "budget": budget.__dict__,
        "engines": [e for e in WORKER_ENGINES if e in args.engines],
        "out_dir": str(scratch),
        "cache_dir": str(CACHE),
        "result": str(scratch / "worker-result.json"),
        "models": requests,
    }
    request_path = scratch / "worker-request.json"
    request_path.write_text(json.dumps(request, indent=1))
    if not args.tf_python.exists():
        return {"error": f"TensorFlow environment missing ({args.tf_python}); run `make fixtures`"}
    log_path = CACHE / "tf_worker.log"
    command = [str(args.tf_python), str(ROOT / "bench" / "tf_worker.py"), str(request_path)]
    with log_path.open("w") as log, subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=log, text=True, cwd=ROOT
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.write(line)
            if line.startswith("[worker]"):
                progress(line.rstrip())
        code = proc.wait()
    result_path = Path(request["result"])
    result = json.loads(result_path.read_text()) if result_path.exists() else {"models": {}}
    if code != 0:
        result["error"] = f"worker exited with {code}; see {shown(log_path)}"
    return result


def merge_worker(results: dict[str, Any], worker: dict[str, Any], engines: list[str]) -> None:
    """Peer cells, diffs and TensorFlow's reference outputs into the per-model results."""
    for name, entry in results.items():
        if "skipped" in entry:
            continue
        got = worker.get("models", {}).get(name, {})
        failure = worker.get("error", "worker gave no result")
        entry["reference"] = {}
        for engine in WORKER_ENGINES:
            part = got.get(engine)
            if engine == "tf1" and part and "outputs" in part:
                for batch, path in part["outputs"].items():
                    with np.load(path, allow_pickle=False) as data:
                        entry["reference"][int(batch)] = {k: data[k] for k in data.files}
            if engine not in engines:
                continue
            if part is not None and "load_ms" in part:
                entry["load_ms"][engine] = part["load_ms"]
            if engine == "ort" and part and part.get("convert_s") is not None:
                entry["convert_s"] = part["convert_s"]
            for batch, row in entry["batches"].items():
                if part is None:
                    row["cells"][engine] = {"status": "n/a", "reason": failure}
                elif "error" in part:
                    row["cells"][engine] = {"status": "n/a", "reason": part["error"]}
                elif str(batch) in part.get("cells", {}):
                    row["cells"][engine] = {"stats": part["cells"][str(batch)]}
                if part and str(batch) in part.get("diff", {}):
                    row["diff"][engine] = part["diff"][str(batch)]
        weights = got.get("weights")
        if weights is not None:
            entry["weights"] = weights


# -- our runtime and the numpy ceiling (this process) -------------------------------------------


def bench_ours(entry: dict[str, Any], name: str, args: argparse.Namespace, budget: Budget) -> None:
    batches = entry["batches"]
    try:
        model = ours.load(Path(entry["dir"]), args.signature)
    except ours.Pending as exc:
        for row in batches.values():
            row["cells"]["ours"] = {"status": "pending", "reason": str(exc)}
        return
    except Exception as exc:  # noqa: BLE001 - reported in its cell
        cell = error_cell(exc)
        entry["ours_trace"] = traceback.format_exc()
        for row in batches.values():
            row["cells"]["ours"] = cell
        return
    entry["load_ms"]["ours"] = model.load_ms
    for batch, row in batches.items():
        arrays = entry["inputs"][batch]
        reference = entry["reference"].get(batch)
        try:
            outputs = model.outputs(arrays)
            if reference is not None:
                row["diff"]["ours"] = max_abs_diff(outputs, reference)
            stats = measure(model.run_call(arrays), budget)
            row["cells"]["ours"] = {"stats": stats.as_dict()}
            progress(f"[ours] {name} b={batch} run {stats.median_us:.1f} us")
        except Exception as exc:  # noqa: BLE001 - reported in its cell
            row["cells"]["ours"] = error_cell(exc, "error")
            entry.setdefault("ours_trace", traceback.format_exc())
            continue
        try:
            call = model.callable_call(arrays)
            if call is None:
                continue
            if reference is not None:
                row["diff"]["ours_callable"] = max_abs_diff(model.callable_outputs(call), reference)
            stats = measure(call, budget)
            row["cells"]["ours_callable"] = {"stats": stats.as_dict()}
            progress(f"[ours] {name} b={batch} callable {stats.median_us:.1f} us")
        except Exception as exc:  # noqa: BLE001 - reported in its cell
            row["cells"]["ours_callable"] = error_cell(exc, "error")


def bench_numpy(entry: dict[str, Any], name: str, budget: Budget) -> None:
    build = CEILINGS.get(name)
    if build is None:
        return
    weights_info = entry.get("weights")
    batches = entry["batches"]
    if not weights_info or "path" not in weights_info:
        reason = (weights_info or {}).get("error", "no weights from the TensorFlow worker")
        for row in batches.values():
            row["cells"]["numpy"] = {"status": "n/a", "reason": reason}
        return
    with np.load(weights_info["path"], allow_pickle=False) as data:
        weights = [data[k] for k in sorted(data.files)]
    for batch, row in batches.items():
        arrays = entry["inputs"][batch]
        try:
            (x,) = arrays.values()
            forward = build(weights, x.shape[-1])
            reference = entry["reference"].get(batch)
            if reference is not None:
                (alias,) = reference
                row["diff"]["numpy"] = max_abs_diff({alias: forward(x)}, reference)
            stats = measure(lambda forward=forward, x=x: forward(x), budget)
            row["cells"]["numpy"] = {"stats": stats.as_dict()}
            progress(f"[numpy] {name} b={batch} {stats.median_us:.1f} us")
        except Exception as exc:  # noqa: BLE001 - reported in its cell
            row["cells"]["numpy"] = error_cell(exc)


# -- output -------------------------------------------------------------------------------------


def environment(args: argparse.Namespace, budget: Budget, worker: dict[str, Any]) -> dict[str, Any]:
    return {
        **machine(),
        "peers": worker.get("versions", {}),
        "threads": {
            "requested": args.threads,
            "peers": worker.get("threads", {}),
            "ours": "numpy/BLAS defaults (OPENBLAS_NUM_THREADS etc. from the environment)",
        },
        "budget": budget.__dict__,
        "signature": args.signature,
        "batch_sizes": args.batch_sizes,
    }


def header(env: dict[str, Any]) -> str:
    peers = ", ".join(f"{k} {v}" for k, v in env["peers"].items()) or "peers unavailable"
    load = " ".join(f"{x:.2f}" for x in env["load_average"])
    budget = env["budget"]
    return "\n".join([
        f"graphserve runtime benchmark  {env['date']}  {env['cpus']} CPUs  load avg {load}",
        f"python {env['python']}, numpy {env['numpy']}; {peers}",
        (f"threads: TF intra/inter-op {env['threads']['requested']}, ORT intra-op "
         f"{env['threads']['requested']} (inter 1, sequential), ours: numpy/BLAS defaults"),
        (f"cells: median/p90 µs per call, {budget['seconds']} s per cell after warm-up, "
         f"at least {budget['min_calls']} calls; signature {env['signature']!r}"),
    ])


def to_json(results: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    models = {}
    for name, entry in results.items():
        if "skipped" in entry:
            models[name] = {"skipped": entry["skipped"]}
            continue
        models[name] = {
            "dir": entry["dir"],
            "case": entry["case"],
            "load_ms": entry["load_ms"],
            "convert_s": entry.get("convert_s"),
            "steps": entry.get("steps"),
            "batches": {str(b): row for b, row in entry["batches"].items()},
        }
        if "ours_trace" in entry:
            models[name]["ours_trace"] = entry["ours_trace"]
    return {"environment": env, "models": models}


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    budget = Budget(seconds=args.seconds_per_case, min_calls=args.min_calls)
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=CACHE))
    try:
        results, requests = prepare(args, scratch)
        worker: dict[str, Any] = {"models": {}}
        if requests:
            worker = run_worker(args, budget, requests, scratch)
            merge_worker(results, worker, args.engines)
        for name, entry in results.items():
            if "skipped" in entry:
                continue
            if "ours" in args.engines:
                bench_ours(entry, name, args, budget)
            if "numpy" in args.engines:
                bench_numpy(entry, name, budget)
    finally:
        if not args.keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    env = environment(args, budget, worker)
    columns = [e for e in args.engines if e != "ours"]
    if "ours" in args.engines:
        columns += ["ours", "ours_callable"]
    print(header(env))
    if "error" in worker:
        print(f"TensorFlow worker: {worker['error']}")
    print()
    print(report.latency_table(results, columns))
    print()
    print("Output checks (largest |difference| from TF's session over all batches) and load times:")
    print(report.checks_table(results))
    steps_text = per_step_table(results, columns)
    if steps_text is not None:
        print()
        print("Recurrent models, µs per time step (median difference over the step difference):")
        print(steps_text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(results, env), indent=1) + "\n")
        print(f"\nraw numbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
