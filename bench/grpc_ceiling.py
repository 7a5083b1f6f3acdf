"""The smallest useful Python gRPC server: ``PredictionService.Predict`` answering every request
with one precomputed ``PredictResponse``. The ceiling for a Python gRPC stack on this machine.

    .venv/bin/python bench/grpc_ceiling.py --port P --response FILE [--threads N]

It still does what any Python servicer does per call (grpcio's thread pool, parsing the
``PredictRequest``, serializing the response), and nothing else. Prints ``ready`` once it listens;
runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
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
from serving.grpc.server import GrpcOptions, server_arguments


class FixedPredictions(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, response: predict_pb2.PredictResponse) -> None:
        self._response = response

    def Predict(self, request: Any, context: Any) -> predict_pb2.PredictResponse:
        return self._response


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--response", type=Path, required=True,
                        help="a serialized PredictResponse")
    parser.add_argument("--threads", type=int, default=4 * (os.cpu_count() or 1),
                        help="worker threads (default 4 x CPUs, as graphserve)")
    args = parser.parse_args(argv)
    response = predict_pb2.PredictResponse.FromString(args.response.read_bytes())
    # The daemon's own channel arguments (message size limits, no SO_REUSEPORT).
    server = grpc.server(
        ThreadPoolExecutor(args.threads, thread_name_prefix="grpc"),
        options=server_arguments(GrpcOptions()),
    )
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        FixedPredictions(response), server
    )
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    server.stop(None).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
