"""Big convnets, one call each: graphserve's runtime beside TensorFlow at the same thread count.

    .venv/bin/python bench/convnet_bench.py [--models resnet50,mobilenet,...] [--batches 1,8]
        [--threads 1,2] [--tf-engine tf2|tf1] [--quick] [--json PATH]

Models: ``keras.applications`` ResNet50, MobileNet (v1), MobileNetV2, EfficientNetB0 and
Xception with random weights, made by TensorFlow with ``make_bench_models.py`` into
``bench/.cache/models/`` (built on first use, in TensorFlow's interpreter). Inputs are the
recorded ones in each model's ``expected.npz`` (batch1, batch8; another batch size repeats the
batch8 rows, outputs included, since rows are independent at inference).

For each model and thread count:

1. TensorFlow, in a subprocess of ``.venv-tf`` (``tf_paced.py``): intra-op and inter-op
   parallelism both set to the thread count before any op runs; ``tf2`` calls
   ``tf.saved_model.load(dir).signatures["serving_default"]`` eagerly (numpy in and out), ``tf1``
   is the session path TensorFlow Serving takes. It makes one call each time the driver asks and
   reports how long it took. Its peak RSS comes from ``wait4``.
2. Our runtime in this process (TensorFlow is never imported here; the model is loaded once):
   ``session.run`` on the signature's tensors, threads set with
   ``runtime.intra_op.set_threads(n)``. BLAS stays single-threaded, as in the daemon
   (``serving/__init__.py``). Before timing each cell, its outputs are compared with
   TensorFlow's recorded ones (largest |difference|), and those of the last timed call as well.

The engines' calls are paired: TensorFlow's call, then ours (or the other way round, alternating
from pair to pair), each after a 2 ms pause with the other engine idle. This machine's speed
drifts by 10-20% over minutes, more than the differences measured; the calls of a pair are
milliseconds apart, so each pair's ratio sees one machine, and the cell's ratio is the median of
its pairs'. Each cell warms both engines up, then makes pairs for twice the budget (3 s and at
least 10 pairs; a slow cell stops after 120 s with at least 5) and reports each engine's median
and p90 in ms. Never a verdict: it prints tables, and ``--json`` keeps the raw numbers.
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
from bench.timing import Budget, Stats, machine, summarize
from runtime import intra_op
from runtime.kernels.compiled import compiled_loops

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
                        help="smoke run: pairs for 1 s and at least 3 per cell, 1 warm-up call")
    parser.add_argument("--tf-python", type=Path, default=TF_PY)
    parser.add_argument("--json", type=Path, help="write the raw numbers here")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.threads = [int(t) for t in args.threads.split(",") if t]
    if any(t < 1 for t in args.threads):
        parser.error("thread counts start at 1")
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


class PacedTF:
    """``tf_paced.py`` with one model loaded at one thread count: ``call(batch)`` makes one call
    and returns its nanoseconds; ``close()`` ends it and returns its peak RSS in MiB."""

    def __init__(self, name: str, model_dir: Path, files: dict[str, str], threads: int,
                 args: argparse.Namespace, scratch: Path, log: Any) -> None:
        request = {"dir": str(model_dir), "signature": SIGNATURE, "engine": args.tf_engine,
                   "threads": threads, "batches": files}
        request_path = scratch / f"tf-{name}-t{threads}.json"
        request_path.write_text(json.dumps(request, indent=1))
        command = [str(args.tf_python), str(ROOT / "bench" / "tf_paced.py"), str(request_path)]
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True, cwd=ROOT)
        words = self._answer().split(maxsplit=2)
        if words[:1] != ["ready"]:
            self.close()
            raise RuntimeError(" ".join(words) or f"tf_paced.py exited with {self.proc.poll()}")
        self.load_ms, self.version = float(words[1]), words[2]

    def _answer(self, line: str | None = None) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def call(self, batch: int) -> int:
        answer = self._answer(f"call {batch}")
        if not answer.isdigit():
            raise RuntimeError(f"tf_paced.py: {answer or 'exited'}; see "
                               f"{CACHE.name}/convnet_tf_worker.log")
        return int(answer)

    def collect(self) -> None:
        self._answer("collect")

    def close(self) -> float:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        # wait4 rather than wait: the child's own peak RSS comes with its exit status.
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return usage.ru_maxrss / 1024


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


# Between two calls: the other engine's threads go idle (TensorFlow's spin a while after a call).
PAUSE_S = 0.002


def run_pairs(model: Any, tf: PacedTF, inputs: Arrays, expected: Arrays, batch: int,
              budget: Budget) -> tuple[Stats, Stats, float, float | str]:
    """One cell's pairs: our stats, TensorFlow's, the median of the pairs' ratios, and the
    largest |difference| of our first and last outputs from TensorFlow's recorded ones."""
    # The check comes first and doubles as the first warm-up call; the last timed call's
    # outputs are checked too (a race between threads may show in one only).
    before = max_abs_diff(model.outputs(inputs), expected)
    timed = KeepLast(model.run_call(inputs))
    for _ in range(budget.warmup_calls):
        timed()
        tf.call(batch)
    ours_ns: list[int] = []
    tf_ns: list[int] = []
    tf.collect()
    gc.collect()
    gc.disable()  # as timeit does: a collection would land on one engine's call
    clock = time.perf_counter_ns
    try:
        start = time.perf_counter()
        while True:
            ours_first = len(ours_ns) % 2 == 1
            for engine in ("ours", "tf") if ours_first else ("tf", "ours"):
                time.sleep(PAUSE_S)
                if engine == "tf":
                    tf_ns.append(tf.call(batch))
                else:
                    t0 = clock()
                    timed()
                    ours_ns.append(clock() - t0)
            elapsed = time.perf_counter() - start
            if elapsed >= 2 * budget.seconds and len(ours_ns) >= budget.min_calls:
                break
            if elapsed >= 2 * budget.cap_seconds and len(ours_ns) >= budget.floor_calls:
                break
    finally:
        gc.enable()
    after = max_abs_diff(model.callable_outputs(timed.latest), expected)
    ratio = float(np.median([a / b for a, b in zip(ours_ns, tf_ns, strict=True)]))
    return summarize(ours_ns), summarize(tf_ns), ratio, worst_diff(before, after)


