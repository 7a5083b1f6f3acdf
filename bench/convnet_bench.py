"""Big convnets, one call each: graphserve's runtime beside TensorFlow at the same thread count.

    .venv/bin/python bench/convnet_bench.py [--models resnet50,mobilenet,...] [--batches 1,8]
        [--threads 1,2] [--tf-engine tf2|tf1] [--quick] [--json PATH]

Models: ``keras.applications`` ResNet50, MobileNet (v1), MobileNetV2, EfficientNetB0 and
Xception with random weights, made by TensorFlow with ``make_bench_models.py`` into
``bench/.cache/models/`` (built on first use, in TensorFlow's interpreter). Inputs are the
recorded ones in each model's ``expected.npz`` (batch1, batch8; another batch size repeats the
batch8 rows, outputs included, since rows are independent at inference).

For each model, one engine at a time, in rounds (``--rounds``, default 2):

1. TensorFlow, in a subprocess of ``.venv-tf`` per thread count (``tf_worker.py``): intra-op and
   inter-op parallelism both set to the thread count before any op runs; ``tf2`` calls
   ``tf.saved_model.load(dir).signatures["serving_default"]`` eagerly (numpy in and out), ``tf1``
   is the session path TensorFlow Serving takes. Its peak RSS comes from ``wait4``.
2. Our runtime in this process (TensorFlow is never imported here; the model is loaded once):
   ``session.run`` on the signature's tensors, threads set with
   ``runtime.intra_op.set_threads(n)``. BLAS stays single-threaded, as in the daemon
   (``serving/__init__.py``). Before timing each cell, its outputs are compared with
   TensorFlow's recorded ones (largest |difference|), and those of the last timed call as well.

Each round times both engines at one thread count after the other, which goes first
alternating from one thread count and round to the next: this machine's speed drifts by 10-20%
over minutes, so a ratio is taken within each round (minutes apart at most) and the rounds'
median reported. Each cell warms up, then calls for the budget (3 s and at least 10 calls; a
slow cell stops after 60 s with at least 5) and reports median and p90 in ms, the median over
the rounds. Never a verdict: it prints tables, and ``--json`` keeps the raw numbers.
"""

from __future__ import annotations

import os

# As the daemon does, before numpy loads: intra-op threads are the runtime's, BLAS stays at one.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import ctypes
import dataclasses
import gc
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import ours
from bench.report import Notes, _render
from bench.tensors import leading_dim, max_abs_diff, tile_rows
from bench.timing import Budget, machine, measure
from runtime import intra_op

MODELS = ("resnet50", "mobilenet", "mobilenet_v2", "efficientnet_b0", "xception")
CACHE = ROOT / "bench" / ".cache"
BUILT_MODELS = CACHE / "models"
TF_PY = ROOT / ".venv-tf" / "bin" / "python"
SIGNATURE = "serving_default"
Arrays = dict[str, np.ndarray]
Case = tuple[Arrays, Arrays]  # inputs, TensorFlow's outputs
BUDGET = Budget(seconds=3.0, min_calls=10, cap_seconds=60.0, floor_calls=5,
                warmup_calls=2, warmup_seconds=0.0)
QUICK_BUDGET = Budget(seconds=0.5, min_calls=3, cap_seconds=10.0, floor_calls=3,
                      warmup_calls=1, warmup_seconds=0.0)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma separated")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", default="1,2", help="thread counts, both engines")
    parser.add_argument("--tf-engine", choices=("tf2", "tf1"), default="tf2",
                        help="tf2: eager signature call; tf1: session (TF Serving's path)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 0.5 s and at least 3 calls per cell, 1 warm-up call")
    parser.add_argument("--tf-python", type=Path, default=TF_PY)
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds per model, the engines' order alternating (default 2)")
    parser.add_argument("--json", type=Path, help="write the raw numbers here")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.threads = [int(t) for t in args.threads.split(",") if t]
    if any(t < 1 for t in args.threads):
        parser.error("thread counts start at 1")
    if args.rounds < 1:
        parser.error("--rounds starts at 1")
    return args


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:2000]


# -- models and inputs --------------------------------------------------------------------------


