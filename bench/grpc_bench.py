"""gRPC Predict throughput, latency and server CPU per request: the graphserve daemon beside the
ceilings of a Python gRPC stack on this machine.

    .venv/bin/python bench/grpc_bench.py [--models half_plus_two,mlp] [--concurrency 1,8,64]
        [--seconds 5] [--warmup 1] [--quick] [--client h2load|aio|sync] [--json PATH]

For each model, three servers run as subprocesses on loopback:

- ``graphserve``: the real daemon with default flags (REST off), serving the model;
- ``ceiling``: ``bench/grpc_ceiling.py``, a minimal ``grpc.aio`` ``PredictionService`` (the
  daemon's kind of server, on the daemon's event loop) answering every request with the
  daemon's own response to it, precomputed; same channel arguments as the daemon;
- ``sync ceiling``: the same with grpcio's thread-pool server (4 x CPUs workers).

Each cell is one load run after a warm-up run: N closed-loop callers send the same serialized
batch-1 ``PredictRequest`` (the ``batch1`` case recorded in the model's ``expected.npz``) for
``--seconds``. The default client is ``h2load`` (C, as the serving benchmark; N streams on one
connection up to 8, then 8 per connection), else ``bench/grpc_load.py`` (grpcio, one channel,
``aio`` coroutines or ``sync`` threads). req/s counts the good answers; p50/p99 are their
latencies; ``cpu us/req`` is the server process's CPU time (all threads, from /proc) over the
run divided by its answers, the number least disturbed by other load on the machine. ``ratio``
is graphserve's req/s over the ceiling's. The client shares the machine's cores with the server
it loads. Never a pass/fail: it prints one table, and ``--json`` keeps every number.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import serving_load
from bench.serving_servers import cpu_seconds
from bench.tensors import max_abs_diff, recorded_cases
from protos.tensorflow_serving.apis import (
    predict_pb2,
    prediction_service_pb2_grpc,
)
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.grpc.server import GrpcOptions

MODELS = {
    "half_plus_two": ROOT / "saved_models" / "half_plus_two",
    "mlp": ROOT / "tests" / "fixtures" / "models" / "mlp",
}
GRAPHSERVE = Path(sys.executable).with_name("graphserve")
CLIENTS = ("h2load", "aio", "sync")
SERVERS = ("graphserve", "ceiling", "sync ceiling")
START_DEADLINE_S = 180.0
SIGNATURE = "serving_default"
CASE = "batch1"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help=f"comma separated, of {', '.join(MODELS)} (all)")
    parser.add_argument("--concurrency", default="1,8,64", help="callers per cell")
    parser.add_argument("--seconds", type=float, help="measured window per cell (5)")
    parser.add_argument("--warmup", type=float, help="warm-up before each window (1)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: half_plus_two only, 1 s per cell after 0.3 s warm-up")
    parser.add_argument("--client", choices=CLIENTS,
                        default="h2load" if Path(serving_load.H2LOAD).exists() else "aio",
                        help="h2load (default where installed), or grpcio callers as grpc.aio "
                             "coroutines in one thread or as threads on the blocking stub")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    if args.models is None:
        args.models = "half_plus_two" if args.quick else ",".join(MODELS)
    args.seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 1.0)
    args.models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    return args


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Workload:
    model: str
    request: predict_pb2.PredictRequest
    expected: dict[str, np.ndarray]


def workload(model: str) -> Workload:
    expected_npz = MODELS[model] / "expected.npz"
    inputs = recorded_cases(expected_npz, SIGNATURE)[CASE]
    with np.load(expected_npz, allow_pickle=False) as data:
        prefix = f"{SIGNATURE}/{CASE}/out/"
        outputs = {k[len(prefix):]: data[k] for k in data.files if k.startswith(prefix)}
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for alias, array in inputs.items():
        request.inputs[alias].CopyFrom(make_tensor_proto(array))
    return Workload(model, request, outputs)


class Server:
    """A server subprocess on a loopback port, its output in a scratch log."""

    def __init__(self, name: str, args: list[str], port: int, scratch: Path) -> None:
        self.name = name
        self.port = port
        self.target = f"127.0.0.1:{port}"
        self.log_path = scratch / f"{name}.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_predict(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        """Retries Predict until it answers (the model is loaded), and returns the answer."""
        deadline = time.monotonic() + START_DEADLINE_S
        with grpc.insecure_channel(self.target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {self.process.returncode}:\n{self.output()}"
                    )
                try:
                    return stub.Predict(request, timeout=10)
                except grpc.RpcError as err:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"{self.name} did not answer: {err}\n{self.output()}"
                        ) from err
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_graphserve(model: str, scratch: Path) -> Server:
    port = free_port()
    args = [str(GRAPHSERVE), f"--port={port}", f"--model_name={model}",
            f"--model_base_path={MODELS[model]}"]
    return Server("graphserve", args, port, scratch)


def start_ceiling(response_file: Path, flavour: str, threads: int, scratch: Path) -> Server:
    port = free_port()
    args = [sys.executable, str(ROOT / "bench" / "grpc_ceiling.py"), f"--port={port}",
            f"--response={response_file}", f"--flavour={flavour}", f"--threads={threads}"]
    return Server("ceiling" if flavour == "aio" else "sync ceiling", args, port, scratch)


def _grpcio_load(server: Server, request_file: Path, concurrency: int, seconds: float,
                 warmup: float, mode: str) -> dict:
    command = [
        sys.executable, str(ROOT / "bench" / "grpc_load.py"), f"--target={server.target}",
        f"--request={request_file}", f"--concurrency={concurrency}",
        f"--seconds={seconds}", f"--warmup={warmup}", f"--mode={mode}",
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    result["answers"] = result["calls"]
    return result


def _h2load(server: Server, files: dict[str, Path], framed_response_bytes: int,
            concurrency: int, seconds: float) -> dict:
    url = f"http://127.0.0.1:{server.port}{serving_load.GRPC_PATH}"
    result = serving_load.h2load_grpc(url, files["framed"], framed_response_bytes, concurrency,
                                      seconds, files["scratch"] / "h2load.log")
    if result.failed:
        return {"failed": result.failed}
    return {"answers": result.ok, "seconds": result.seconds, "rps": result.rps,
            "p50_us": result.p50_us, "p99_us": result.p99_us, "errors": result.errors,
            "connections": result.extra.get("connections")}


def load(server: Server, files: dict[str, Path], framed_response_bytes: int, concurrency: int,
         args: argparse.Namespace) -> dict:
    """One cell: a warm-up run, then the measured run with the server's CPU time around it."""
    if args.client == "h2load":
        _h2load(server, files, framed_response_bytes, concurrency, max(1.0, args.warmup))
        before = cpu_seconds(server.process.pid)
        result = _h2load(server, files, framed_response_bytes, concurrency, args.seconds)
        cpu = cpu_seconds(server.process.pid) - before
    else:
        # grpc_load.py warms up inside its own run: CPU time over warm-up and window, per
        # answer in the window, slightly overstates the cost.
        before = cpu_seconds(server.process.pid)
        result = _grpcio_load(server, files["request"], concurrency, args.seconds, args.warmup,
                              args.client)
        cpu = (cpu_seconds(server.process.pid) - before) * args.seconds / (
            args.seconds + args.warmup)
    if "failed" not in result:
        result["cpu_s"] = cpu
        result["cpu_us_per_request"] = cpu / result["answers"] * 1e6 if result["answers"] else None
    return result


