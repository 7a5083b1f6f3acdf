"""The smallest useful Python gRPC server: ``PredictionService.Predict`` answering every request
with one precomputed ``PredictResponse``. The ceiling for a Python gRPC stack on this machine.

    .venv/bin/python bench/grpc_ceiling.py --port P --response FILE [--flavour aio|sync]
        [--threads N]

``aio`` (the default) is the daemon's own kind of server: ``grpc.aio`` on the same event loop
(``serving.grpc.server.new_event_loop``: uvloop), with an ``async`` servicer. ``sync`` is
grpcio's thread-pool server with ``--threads`` workers (default 4 x CPUs), the kind graphserve
used before it moved to asyncio. Either way it does what any Python servicer does per call
(parsing the ``PredictRequest``, serializing the response) and nothing else, with the daemon's
channel arguments. Prints ``ready`` once it listens; runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protos.tensorflow_serving.apis import (
    predict_pb2,
    prediction_service_pb2_grpc,
)
from serving.grpc.server import GrpcOptions, new_event_loop, server_arguments

FLAVOURS = ("aio", "sync")


class FixedPredictions(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, response: predict_pb2.PredictResponse) -> None:
        self._response = response

    def Predict(self, request: Any, context: Any) -> predict_pb2.PredictResponse:
        return self._response


class AsyncFixedPredictions(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, response: predict_pb2.PredictResponse) -> None:
        self._response = response

    async def Predict(self, request: Any, context: Any) -> predict_pb2.PredictResponse:
        return self._response


def serve_sync(response: predict_pb2.PredictResponse, port: int, threads: int) -> None:
    server = grpc.server(
        ThreadPoolExecutor(threads, thread_name_prefix="grpc"),
        options=server_arguments(GrpcOptions()),
    )
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        FixedPredictions(response), server
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    server.stop(None).wait()


async def serve_aio(response: predict_pb2.PredictResponse, port: int) -> None:
    server = grpc.aio.server(options=server_arguments(GrpcOptions()))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        AsyncFixedPredictions(response), server
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await server.stop(None)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--response", type=Path, required=True,
                        help="a serialized PredictResponse")
    parser.add_argument("--flavour", choices=FLAVOURS, default="aio",
                        help="grpc.aio like the daemon (default), or the thread-pool server")
    parser.add_argument("--threads", type=int, default=4 * (os.cpu_count() or 1),
                        help="sync: worker threads (default 4 x CPUs)")
    args = parser.parse_args(argv)
    response = predict_pb2.PredictResponse.FromString(args.response.read_bytes())
    if args.flavour == "sync":
        serve_sync(response, args.port, args.threads)
    else:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(serve_aio(response, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