def build_models(names: list[str], tf_python: Path) -> tuple[dict[str, str], float]:
    """Builds (or finds cached) the models; returns errors by model and the seconds it took."""
    if not tf_python.exists():
        return {n: f"{tf_python} does not exist (make fixtures builds it)" for n in names}, 0.0
    start = time.perf_counter()
    done = subprocess.run(
        [str(tf_python), str(ROOT / "bench" / "make_bench_models.py"),
         f"--models={','.join(names)}", f"--out={BUILT_MODELS}"],
        check=False, capture_output=True, text=True,
    )
    seconds = time.perf_counter() - start
    for line in done.stdout.splitlines():
        progress(f"[build] {line}")
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {n: f"make_bench_models.py failed: {tail[0]}" for n in names}, seconds
    return {}, seconds


def cases_by_batch(expected: Path, batches: list[int]) -> dict[int, Case]:
    """``{batch: (inputs, TF's outputs)}``, recorded where a case has that many rows, else the
    widest case's rows repeated (inference treats each row on its own)."""
    recorded: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    with np.load(expected, allow_pickle=False) as data:
        for key in data.files:
            sig, case, side, alias = key.split("/")
            if sig == SIGNATURE:
                recorded.setdefault(case, {"in": {}, "out": {}})[side][alias] = data[key]
    by_rows = {leading_dim(c["in"]): c for c in recorded.values()}
    widest = by_rows[max(by_rows)]
    out: dict[int, Case] = {}
    for batch in batches:
        case = by_rows.get(batch)
        if case is not None:
            out[batch] = (case["in"], case["out"])
        else:
            out[batch] = (tile_rows(widest["in"], batch), tile_rows(widest["out"], batch))
    return out


# -- TensorFlow (a subprocess per model and thread count) ---------------------------------------


def run_tf(
    name: str, model_dir: Path, files: dict[str, str], threads: int, args: argparse.Namespace,
    budget: Budget, scratch: Path, log: Any,
) -> dict[str, Any]:
    """TensorFlow's cells for one model at one thread count, with the worker's peak RSS."""
    result_path = scratch / f"tf-{name}-t{threads}.json"
    request = {
        "threads": threads,
        "budget": dataclasses.asdict(budget),
        "engines": [args.tf_engine],
        "out_dir": str(scratch),
        "cache_dir": str(CACHE),
        "result": str(result_path),
        # The recorded outputs are the reference: no untimed session run just for them.
        "models": [{"name": name, "dir": str(model_dir), "signature": SIGNATURE,
                    "batches": files, "reference": False, "weights": False}],
    }
    request_path = scratch / f"tf-{name}-t{threads}-request.json"
    request_path.write_text(json.dumps(request, indent=1))
    command = [str(args.tf_python), str(ROOT / "bench" / "tf_worker.py"), str(request_path)]
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    with subprocess.Popen(command, stderr=subprocess.PIPE, stdout=log, text=True,
                          cwd=ROOT) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.write(line)
            if line.startswith("[worker]"):
                progress(f"{line.rstrip()} (threads {threads})")
        # wait4 rather than wait: the child's own peak RSS comes with its exit status.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    part = result.get("models", {}).get(name, {}).get(args.tf_engine, {})
    out: dict[str, Any] = {"versions": result.get("versions", {}),
                           "peak_rss_mib": usage.ru_maxrss / 1024, "cells": {}}
    if "load_ms" in part:
        out["load_ms"] = part["load_ms"]
    failure = part.get("error")
    if failure is None and proc.returncode != 0:
        failure = f"worker exited with {proc.returncode}; see {CACHE.name}/convnet_tf_worker.log"
    for batch in files:
        stats = part.get("cells", {}).get(batch)
        if stats is not None:
            out["cells"][batch] = {"stats": stats}
        else:
            out["cells"][batch] = {"status": "n/a", "reason": failure or "no result"}
    return out


# -- our runtime (this process) ------------------------------------------------------------------


