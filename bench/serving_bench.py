"""Serving benchmark: graphserve's REST and gRPC predict path (TensorFlow Serving's APIs, and the
Open Inference Protocol's infer on the same ports), with batching off, with a fixed batch
timeout and with the adaptive window, beside the ceiling servers and a FastAPI + TensorFlow server,
under C load generators on loopback.

    .venv/bin/python bench/serving_bench.py [--quick] [--models mlp,mlp_wide]
        [--concurrency 1,8,64] [--seconds 5] [--modes off,fixed,adaptive]
        [--transports rest,grpc,rest_v2,grpc_v2]
        [--servers graphserve,asgi,grpcio,fastapi_tf] [--skip-plot] [--json PATH]

Closed loop (the tables): ``wrk`` for REST (a Lua script POSTs the batch-1 ``{"instances": ...}``
body, or for ``rest_v2`` the v2 JSON body), ``h2load`` for gRPC (a pre-framed batch-1
``PredictRequest``, or for ``grpc_v2`` a ``ModelInferRequest`` with raw contents, as Triton's
client sends it), at each concurrency: a
warm-up run, then a timed run. Open loop (the latency-vs-load picture): ``h2load --h1 --rps`` at
offered rates from light to past saturation, REST, on ``--sweep-model``, per batching mode; drawn
by ``bench/plot_latency.py``. Each server is checked first (one real answer, compared with
TensorFlow's output), so no table times an error server; one that fails shows as FAIL with the
tail of its log. Prints tables, never a verdict; ``--json`` keeps every number. See
bench/README.md for what each column means.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc

from bench import serving_load as load
from bench.serving_report import (
    model_table,
    sweep_table,
    targets_table,
)
from bench.serving_servers import Server, ServerFailed, free_port
from bench.serving_workload import (
    Workload,
    check_grpc,
    check_grpc_v2,
    check_rest,
    check_rest_v2,
    load_workload,
    write_request_files,
)

PY = Path(sys.executable)
GRAPHSERVE = PY.with_name("graphserve")
TF_PY = ROOT / ".venv-tf" / "bin" / "python"
CACHE = ROOT / "bench" / ".cache"
BUILT_MODELS = CACHE / "models"
SWEEP_JSON = CACHE / "latency_sweep.json"
DEFAULT_PLOT = ROOT / "docs" / "latency_vs_load.png"

MODELS: dict[str, Path] = {  # name -> base path (version 1/ inside, expected.npz beside it)
    "mlp": ROOT / "tests" / "fixtures" / "models" / "mlp",
    "mlp_wide": BUILT_MODELS / "mlp_wide",
}
BUILT = {"mlp_wide"}  # made by make_bench_models.py in TensorFlow's environment
MODES = ("off", "fixed", "adaptive")
# TensorFlow Serving's REST and gRPC APIs, and the Open Inference Protocol's (v2) on the same ports.
TRANSPORTS = ("rest", "grpc", "rest_v2", "grpc_v2")
SERVERS = ("graphserve", "asgi", "grpcio", "fastapi_tf")
START_DEADLINE_S = 180.0
FASTAPI_PACKAGES = ["fastapi", "uvicorn[standard]"]
PLOT_PACKAGES = ["matplotlib>=3.8"]
# Offered rates of the sweep, as multiples of a reference capacity (graphserve's closed-loop REST
# throughput at the highest concurrency, batching off); each mode climbs until it saturates.
LADDER = (0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0,
          3.5, 4.0, 5.0, 6.0)
QUICK_LADDER = (0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
SATURATED = 0.95  # a point whose sent or answered rate is below this share of the offered rate


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: mlp only, concurrency 1 and 64, 2 s per cell, "
                             "a short sweep")
    parser.add_argument("--models", help=f"comma separated, of {', '.join(MODELS)} (all)")
    parser.add_argument("--concurrency", help="closed-loop concurrencies (1,8,64)")
    parser.add_argument("--seconds", type=int, help="timed window per cell, whole seconds (5)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up run per cell, s (1)")
    parser.add_argument("--modes", default=",".join(MODES), help="graphserve batching modes")
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--servers", default=",".join(SERVERS),
                        help="which servers run: graphserve, asgi (bare ASGI ceiling), grpcio "
                             "(gRPC ceiling), fastapi_tf (FastAPI + TensorFlow)")
    batching = parser.add_argument_group("batching parameters of modes fixed and adaptive")
    batching.add_argument("--max-batch-size", type=int, default=64)
    batching.add_argument("--batch-timeout-us", type=int, default=2000,
                          help="fixed mode's batch_timeout_micros (2000)")
    batching.add_argument("--adaptive-budget-us", type=int, default=5000,
                          help="adaptive mode: batch_timeout_micros = minus this (5000)")
    batching.add_argument("--max-enqueued-batches", type=int, default=100)
    batching.add_argument("--batch-threads", type=int, default=2,
                          help="num_batch_threads (2: this machine's cores)")
    sweep = parser.add_argument_group("latency vs offered load (REST, open loop)")
    sweep.add_argument("--skip-plot", action="store_true", help="no sweep, no picture")
    sweep.add_argument("--sweep-model", default="mlp_wide")
    sweep.add_argument("--rates", help="offered rates, req/s, comma separated (default: a ladder "
                                       "scaled to the measured capacity)")
    sweep.add_argument("--sweep-seconds", type=int, help="full-rate window per point (3)")
    sweep.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="the PNG to write")
    parser.add_argument("--no-install", action="store_true",
                        help="never pip-install fastapi/uvicorn (.venv-tf) or matplotlib (.venv)")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    args.models = (args.models or ("mlp" if args.quick else ",".join(MODELS))).split(",")
    args.concurrency = [int(c) for c in
                        (args.concurrency or ("1,64" if args.quick else "1,8,64")).split(",")]
    args.seconds = args.seconds or (2 if args.quick else 5)
    args.sweep_seconds = args.sweep_seconds or (2 if args.quick else 3)
    args.rates = [float(r) for r in args.rates.split(",")] if args.rates else None
    for name, allowed in (("models", MODELS), ("modes", MODES), ("transports", TRANSPORTS),
                          ("servers", SERVERS)):
        values = getattr(args, name)
        values = values if isinstance(values, list) else values.split(",")
        values = [v for v in values if v]
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            parser.error(f"unknown {name} {unknown}; known: {', '.join(allowed)}")
        setattr(args, name, values)
    if args.sweep_model not in MODELS:
        parser.error(f"unknown --sweep-model {args.sweep_model}")
    return args


# --- environment -------------------------------------------------------------------------------


def _imports(python: Path, modules: str) -> bool:
    done = subprocess.run([str(python), "-c", f"import {modules}"], check=False,
                          capture_output=True)
    return done.returncode == 0


def ensure_packages(python: Path, modules: str, packages: list[str], allowed: bool) -> str | None:
    """None when ``python`` can import ``modules``, installing ``packages`` with its pip if it
    cannot (and installing is allowed); else why not."""
    if not python.exists():
        return f"{python} does not exist"
    if _imports(python, modules):
        return None
    if not allowed:
        return f"{python} lacks {modules} (--no-install)"
    print(f"installing {' '.join(packages)} into {python.parents[1].name} (bench only) ...",
          file=sys.stderr, flush=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *packages],
                          check=False, capture_output=True, text=True)
    if done.returncode != 0 or not _imports(python, modules):
        return f"pip install {' '.join(packages)} failed: {done.stderr.strip()[-300:]}"
    return None


def build_models(names: list[str]) -> dict[str, str]:
    """Builds (or finds cached) the TensorFlow-made models; returns errors by model."""
    wanted = [n for n in names if n in BUILT]
    if not wanted:
        return {}
    if not TF_PY.exists():
        return {n: f"{TF_PY} does not exist (make fixtures builds it)" for n in wanted}
    done = subprocess.run(
        [str(TF_PY), str(ROOT / "bench" / "make_bench_models.py"),
         f"--models={','.join(wanted)}", f"--out={BUILT_MODELS}"],
        check=False, capture_output=True, text=True,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {n: f"make_bench_models.py failed: {tail[0]}" for n in wanted}
    return {}


def tool_version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=10)
    except OSError as err:
        return f"missing ({err})"
    text = (done.stdout + done.stderr).strip().splitlines()
    return text[0] if text else "?"


# --- servers -----------------------------------------------------------------------------------


def batching_text(args: argparse.Namespace, mode: str) -> str:
    timeout = args.batch_timeout_us if mode == "fixed" else -args.adaptive_budget_us
    return (f"max_batch_size {{ value: {args.max_batch_size} }}\n"
            f"batch_timeout_micros {{ value: {timeout} }}\n"
            f"max_enqueued_batches {{ value: {args.max_enqueued_batches} }}\n"
            f"num_batch_threads {{ value: {args.batch_threads} }}\n")


def start_graphserve(work: Workload, mode: str, args: argparse.Namespace, scratch: Path,
                     label: str = "graphserve") -> Server:
    ports = {"grpc": free_port(), "rest": free_port()}
    argv = [str(GRAPHSERVE), f"--port={ports['grpc']}", f"--rest_api_port={ports['rest']}",
            f"--model_name={work.model}", f"--model_base_path={work.base_path}"]
    if mode != "off":
        params = scratch / f"batching_{mode}.pbtxt"
        params.write_text(batching_text(args, mode))
        argv += ["--enable_batching", f"--batching_parameters_file={params}"]
    return Server(f"{label} {work.model} {mode}", argv, ports, scratch,
                  fatal=r"Loading servable: .* failed: .*")


def start_asgi(work: Workload, response: bytes, scratch: Path) -> Server:
    body = scratch / f"{work.model}.asgi_response.json"
    body.write_bytes(response)
    port = free_port()
    argv = [str(PY), str(ROOT / "bench" / "asgi_ceiling.py"), f"--port={port}",
            f"--response={body}"]
    return Server(f"asgi ceiling {work.model}", argv, {"rest": port}, scratch)


def start_grpc_ceiling(work: Workload, response: bytes, scratch: Path) -> Server:
    path = scratch / f"{work.model}.grpc_response.bin"
    path.write_bytes(response)
    port = free_port()
    argv = [str(PY), str(ROOT / "bench" / "grpc_ceiling.py"), f"--port={port}",
            f"--response={path}"]
    return Server(f"grpcio ceiling {work.model}", argv, {"grpc": port}, scratch)


def start_fastapi_tf(work: Workload, scratch: Path) -> Server:
    port = free_port()
    argv = [str(TF_PY), str(ROOT / "bench" / "fastapi_tf_server.py"), f"--port={port}",
            f"--model_dir={work.base_path / '1'}"]
    return Server(f"FastAPI+TF {work.model}", argv, {"rest": port}, scratch,
                  env={"TF_CPP_MIN_LOG_LEVEL": "2"})


# --- closed-loop cells -------------------------------------------------------------------------


@dataclass
class Target:
    """What the load generator hits for one server and transport."""

    server: Server
    label: str  # table's server column
    mode: str
    transport: str
    framed_response_bytes: int = 0  # gRPC: 5 + the checked answer's size


CHECKS = {"rest": check_rest, "grpc": check_grpc, "rest_v2": check_rest_v2,
          "grpc_v2": check_grpc_v2}


def port_of(server: Server, transport: str) -> int:
    """The v2 paths are served on the REST and gRPC ports."""
    return server.ports[transport.removesuffix("_v2")]


def run_load(target: Target, work: Workload, files: dict[str, Path], concurrency: int,
             seconds: int, scratch: Path) -> load.LoadResult:
    port = port_of(target.server, target.transport)
    if target.transport == "rest":
        return load.wrk_closed(f"http://127.0.0.1:{port}{work.rest_path}", files["wrk_script"],
                               concurrency, seconds)
    if target.transport == "rest_v2":
        return load.wrk_closed(f"http://127.0.0.1:{port}{work.v2_rest_path}",
                               files["wrk_v2_script"], concurrency, seconds)
    path, framed = ((load.GRPC_PATH, files["grpc_framed"]) if target.transport == "grpc"
                    else (load.V2_GRPC_PATH, files["grpc_v2_framed"]))
    return load.h2load_grpc(f"http://127.0.0.1:{port}{path}", framed,
                            target.framed_response_bytes, concurrency, seconds,
                            scratch / "h2load.log")


def _cell(work: Workload, target: Target, concurrency: int | str) -> dict[str, Any]:
    return {"model": work.model, "server": target.label, "transport": target.transport,
            "mode": target.mode, "concurrency": concurrency}


def failed_cell(work: Workload, target: Target, message: str, tail: str,
                concurrency: int | str = "-") -> dict[str, Any]:
    return {**_cell(work, target, concurrency), "failed": message, "tail": tail}


def measure(target: Target, work: Workload, files: dict[str, Path], args: argparse.Namespace,
            scratch: Path) -> list[dict[str, Any]]:
    cells = []
    for concurrency in args.concurrency:
        if args.warmup:
            run_load(target, work, files, concurrency, args.warmup, scratch)
        before = target.server.cpu_seconds()
        result = run_load(target, work, files, concurrency, args.seconds, scratch)
        cpu = target.server.cpu_seconds() - before
        if not target.server.alive():
            cells.append(failed_cell(work, target, "server exited under load",
                                     target.server.tail(), concurrency))
            break
        if result.failed:
            cells.append({**failed_cell(work, target, result.failed, "", concurrency),
                          "load": result.to_json()})
            continue
        cells.append({
            **_cell(work, target, concurrency),
            "rps": result.rps, "p50_ms": result.p50_us / 1e3, "p90_ms": result.p90_us / 1e3,
            "p99_ms": result.p99_us / 1e3, "max_ms": result.max_us / 1e3,
            "cpu_s": cpu,
            "cpu_us_per_req": cpu / result.completed * 1e6 if result.completed else math.nan,
            "errors": result.errors, "completed": result.completed, "ok": result.ok,
            "seconds": result.seconds, "load": result.to_json(),
        })
        print(f"  {work.model} {target.label} {target.mode} {target.transport} c{concurrency}: "
              f"{result.rps:,.0f} req/s", file=sys.stderr, flush=True)
    return cells


def serve_and_measure(server_factory: Any, label: str, mode: str, transports: list[str],
                      work: Workload, files: dict[str, Path], args: argparse.Namespace,
                      scratch: Path, answers: dict[str, bytes], notes: list[str]
                      ) -> list[dict[str, Any]]:
    """Starts one server, checks each transport's answer, measures each transport's cells."""
    targets = [Target(None, label, mode, t) for t in transports]  # type: ignore[arg-type]
    try:
        server = server_factory()
    except OSError as err:
        return [failed_cell(work, t, f"could not start: {err}", "") for t in targets]
    cells: list[dict[str, Any]] = []
    try:
        for target in targets:
            target.server = server
            port = port_of(server, target.transport)
            check = CHECKS[target.transport]
            try:
                answer = server.wait_until(lambda c=check, p=port: c(work, p), START_DEADLINE_S,
                                           f"correct {target.transport} answer")
            except ServerFailed as err:
                cells.append(failed_cell(work, target, str(err), err.tail))
                continue
            answers.setdefault(target.transport, answer["response"])
            target.framed_response_bytes = 5 + len(answer["response"])
            cells.extend(measure(target, work, files, args, scratch))
        if mode != "off" and "not implemented yet" in server.output():
            notes.append(f"{work.model} graphserve {mode}: the server says batching is not "
                         "implemented yet; this mode ran unbatched")
    finally:
        server.stop()
    return cells


def bench_model(work: Workload, args: argparse.Namespace, scratch: Path,
                fastapi_problem: str | None, notes: list[str]) -> list[dict[str, Any]]:
    files = write_request_files(work, scratch)
    files["wrk_script"] = load.write_wrk_script(files["rest_body"],
                                                scratch / f"{work.model}.wrk.lua")
    files["wrk_v2_script"] = load.write_wrk_script(files["rest_v2_body"],
                                                   scratch / f"{work.model}.v2.wrk.lua")
    answers: dict[str, bytes] = {}  # graphserve's own answers, for the ceilings to repeat
    cells: list[dict[str, Any]] = []
    if "graphserve" in args.servers:
        for mode in args.modes:
            cells += serve_and_measure(
                lambda m=mode: start_graphserve(work, m, args, scratch), "graphserve", mode,
                args.transports, work, files, args, scratch, answers, notes)
    if "asgi" in args.servers and "rest" in args.transports:
        response = answers.get("rest") or work.fixed_rest_response()
        cells += serve_and_measure(lambda: start_asgi(work, response, scratch), "asgi ceiling",
                                   "-", ["rest"], work, files, args, scratch, {}, notes)
    if "grpcio" in args.servers and "grpc" in args.transports:
        response = answers.get("grpc") or work.fixed_grpc_response()
        cells += serve_and_measure(lambda: start_grpc_ceiling(work, response, scratch),
                                   "grpcio ceiling", "-", ["grpc"], work, files, args, scratch,
                                   {}, notes)
    if "fastapi_tf" in args.servers and "rest" in args.transports:
        if fastapi_problem:
            target = Target(None, "FastAPI+TF", "-", "rest")  # type: ignore[arg-type]
            cells.append(failed_cell(work, target, fastapi_problem, ""))
        else:
            cells += serve_and_measure(lambda: start_fastapi_tf(work, scratch), "FastAPI+TF",
                                       "-", ["rest"], work, files, args, scratch, {}, notes)
    return cells


# --- open-loop sweep ---------------------------------------------------------------------------


def sweep_rates(args: argparse.Namespace, cells: list[dict[str, Any]]) -> tuple[list[float], Any]:
    """The offered rates, and the reference capacity they were scaled to (None: given)."""
    if args.rates:
        return sorted(args.rates), None
    top = max(args.concurrency)
    found = [c["rps"] for c in cells
             if c["model"] == args.sweep_model and c["server"] == "graphserve"
             and c["transport"] == "rest" and c["concurrency"] == top and "rps" in c]
    off = [c["rps"] for c in cells
           if c["model"] == args.sweep_model and c["server"] == "graphserve"
           and c["transport"] == "rest" and c["concurrency"] == top and c["mode"] == "off"
           and "rps" in c]
    if off:
        return [], off[0]
    return [], (min(found) if found else None)


def probe_capacity(server: Server, work: Workload, files: dict[str, Path]) -> float:
    url = f"http://127.0.0.1:{server.ports['rest']}{work.rest_path}"
    result = load.wrk_closed(url, files["wrk_script"], 64, 2)
    return result.rps


def sweep_mode(work: Workload, mode: str, rates: list[float], capacity: float | None,
               args: argparse.Namespace, scratch: Path, files: dict[str, Path],
               notes: list[str]) -> tuple[dict[str, Any], float | None]:
    server = start_graphserve(work, mode, args, scratch, label="sweep")
    try:
        try:
            server.wait_until(lambda: check_rest(work, server.ports["rest"]), START_DEADLINE_S,
                              "correct rest answer")
        except ServerFailed as err:
            notes.append(f"sweep {work.model} {mode}: FAIL: {err}\n"
                         + "\n".join("    " + x for x in err.tail.splitlines()))
            return {"failed": str(err), "tail": err.tail}, capacity
        url = f"http://127.0.0.1:{server.ports['rest']}{work.rest_path}"
        load.wrk_closed(url, files["wrk_script"], 8, 1)  # warm-up
        if not rates:
            if capacity is None:
                capacity = probe_capacity(server, work, files)
                print(f"  sweep: probed capacity {capacity:,.0f} req/s ({mode}, wrk c64)",
                      file=sys.stderr, flush=True)
            ladder = QUICK_LADDER if args.quick else LADDER
            rates = [max(10.0, round(capacity * f, -1)) for f in ladder]
        points = []
        for rate in rates:
            plan = load.plan_open_loop(rate)
            before = server.cpu_seconds()
            result = load.h2load_open(url, files["rest_body"], plan, args.sweep_seconds,
                                      scratch / "sweep.log")
            cpu = server.cpu_seconds() - before
            point: dict[str, Any] = {"target_rps": rate, "offered_rps": plan.rate}
            if result.failed or not server.alive():
                point["failed"] = result.failed or "server exited"
                points.append(point)
                break
            sent = result.extra["sent_rps"]
            saturated = (sent < SATURATED * plan.rate or result.rps < SATURATED * plan.rate
                         or result.p99_us > 1e6)
            point.update(
                sent_rps=sent, rps=result.rps, p50_ms=result.p50_us / 1e3,
                p90_ms=result.p90_us / 1e3, p99_ms=result.p99_us / 1e3,
                max_ms=result.max_us / 1e3, errors=result.errors, saturated=saturated,
                cpu_us_per_req=cpu / result.extra["requests_logged"] * 1e6
                if result.extra["requests_logged"] else math.nan,
                load=result.to_json(),
            )
            points.append(point)
            print(f"  sweep {mode} {plan.rate:,.0f}/s: p50 {point['p50_ms']:.2f} ms, "
                  f"p99 {point['p99_ms']:.2f} ms{' (saturated)' if saturated else ''}",
                  file=sys.stderr, flush=True)
            if saturated:
                break
        return {"points": points}, capacity
    finally:
        server.stop()


def run_sweep(args: argparse.Namespace, scratch: Path, cells: list[dict[str, Any]],
              notes: list[str]) -> dict[str, Any]:
    base = MODELS[args.sweep_model]
    work = load_workload(args.sweep_model, base, base / "expected.npz")
    files = write_request_files(work, scratch)
    files["wrk_script"] = load.write_wrk_script(files["rest_body"],
                                                scratch / f"{work.model}.sweep.lua")
    rates, capacity = sweep_rates(args, cells)
    sweep: dict[str, Any] = {"model": work.model, "transport": "rest",
                             "generator": "h2load --h1 --rps (open loop)",
                             "seconds_per_point": args.sweep_seconds, "modes": {}}
    for mode in args.modes:
        sweep["modes"][mode], capacity = sweep_mode(work, mode, rates, capacity, args, scratch,
                                                    files, notes)
    sweep["reference_capacity_rps"] = capacity
    sweep["batching"] = {m: batching_text(args, m) for m in args.modes if m != "off"}
    return sweep


def draw(sweep_file: Path, args: argparse.Namespace) -> str:
    problem = ensure_packages(PY, "matplotlib", PLOT_PACKAGES, not args.no_install)
    if problem:
        return f"no picture: {problem}"
    done = subprocess.run([str(PY), str(ROOT / "bench" / "plot_latency.py"), str(sweep_file),
                           f"--out={args.plot}"], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        return f"no picture: {done.stderr.strip()[-300:]}"
    return done.stdout.strip()


# --- main --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunStart:
    """When and where a serving run started, and with which load generators."""

    started: datetime.datetime
    cpus: int | None
    load_before: tuple[float, float, float]
    versions: dict[str, str]

    @classmethod
    def announce(cls, title: str) -> RunStart:
        """Take the run's start and print its first two lines."""
        cpus = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count())
        run = cls(datetime.datetime.now(datetime.UTC), cpus, os.getloadavg(), {
            "wrk": tool_version([load.WRK, "--version"]),
            "h2load": tool_version([load.H2LOAD, "--version"]),
            "python": platform.python_version(), "grpcio": grpc.__version__,
        })
        print(f"{title}, {run.started:%Y-%m-%d %H:%M} UTC, {platform.node()}, {cpus} CPUs, "
              f"load average {' '.join(f'{x:.2f}' for x in run.load_before)}")
        print(f"{run.versions['wrk']}; {run.versions['h2load']}; Python "
              f"{run.versions['python']}, grpcio {run.versions['grpcio']}")
        return run

    def fields(self, load_after: tuple[float, float, float]) -> dict[str, Any]:
        """The start as the JSON output keeps it."""
        return {"started": self.started.isoformat(), "host": platform.node(), "cpus": self.cpus,
                "versions": self.versions,
                "load_average": {"before": self.load_before, "after": load_after}}


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # unwinds through every ``finally`` that stops a server


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    run = RunStart.announce("Serving benchmark")
    cpus = run.cpus
    print(f"batch-1 requests; closed loop: {args.warmup} s warm-up + {args.seconds} s per cell, "
          f"concurrency {','.join(map(str, args.concurrency))}; load generators share the "
          f"{cpus} CPUs with the server")
    for mode in (m for m in args.modes if m != "off"):
        print(f"batching {mode}: " + batching_text(args, mode).replace("\n", "; ").rstrip("; "))
    if not (shutil.which(load.WRK) and shutil.which(load.H2LOAD)):
        print("wrk and h2load are needed (Debian packages wrk, nghttp2-client)", file=sys.stderr)
        return 2

    sweep_wanted = not args.skip_plot and "graphserve" in args.servers
    errors = build_models(args.models + ([args.sweep_model] if sweep_wanted else []))
    fastapi_problem = None
    if "fastapi_tf" in args.servers and "rest" in args.transports:
        fastapi_problem = ensure_packages(TF_PY, "fastapi, uvicorn", FASTAPI_PACKAGES,
                                          not args.no_install)
    notes: list[str] = []
    cells: list[dict[str, Any]] = []
    model_errors: dict[str, str] = {}
    sweep: dict[str, Any] | None = None
    picture = ""
    with tempfile.TemporaryDirectory(prefix="serving-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        for model in args.models:
            if model in errors:
                model_errors[model] = errors[model]
                continue
            base = MODELS[model]
            work = load_workload(model, base, base / "expected.npz")
            cells += bench_model(work, args, scratch, fastapi_problem, notes)
        if sweep_wanted:
            if args.sweep_model in errors:
                notes.append(f"sweep: {errors[args.sweep_model]}")
            else:
                sweep = run_sweep(args, scratch, cells, notes)
                SWEEP_JSON.parent.mkdir(parents=True, exist_ok=True)
                SWEEP_JSON.write_text(json.dumps(sweep, indent=2))
                picture = draw(SWEEP_JSON, args)
    load_after = os.getloadavg()

    for model in args.models:
        print()
        if model in model_errors:
            print(f"{model}: {model_errors[model]}")
            continue
        print(f"{model}:")
        print(model_table(model, cells))
    targets = targets_table(cells, max(args.concurrency))
    if targets:
        print()
        print(targets)
    if sweep:
        print()
        print(f"latency vs offered load: {sweep['model']}, REST, {sweep['generator']}, "
              f"{sweep['seconds_per_point']} s at full rate per point")
        print(sweep_table(sweep))
        print(picture)
    if notes:
        print()
        print("\n".join(notes))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    if args.json:
        args.json.write_text(json.dumps({
            **run.fields(load_after),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "batching": {m: batching_text(args, m) for m in args.modes if m != "off"},
            "cells": cells, "model_errors": model_errors, "sweep": sweep, "notes": notes,
        }, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
