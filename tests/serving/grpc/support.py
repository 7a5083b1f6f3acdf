"""Helpers for the gRPC tests: an in-process server on a free loopback port, and stubs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc

from protos.tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc
from serving.grpc.server import GrpcCore, GrpcOptions, start_grpc_server
from tests.serving.rest.server_process import free_port


@dataclass
class Client:
    address: str
    channel: grpc.Channel
    predictions: Any  # PredictionServiceStub
    models: Any  # ModelServiceStub

    def raw(self, method: str) -> Any:
        """A unary call sending and receiving bytes, e.g. ``/tensorflow.serving.X/Predict``."""
        return self.channel.unary_unary(method)


@contextmanager
def serving(core: GrpcCore, **options: Any) -> Iterator[Client]:
    """A started server on 127.0.0.1 with ``options`` (GrpcOptions fields), and a client."""
    port = free_port()
    server = start_grpc_server(core, GrpcOptions(port=port, host="127.0.0.1", **options))
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    try:
        yield Client(
            address,
            channel,
            prediction_service_pb2_grpc.PredictionServiceStub(channel),
            model_service_pb2_grpc.ModelServiceStub(channel),
        )
    finally:
        channel.close()
        server.stop(None)


def rpc_error(call: Any, *args: Any, **kwargs: Any) -> grpc.RpcError:
    """The error a call fails with (the test fails if it succeeds)."""
    try:
        call(*args, **kwargs)
    except grpc.RpcError as err:
        return err
    raise AssertionError(f"{call} succeeded")


class GatedCore:
    """A ServerCore whose lookups of model ``gated`` block until another lookup arrives.

    A request for ``gated`` therefore cannot be answered before the caller sends its next
    request, which it only does after giving up on this one: a deadline that surely passes
    while the server holds the request, without timing anything.
    """

    GATED = "gated"

    def __init__(self, core: Any) -> None:
        self._core = core
        self.release = threading.Event()
        self.entered = threading.Event()
        self.lookups: list[str] = []

    def handle(self, request: Any) -> Any:
        self.lookups.append(request.name)
        if request.name == self.GATED:
            self.entered.set()
            self.release.wait(timeout=120)
        elif self.entered.is_set():
            self.release.set()
        return self._core.handle(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)