def reset_peak_rss() -> bool:
    """Restart the kernel's peak-RSS mark for this process (Linux 4.0+), so a model's peak is
    its own rather than the largest model's so far."""
    try:
        # The mark restarts at the current RSS: first hand the last model's freed heap back.
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib(reset_worked: bool) -> float:
    if reset_worked:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class KeepLast:
    """A call that keeps its latest result, so what the timed calls returned can be checked."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.call = call
        self.result: Any = None

    def __call__(self) -> None:
        self.result = self.call()

    def latest(self) -> Any:
        return self.result


def load_ours(model_dir: Path, name: str) -> tuple[Any, dict[str, Any], bool]:
    """Our model (None if it failed to load), its entry, and whether the peak-RSS mark was
    reset for it."""
    out: dict[str, Any] = {"cells": {}, "diff": {}}
    gc.collect()
    reset = reset_peak_rss()
    try:
        model = ours.load(model_dir, SIGNATURE)
    except Exception as exc:  # noqa: BLE001 - reported under the table
        out["error"] = short(exc)
        out["trace"] = traceback.format_exc()
        return None, out, reset
    out["load_ms"] = model.load_ms
    return model, out, reset


def run_ours(model: Any, out: dict[str, Any], cases: dict[int, Case], n: int, budget: Budget,
             name: str) -> dict[str, Any]:
    """Our cells at ``n`` threads, by ``batch/threads``; outputs checked into ``out['diff']``."""
    cells: dict[str, Any] = {}
    intra_op.set_threads(n)
    for batch, (inputs, expected) in cases.items():
        key = f"{batch}/{n}"
        try:
            # The check comes first and doubles as the first warm-up call; the last timed
            # call's outputs are checked too (a race between threads may show in one only).
            before = max_abs_diff(model.outputs(inputs), expected)
            timed = KeepLast(model.run_call(inputs))
            stats = measure(timed, budget)
            after = max_abs_diff(model.callable_outputs(timed.latest), expected)
            out["diff"][key] = worst_diff(out["diff"].get(key, 0.0), worst_diff(before, after))
        except Exception as exc:  # noqa: BLE001 - reported in its cell
            cells[key] = {"status": "error", "reason": short(exc)}
            out.setdefault("trace", traceback.format_exc())
            continue
        cells[key] = {"stats": stats.as_dict()}
        progress(f"[ours] {name} b={batch} threads {n}: {stats.median_us / 1000:.1f} ms")
    intra_op.set_threads(1)
    return cells


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell from the same cell's rounds: the median of their medians and of their p90s
    (an error in any round is the cell's)."""
    failed = [c for c in rounds if "stats" not in c]
    if failed:
        return failed[0]
    return {"stats": {q: float(np.median([c["stats"][q] for c in rounds]))
                      for q in ("median_us", "p90_us")},
            "rounds": [c["stats"] for c in rounds]}


def paired_ratio(ours_rounds: list[dict[str, Any]], tf_rounds: list[dict[str, Any]]
                 ) -> float | None:
    """The median over rounds of ours / TF's median, each round's pair timed minutes apart at
    most: the machine's speed drifts more than that between rounds."""
    pairs = [a["stats"]["median_us"] / b["stats"]["median_us"]
             for a, b in zip(ours_rounds, tf_rounds, strict=True)
             if "stats" in a and "stats" in b]
    return float(np.median(pairs)) if pairs else None


def worst_diff(a: float | str, b: float | str) -> float | str:
    if isinstance(a, str):
        return a
    if isinstance(b, str):
        return b
    return max(a, b)


# -- output -------------------------------------------------------------------------------------


def ms(cell: dict[str, Any] | None, notes: Notes, where: str, p90: bool = True) -> str:
    if cell is None:
        return "-"
    if "stats" in cell:
        s = cell["stats"]
        text = _ms(s["median_us"])
        return f"{text}/{_ms(s['p90_us'])}" if p90 else text
    if cell.get("status") == "-":
        return "-"
    note = notes.ref(f"{where}: {cell.get('reason', '')}")
    return f"{cell.get('status', 'n/a')}[{note}]"


def _ms(us: float) -> str:
    value = us / 1000
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _median(cell: dict[str, Any] | None) -> float | None:
    return None if cell is None or "stats" not in cell else float(cell["stats"]["median_us"])


