"""Closed-loop gRPC load: N callers each send one request and wait for its answer, again and
again, over one channel, for a warm-up and then a measured window.

    .venv/bin/python bench/grpc_load.py --target 127.0.0.1:P --request FILE --concurrency N
        [--seconds 5] [--warmup 1] [--mode sync|aio]

The request is sent as the bytes in FILE and the answer is kept as bytes: the client does no
protobuf work per call, so as little of the shared CPU as possible goes to it. ``sync``: one
thread per caller on grpcio's blocking stub; ``aio``: one coroutine per caller on ``grpc.aio``,
all in one thread. Prints one JSON object: calls answered within the measured window, their
latencies' percentiles, errors by status code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import grpc

METHOD = "/tensorflow.serving.PredictionService/Predict"
CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Window:
    start_ns: int  # measuring starts (warm-up ends)
    end_ns: int  # callers send nothing after this

    @classmethod
    def after(cls, warmup_s: float, seconds: float) -> Window:
        start = time.perf_counter_ns() + int(warmup_s * 1e9)
        return cls(start, start + int(seconds * 1e9))


class Record:
    """One caller's (start, end) pairs and failures; merged after the run (no lock per call)."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []
        self.errors: Counter[str] = Counter()


def run_sync(target: str, request: bytes, concurrency: int, window: Window) -> list[Record]:
    records = [Record() for _ in range(concurrency)]
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(METHOD)  # bytes in, bytes out

        def caller(record: Record) -> None:
            clock = time.perf_counter_ns
            while (start := clock()) < window.end_ns:
                try:
                    call(request, timeout=CALL_TIMEOUT_S)
                except grpc.RpcError as err:
                    record.errors[err.code().name] += 1
                    continue
                record.spans.append((start, clock()))

        threads = [threading.Thread(target=caller, args=(r,)) for r in records]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return records


async def _run_aio(target: str, request: bytes, concurrency: int, window: Window) -> list[Record]:
    records = [Record() for _ in range(concurrency)]
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(METHOD)

        async def caller(record: Record) -> None:
            clock = time.perf_counter_ns
            while (start := clock()) < window.end_ns:
                try:
                    await call(request, timeout=CALL_TIMEOUT_S)
                except grpc.RpcError as err:
                    record.errors[err.code().name] += 1
                    continue
                record.spans.append((start, clock()))

        await asyncio.gather(*(caller(r) for r in records))
    return records


def run_aio(target: str, request: bytes, concurrency: int, window: Window) -> list[Record]:
    return asyncio.run(_run_aio(target, request, concurrency, window))


def percentile(sorted_values: list[int], q: float) -> float:
    """Nearest rank: a latency some real call had."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[index])


def summarize(records: list[Record], window: Window) -> dict[str, object]:
    """Calls that ended inside the window: their count over the window's length is the
    throughput (in steady state, without the bias of cutting calls at both edges)."""
    latencies = sorted(
        end - start
        for record in records
        for start, end in record.spans
        if window.start_ns <= end <= window.end_ns
    )
    seconds = (window.end_ns - window.start_ns) / 1e9
    errors: Counter[str] = Counter()
    for record in records:
        errors.update(record.errors)
    return {
        "calls": len(latencies),
        "seconds": seconds,
        "rps": len(latencies) / seconds,
        "p50_us": percentile(latencies, 0.50) / 1e3,
        "p90_us": percentile(latencies, 0.90) / 1e3,
        "p99_us": percentile(latencies, 0.99) / 1e3,
        "max_us": (latencies[-1] / 1e3) if latencies else float("nan"),
        "errors": dict(errors),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="host:port")
    parser.add_argument("--request", type=Path, required=True,
                        help="a serialized PredictRequest")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--mode", choices=("sync", "aio"), default="aio")
    args = parser.parse_args(argv)
    request = args.request.read_bytes()
    run = run_sync if args.mode == "sync" else run_aio
    gc.collect()
    gc.disable()  # a collection inside the window would show up as a latency outlier
    window = Window.after(args.warmup, args.seconds)
    records = run(args.target, request, args.concurrency, window)
    gc.enable()
    result = summarize(records, window)
    result.update(mode=args.mode, concurrency=args.concurrency)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
