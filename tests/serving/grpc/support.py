"""Helpers for the gRPC tests: an in-process server on a free loopback port, and stubs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import grpc

from protos.tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc
from serving.grpc.server import GrpcCore, GrpcOptions, start_grpc_server
from serving.servable import ServableHandle, ServableId
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


class _CountedModel:
    """A loaded version whose runs are recorded and, for the gated model, wait for the gate."""

    def __init__(self, model: Any, gate: GatedCore, name: str) -> None:
        self._model = model
        self._gate = gate
        self._name = name

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if self._name == GatedCore.GATED:
            self._gate.entered.set()
            self._gate.release.wait(timeout=120)
        self._gate.runs.append(self._name)
        return self._model.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class GatedCore:
    """A ServerCore with one more model, ``gated``: half_plus_two whose runs (on a worker
    thread) wait until ``release`` is set, or, with ``auto_release``, until another request is
    looked up.

    A request for ``gated`` therefore cannot be answered before the caller sends its next
    request, which it only does after giving up on this one: a deadline that surely passes
    while the server holds the request, without timing anything. ``runs`` lists the models
    each run was for, in order.
    """

    GATED = "gated"

    def __init__(self, core: Any, auto_release: bool = True) -> None:
        self._core = core
        self._auto_release = auto_release
        self.release = threading.Event()
        self.entered = threading.Event()
        self.lookups: list[str] = []
        self.runs: list[str] = []

    def handle(self, request: Any) -> ServableHandle:
        self.lookups.append(request.name)
        if request.name == self.GATED:
            inner = self._core.handle(replace(request, name="half_plus_two"))
            return ServableHandle(ServableId(self.GATED, inner.id.version),
                                  _CountedModel(inner.servable, self, self.GATED), inner.release)
        if self._auto_release and self.entered.is_set():
            self.release.set()
        inner = self._core.handle(request)
        return ServableHandle(inner.id, _CountedModel(inner.servable, self, request.name),
                              inner.release)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)