def run_threads(name: str, model: Any, model_dir: Path, cases: dict[int, Case],
                files: dict[str, str], n: int, args: argparse.Namespace, budget: Budget,
                scratch: Path, log: Any, entry: dict[str, Any], mine: dict[str, Any]) -> None:
    """Both engines' cells at ``n`` threads, into ``entry`` (TensorFlow's, the ratios) and
    ``mine`` (ours, the output checks)."""
    tf_part: dict[str, Any] = entry["tf"].setdefault(str(n), {"cells": {}})
    try:
        tf = PacedTF(name, model_dir, files, n, args, scratch, log)
    except Exception as exc:  # noqa: BLE001 - reported in its cells
        for batch in cases:
            tf_part["cells"][str(batch)] = {"status": "n/a", "reason": short(exc)}
        return
    tf_part["load_ms"], tf_part["version"] = tf.load_ms, tf.version
    intra_op.set_threads(n)
    try:
        for batch, (inputs, expected) in cases.items():
            key = f"{batch}/{n}"
            if model is None:
                tf_part["cells"][str(batch)] = {"status": "-"}
                continue
            try:
                ours_stats, tf_stats, ratio, diff = run_pairs(model, tf, inputs, expected, batch,
                                                              budget)
            except Exception as exc:  # noqa: BLE001 - reported in its cell
                mine["cells"][key] = {"status": "error", "reason": short(exc)}
                mine.setdefault("trace", traceback.format_exc())
                continue
            mine["cells"][key] = {"stats": ours_stats.as_dict()}
            tf_part["cells"][str(batch)] = {"stats": tf_stats.as_dict()}
            entry["ratio"][key] = ratio
            mine["diff"][key] = diff
            progress(f"{name} b={batch} threads {n}: graphserve "
                     f"{ours_stats.median_us / 1000:.1f} ms, TF {tf_stats.median_us / 1000:.1f} "
                     f"ms, ratio {ratio:.2f} ({ours_stats.calls} pairs)")
    finally:
        intra_op.set_threads(1)
        tf_part["peak_rss_mib"] = tf.close()


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
        "pause_s": PAUSE_S,
        "build_s": build_s,
        "compiled_loops": compiled_loops(),
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
         f"OPENBLAS_NUM_THREADS={env['blas_threads']['OPENBLAS_NUM_THREADS']}; compiled loops: "
         f"{', '.join(env['compiled_loops']) or 'none'}"),
        (f"cells: median/p90 ms per call after {b['warmup_calls']} warm-up calls each, in "
         f"pairs (TF's call and ours, alternating which goes first, {env['pause_s'] * 1000:.0f} "
         f"ms apart) for {2 * b['seconds']:.0f} s and at least {b['min_calls']} pairs (a slow "
         f"cell stops after {2 * b['cap_seconds']:.0f} s with at least {b['floor_calls']}); "
         "ratio = the median of the pairs' graphserve / TF; max|diff| against TF's recorded "
         "outputs (first and last call), max|TF out| their scale"),
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
                for n in args.threads:
                    run_threads(name, model, model_dir, cases, files, n, args, budget, scratch,
                                log, entry, mine)
                    version = entry["tf"][str(n)].get("version")
                    if version:
                        versions = {"tensorflow": version}
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