def bench_model(model: str, args: argparse.Namespace, threads: int, scratch: Path) -> dict:
    work = workload(model)
    request = work.request.SerializeToString()
    files = {"request": scratch / f"{model}.request.bin", "framed": scratch / f"{model}.framed",
             "scratch": scratch}
    files["request"].write_bytes(request)
    files["framed"].write_bytes(serving_load.grpc_frame(request))
    servers: list[Server] = []
    try:
        graphserve = start_graphserve(model, scratch)
        servers.append(graphserve)
        response = graphserve.wait_for_predict(work.request)
        outputs = {alias: to_ndarray(t) for alias, t in response.outputs.items()}
        response_file = scratch / f"{model}.response.bin"
        response_file.write_bytes(response.SerializeToString())
        for flavour in ("aio", "sync"):
            ceiling = start_ceiling(response_file, flavour, threads, scratch)
            servers.append(ceiling)
            if ceiling.wait_for_predict(work.request) != response:
                raise RuntimeError(f"the {ceiling.name} does not answer the daemon's response")
        framed_response_bytes = 5 + response.ByteSize()
        cells: dict[str, dict[str, Any]] = {}
        for concurrency in args.concurrency:
            cells[str(concurrency)] = {
                s.name: load(s, files, framed_response_bytes, concurrency, args) for s in servers
            }
            print(f"  {model} c={concurrency}: done", file=sys.stderr, flush=True)
        return {
            "request_bytes": len(request),
            "response_bytes": response.ByteSize(),
            "max_abs_diff": max_abs_diff(outputs, work.expected),
            "cells": cells,
        }
    finally:
        for server in servers:
            server.stop()