def latency_table(results: dict[str, Any], args: argparse.Namespace) -> str:
    notes = Notes()
    header = ["model", "batch", "threads", "graphserve ms", "TF ms", "ratio", "max|diff|",
              "max|TF out|"]
    rows: list[list[str]] = []
    for name, entry in results.items():
        if "skipped" in entry:
            notes.ref(f"{name}: {entry['skipped']}")
            continue
        mine = entry["ours"]
        if "error" in mine:
            notes.ref(f"{name} graphserve: {mine['error']}")
        for batch in args.batches:
            for n in args.threads:
                key = f"{batch}/{n}"
                ours_cell = mine["cells"].get(key)
                if ours_cell is None and "error" in mine:
                    ours_cell = {"status": "n/a", "reason": mine["error"]}
                tf_cell = entry["tf"].get(str(n), {}).get("cells", {}).get(str(batch))
                a, b = _median(ours_cell), _median(tf_cell)
                diff = mine["diff"].get(key)
                if isinstance(diff, str):
                    diff_text = f"FAIL[{notes.ref(f'{name} b={batch} t={n}: {diff}')}]"
                else:
                    diff_text = "-" if diff is None else f"{diff:.1e}"
                rows.append([
                    name, str(batch), str(n),
                    ms(ours_cell, notes, f"{name} b={batch} t={n} graphserve"),
                    ms(tf_cell, notes, f"{name} b={batch} t={n} TF"),
                    ratio_text(entry.get("ratio", {}).get(key), a, b),
                    diff_text,
                    f"{entry['scale'][batch]:.2g}",
                ])
    text = _render(rows, header, right_from=1)
    if notes.items:
        text += "\n\n" + "\n".join(f"[{i}] {n}" for i, n in enumerate(notes.items, 1))
    return text


def ratio_text(paired: float | None, a: float | None, b: float | None) -> str:
    if paired is not None:
        return f"{paired:.2f}"
    return "-" if a is None or b is None else f"{a / b:.2f}"


def _seconds(ms_value: float | None) -> str:
    return "-" if ms_value is None else f"{ms_value / 1000:.1f}"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def memory_table(results: dict[str, Any], args: argparse.Namespace) -> str:
    header = ["model", "graphserve load s", "peak RSS MiB",
              *(f"TF t={n} load s" for n in args.threads),
              *(f"TF t={n} peak RSS MiB" for n in args.threads)]
    rows: list[list[str]] = []
    for name, entry in results.items():
        if "skipped" in entry:
            continue
        mine = entry["ours"]
        tf = [entry["tf"].get(str(n), {}) for n in args.threads]
        rows.append([
            name,
            _seconds(mine.get("load_ms")),
            _mib(mine.get("peak_rss_mib")),
            *(_seconds(t.get("load_ms")) for t in tf),
            *(_mib(t.get("peak_rss_mib")) for t in tf),
        ])
    return _render(rows, header, right_from=1)


