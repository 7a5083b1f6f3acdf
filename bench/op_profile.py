"""Where one model's call spends its time, by op type: profile before optimizing a kernel.

    .venv/bin/python bench/op_profile.py MODEL [--signature predict] [--batch 32] [--calls 200]

Loads ``tests/fixtures/models/MODEL`` (or MODEL itself, given as a path such as
``bench/.cache/models/resnet50``) with our runtime, wraps every kernel the plans build in a
timer, and runs the signature on the widest recorded case tiled to ``--batch`` rows. Prints the
time per call with and without the timers, then each op type's calls and time per model call,
slowest first. The timers add a little per kernel call, so read the table for proportions.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import runtime.dataflow_executor as dataflow_module
import runtime.plan as plan_module
from bench.ours import to_runtime
from bench.tensors import recorded_cases, tile_rows, widest_case
from runtime.saved_model import load_saved_model

# op type -> [calls, seconds]
Stats = dict[str, list[float]]


def timed_kernels(stats: Stats) -> Callable[..., Any]:
    """A ``build_kernel`` that wraps each kernel function in a timer keyed by op type."""
    build = plan_module.build_kernel

    def build_timed(factory: Callable[..., Any], ctx: Any) -> Any:
        fn = build(factory, ctx)
        if not callable(fn):
            return fn
        entry = stats.setdefault(ctx.op, [0, 0.0])

        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                entry[0] += 1
                entry[1] += time.perf_counter() - start

        return timed

    return build_timed


def per_call_us(run: Callable[[], Any], calls: int) -> float:
    for _ in range(max(3, calls // 20)):
        run()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls * 1e6


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    model_dir = (Path(args.model) if "/" in args.model
                 else ROOT / "tests" / "fixtures" / "models" / args.model)
    cases = recorded_cases(model_dir / "expected.npz", args.signature)
    if not cases:
        raise SystemExit(f"{args.model} has no recorded inputs for {args.signature!r}")
    _, arrays = widest_case(cases)
    inputs = {alias: to_runtime(a) for alias, a in tile_rows(arrays, args.batch).items()}
    version = max((p for p in model_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))

    plain = load_saved_model(version)
    plain_us = per_call_us(lambda: plain.run(args.signature, inputs), args.calls)

    stats: Stats = {}
    # Both executors build kernels through plan.build_kernel; the dataflow executor (TF1 loops)
    # holds its own reference to it.
    build_timed = timed_kernels(stats)
    plan_module.build_kernel = build_timed  # type: ignore[assignment]
    dataflow_module.build_kernel = build_timed  # type: ignore[attr-defined]
    timed = load_saved_model(version)
    timed_us = per_call_us(lambda: timed.run(args.signature, inputs), args.calls)
    for entry in stats.values():  # in place: each timer holds its own entry
        entry[:] = [0, 0.0]
    for _ in range(args.calls):
        timed.run(args.signature, inputs)

    calls = args.calls
    kernel_calls = sum(c for c, _ in stats.values()) / calls
    if not kernel_calls:
        raise SystemExit(f"{args.model}: no kernel ran through the timers")
    print(f"{args.model} {args.signature!r} batch {args.batch}: {plain_us:.0f} µs per call "
          f"({timed_us:.0f} µs timed), {kernel_calls:.0f} kernel calls")
    print(f"{'op':30s} {'calls':>6s} {'µs':>9s} {'µs/call':>8s}")
    ranked = collections.Counter({op: s for op, (_, s) in stats.items()}).most_common(args.top)
    for op, seconds in ranked:
        count = stats[op][0]
        per_call = f"{seconds / count * 1e6:8.1f}" if count else f"{'-':>8s}"
        print(f"{op:30s} {count / calls:6.1f} {seconds / calls * 1e6:9.1f} {per_call}")


if __name__ == "__main__":
    main(sys.argv[1:])