def _rps(cell: dict) -> str:
    return "failed" if "failed" in cell else f"{cell['rps']:.0f}"


def _ms(cell: dict, key: str) -> str:
    return "-" if "failed" in cell else f"{cell[key] / 1e3:.2f}"


def _cpu(cell: dict) -> str:
    value = cell.get("cpu_us_per_request")
    return "-" if value is None else f"{value:.0f}"


def _ratio(ours: dict, other: dict) -> str:
    if "failed" in ours or "failed" in other or not other["rps"]:
        return "-"
    return f"{ours['rps'] / other['rps']:.2f}"


def table(results: dict[str, Any]) -> str:
    header = ["model", "c", "graphserve req/s", "p50 ms", "p99 ms", "cpu us/req",
              "ceiling req/s", "cpu us/req", "ratio", "sync ceiling req/s", "cpu us/req",
              "ratio"]
    rows: list[list[str]] = []
    notes: list[str] = []
    for model, entry in results.items():
        if "error" in entry:
            notes.append(f"{model}: {entry['error']}")
            continue
        for concurrency, cell in entry["cells"].items():
            ours, ceiling, sync = (cell[name] for name in SERVERS)
            rows.append([model, concurrency, _rps(ours), _ms(ours, "p50_us"),
                         _ms(ours, "p99_us"), _cpu(ours), _rps(ceiling), _cpu(ceiling),
                         _ratio(ours, ceiling), _rps(sync), _cpu(sync), _ratio(ours, sync)])
            for name in SERVERS:
                side = cell[name]
                if "failed" in side:
                    notes.append(f"{model} c={concurrency} {name}: {side['failed']}")
                elif side["errors"]:
                    notes.append(f"{model} c={concurrency} {name}: errors {side['errors']}")
        diff = entry["max_abs_diff"]
        diff = f"{diff:.1e}" if isinstance(diff, float) else diff
        notes.append(f"{model}: outputs vs expected.npz max|diff| {diff}; "
                     f"request {entry['request_bytes']} B, response {entry['response_bytes']} B")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *map(line, rows), "", *notes])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    threads = GrpcOptions().threads  # the daemon's default executor size
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    started = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()
    print(f"gRPC Predict, {started:%Y-%m-%d %H:%M} UTC, {platform.node()}, {cpus} CPUs, "
          f"Python {platform.python_version()}, grpcio {grpc.__version__}")
    print(f"graphserve and the ceiling: grpc.aio; sync ceiling: {threads} worker threads "
          f"(4 x CPUs); client: {args.client}, its own process, on the same {cpus} CPUs as the "
          f"server it loads")
    print(f"batch-1 '{SIGNATURE}' requests; {args.warmup:g} s warm-up + {args.seconds:g} s per "
          f"cell; load average {' '.join(f'{x:.2f}' for x in load_before)}")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="grpc-bench-") as scratch:
        for model in args.models:
            try:
                results[model] = bench_model(model, args, threads, Path(scratch))
            except (RuntimeError, TimeoutError, OSError, grpc.RpcError) as err:
                results[model] = {"error": str(err).splitlines()[0]}
    load_after = os.getloadavg()
    print()
    print(table(results))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    if args.json:
        args.json.write_text(json.dumps({
            "started": started.isoformat(),
            "host": platform.node(),
            "cpus": cpus,
            "grpcio": grpc.__version__,
            "python": platform.python_version(),
            "sync_ceiling_threads": threads,
            "client": args.client,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "load_average": {"before": load_before, "after": load_after},
            "results": results,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