def environment(args: argparse.Namespace, budget: Budget,
                versions: dict[str, str], build_s: float) -> dict[str, Any]:
    return {
        **machine(),
        "tensorflow": versions,
        "tf_engine": args.tf_engine,
        "threads": args.threads,
        "blas_threads": {v: os.environ.get(v) for v in
                         ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "budget": dataclasses.asdict(budget),
        "rounds": args.rounds,
        "build_s": build_s,
    }


def header(env: dict[str, Any]) -> str:
    load = " ".join(f"{x:.2f}" for x in env["load_average"])
    tf = env["tensorflow"].get("tensorflow", "?")
    b = env["budget"]
    engine = {"tf2": "eager signature call", "tf1": "session.run"}[env["tf_engine"]]
    return "\n".join([
        f"convnet benchmark  {env['date']}  {env['cpus']} CPUs  load avg {load}",
        f"python {env['python']}, numpy {env['numpy']}; TensorFlow {tf} ({engine})",
        f"models: {BUILT_MODELS.relative_to(ROOT)} (make_bench_models.py: {env['build_s']:.1f} s)",
        (f"threads: TF intra-op = inter-op = n; graphserve: runtime.intra_op.set_threads(n), "
         f"OPENBLAS_NUM_THREADS={env['blas_threads']['OPENBLAS_NUM_THREADS']}"),
        (f"cells: median/p90 ms per call after {b['warmup_calls']} warm-up calls, "
         f"{b['seconds']} s and at least {b['min_calls']} calls (a slow cell stops after "
         f"{b['cap_seconds']:.0f} s with at least {b['floor_calls']}), each the median over "
         f"{env['rounds']} rounds, the engines' order alternating; ratio = the median of the "
         "rounds' graphserve / TF medians; max|diff| against TF's recorded outputs (first and "
         "last call of every round), max|TF out| their scale"),
    ])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    budget = QUICK_BUDGET if args.quick else BUDGET
    CACHE.mkdir(parents=True, exist_ok=True)
    errors, build_s = build_models(args.models, args.tf_python)
    results: dict[str, Any] = {}
    versions: dict[str, str] = {}
    scratch = Path(tempfile.mkdtemp(prefix="convnet-", dir=CACHE))
    try:
        with (CACHE / "convnet_tf_worker.log").open("w") as log:
            for name in args.models:
                base = BUILT_MODELS / name
                model_dir, expected = base / "1", base / "expected.npz"
                if name in errors or not expected.exists():
                    results[name] = {"skipped": errors.get(name, f"not built ({expected})")}
                    continue
                cases = cases_by_batch(expected, args.batches)
                files: dict[str, str] = {}
                for batch, (inputs, _) in cases.items():
                    files[str(batch)] = str(scratch / f"{name}-in-b{batch}.npz")
                    np.savez(files[str(batch)], **inputs)
                entry: dict[str, Any] = {
                    "dir": str(model_dir),
                    "scale": {b: max(float(np.max(np.abs(v))) for v in out.values())
                              for b, (_, out) in cases.items()},
                    "tf": {},
                    "ratio": {},
                }
                model, mine, reset = load_ours(model_dir, name)
                ours_rounds: dict[str, list[dict[str, Any]]] = {}
                tf_rounds: dict[int, list[dict[str, Any]]] = {}
                for round_index in range(args.rounds):
                    for i, n in enumerate(args.threads):
                        # Alternate which engine goes first, so a drift in the machine's
                        # speed during the round weighs on both alike.
                        tf_first = (round_index + i) % 2 == 0
                        for engine in ("tf", "ours") if tf_first else ("ours", "tf"):
                            if engine == "tf":
                                tf_rounds.setdefault(n, []).append(
                                    run_tf(name, model_dir, files, n, args, budget, scratch, log))
                            elif model is not None:
                                for key, cell in run_ours(model, mine, cases, n, budget,
                                                          name).items():
                                    ours_rounds.setdefault(key, []).append(cell)
                for n, parts in tf_rounds.items():
                    versions = versions or parts[0]["versions"]
                    loads = [p["load_ms"] for p in parts if "load_ms" in p]
                    entry["tf"][str(n)] = {
                        "versions": parts[0]["versions"],
                        "peak_rss_mib": max(p["peak_rss_mib"] for p in parts),
                        "cells": {b: combine([p["cells"][b] for p in parts])
                                  for b in files},
                    }
                    if loads:
                        entry["tf"][str(n)]["load_ms"] = float(np.median(loads))
                for key, cells in ours_rounds.items():
                    mine["cells"][key] = combine(cells)
                    batch, n = key.split("/")
                    entry["ratio"][key] = paired_ratio(
                        cells, [p["cells"][batch] for p in tf_rounds[int(n)]])
                mine["peak_rss_mib"] = peak_rss_mib(reset)
                mine["peak_rss_scope"] = "model" if reset else "process"
                del model
                gc.collect()
                entry["ours"] = mine
                results[name] = entry
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    env = environment(args, budget, versions, build_s)
    print(header(env))
    print()
    print(latency_table(results, args))
    print()
    print("Load times and peak RSS (graphserve: this process while the model ran; "
          "TF: each worker process):")
    print(memory_table(results, args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {"environment": env, "models": results}
        args.json.write_text(json.dumps(data, indent=1, default=str) + "\n")
        print(f"\nraw numbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
