"""gRPC Predict throughput and latency: the graphserve daemon beside the ceiling of a Python gRPC
stack on this machine.

    .venv/bin/python bench/grpc_bench.py [--models half_plus_two,mlp] [--concurrency 1,8,64]
        [--seconds 5] [--warmup 1] [--quick] [--client-mode aio|sync] [--json PATH]

For each model, two servers run as subprocesses on loopback:

- ``graphserve``: the real daemon with default flags (REST off), serving the model;
- ``ceiling``: ``bench/grpc_ceiling.py``, a minimal grpcio ``PredictionService`` answering every
  request with the daemon's own response to it, precomputed; same thread-pool size (4 x CPUs)
  and channel arguments as the daemon.

Each cell is a separate client process (``bench/grpc_load.py``): N closed-loop callers on one
channel send the same serialized batch-1 ``PredictRequest`` (the ``batch1`` case recorded in the
model's ``expected.npz``) for a warm-up, then for ``--seconds``; req/s counts the answers within
that window, p50/p99 are their latencies. ``ratio`` is graphserve's req/s over the ceiling's.
The client shares the machine's cores with the server it loads, so both columns include its
cost. Never a pass/fail: it prints one table, and ``--json`` keeps every number.
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
    parser.add_argument("--client-mode", choices=("aio", "sync"), default="aio",
                        help="callers as grpc.aio coroutines in one thread (the cheapest client "
                             "here at every concurrency) or as threads on the blocking stub")
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


def start_ceiling(response_file: Path, threads: int, scratch: Path) -> Server:
    port = free_port()
    args = [sys.executable, str(ROOT / "bench" / "grpc_ceiling.py"), f"--port={port}",
            f"--response={response_file}", f"--threads={threads}"]
    return Server("ceiling", args, port, scratch)


def load(server: Server, request_file: Path, concurrency: int, args: argparse.Namespace) -> dict:
    command = [
        sys.executable, str(ROOT / "bench" / "grpc_load.py"), f"--target={server.target}",
        f"--request={request_file}", f"--concurrency={concurrency}",
        f"--seconds={args.seconds}", f"--warmup={args.warmup}", f"--mode={args.client_mode}",
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_model(model: str, args: argparse.Namespace, threads: int, scratch: Path) -> dict:
    work = workload(model)
    request_file = scratch / f"{model}.request.bin"
    request_file.write_bytes(work.request.SerializeToString())
    servers: list[Server] = []
    try:
        graphserve = start_graphserve(model, scratch)
        servers.append(graphserve)
        response = graphserve.wait_for_predict(work.request)
        outputs = {alias: to_ndarray(t) for alias, t in response.outputs.items()}
        response_file = scratch / f"{model}.response.bin"
        response_file.write_bytes(response.SerializeToString())
        ceiling = start_ceiling(response_file, threads, scratch)
        servers.append(ceiling)
        if ceiling.wait_for_predict(work.request) != response:
            raise RuntimeError("the ceiling server does not answer the daemon's response")
        cells: dict[str, dict[str, Any]] = {}
        for concurrency in args.concurrency:
            cells[str(concurrency)] = {
                s.name: load(s, request_file, concurrency, args) for s in (graphserve, ceiling)
            }
            print(f"  {model} c={concurrency}: done", file=sys.stderr, flush=True)
        return {
            "request_bytes": len(work.request.SerializeToString()),
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


def table(results: dict[str, Any]) -> str:
    header = ["model", "concurrency", "graphserve req/s", "p50 ms", "p99 ms",
              "ceiling req/s", "p50 ms", "p99 ms", "ratio"]
    rows: list[list[str]] = []
    notes: list[str] = []
    for model, entry in results.items():
        if "error" in entry:
            notes.append(f"{model}: {entry['error']}")
            continue
        for concurrency, cell in entry["cells"].items():
            ours, ceiling = cell["graphserve"], cell["ceiling"]
            ratio = "-"
            if "failed" not in ours and "failed" not in ceiling and ceiling["rps"]:
                ratio = f"{ours['rps'] / ceiling['rps']:.2f}"
            rows.append([model, concurrency, _rps(ours), _ms(ours, "p50_us"),
                         _ms(ours, "p99_us"), _rps(ceiling), _ms(ceiling, "p50_us"),
                         _ms(ceiling, "p99_us"), ratio])
            for name, side in (("graphserve", ours), ("ceiling", ceiling)):
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
    threads = GrpcOptions().threads  # the daemon's default pool size
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    started = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()
    print(f"gRPC Predict, {started:%Y-%m-%d %H:%M} UTC, {platform.node()}, {cpus} CPUs, "
          f"Python {platform.python_version()}, grpcio {grpc.__version__}")
    print(f"server thread pools: {threads} (4 x CPUs); client: {args.client_mode} callers, "
          f"one channel, its own process, on the same {cpus} CPUs as the server it loads")
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
            "server_threads": threads,
            "client_mode": args.client_mode,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "load_average": {"before": load_before, "after": load_after},
            "results": results,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
