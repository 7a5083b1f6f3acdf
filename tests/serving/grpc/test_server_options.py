"""Server options: flags, channel arguments, SSL config, listeners; graceful stop."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.errors import InvalidArgumentError, NotFoundError
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from serving.grpc.server import (
    INT32_MAX,
    GrpcOptions,
    SslOptions,
    connection_cap,
    parse_channel_arguments,
    server_arguments,
    ssl_options_from_file,
    start_grpc_server,
)
from serving.open_files import open_file_limit
from tests.serving.grpc.support import GatedCore
from tests.serving.rest.server_process import free_port


def test_channel_arguments() -> None:
    assert parse_channel_arguments("") == []
    assert parse_channel_arguments(
        "grpc.max_connection_age_ms=1000, grpc.primary_user_agent=a=b,x=-5,big=4294967296,"
    ) == [("grpc.max_connection_age_ms", 1000), ("grpc.primary_user_agent", "a=b"), ("x", -5),
          ("big", "4294967296")]
    for bad in ("novalue", "=1"):
        with pytest.raises(InvalidArgumentError, match="expected key=value"):
            parse_channel_arguments(bad)


def test_message_sizes_default_to_int32_max_and_channel_arguments_win() -> None:
    assert dict(server_arguments(GrpcOptions(), open_files=8192)) == {
        "grpc.max_receive_message_length": INT32_MAX,
        "grpc.max_send_message_length": INT32_MAX,
        "grpc.so_reuseport": 0,
        "grpc.max_connection_idle_ms": 300_000,
        "grpc.server_handshake_timeout_ms": 10_000,
        "grpc.max_allowed_incoming_connections": 1024,
        "grpc.max_concurrent_streams": 1024,
    }
    options = GrpcOptions(max_send_message_length=10,
                          channel_arguments="grpc.max_receive_message_length=99")
    args = server_arguments(options)
    assert [k for k, _ in args].count("grpc.max_receive_message_length") == 1
    assert dict(args)["grpc.max_receive_message_length"] == 99
    assert dict(args)["grpc.max_send_message_length"] == 10


def test_connection_bounds_follow_the_open_file_limit_and_channel_arguments_win() -> None:
    assert connection_cap(100) == 16
    assert connection_cap(1 << 20) == 1 << 17
    assert connection_cap(open_file_limit()) == dict(server_arguments(GrpcOptions()))[
        "grpc.max_allowed_incoming_connections"]
    options = GrpcOptions(channel_arguments="grpc.max_connection_idle_ms=500,"
                                            "grpc.max_allowed_incoming_connections=7")
    args = dict(server_arguments(options))
    assert args["grpc.max_connection_idle_ms"] == 500
    assert args["grpc.max_allowed_incoming_connections"] == 7


def test_options_from_server_flags(tmp_path: Path) -> None:
    ssl = tmp_path / "ssl.config"
    ssl.write_text('server_key: "KEY"\nserver_cert: "CERT"\ncustom_ca: "CA"\n'
                   "client_verify: true\n")
    flags = SimpleNamespace(
        port=8600, grpc_socket_path="/tmp/s", grpc_max_threads=3,
        grpc_channel_arguments="a=1", ssl_config_file=str(ssl), use_alts_credentials=False,
        enable_serialization_as_tensor_content=True, enable_signature_method_name_check=True,
        max_request_tensor_bytes=4096, enable_model_management_rpc=False,
    )
    options = GrpcOptions.from_server_options(flags)
    assert options == GrpcOptions(
        port=8600, socket_path="/tmp/s", max_threads=3, channel_arguments="a=1",
        ssl=SslOptions("KEY", "CERT", "CA", True), tensor_content=True, method_name_check=True,
        max_tensor_bytes=4096, model_management=False)
    assert options.threads == 3
    assert GrpcOptions().threads >= 4
    flags.ssl_config_file = ""
    assert GrpcOptions.from_server_options(flags).ssl is None


def test_bad_ssl_config_file(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="^Could not read SSL config file .*missing"):
        ssl_options_from_file(tmp_path / "missing")
    (tmp_path / "bad").write_text("server_key: 7")
    with pytest.raises(InvalidArgumentError) as err:
        ssl_options_from_file(tmp_path / "bad")
    assert err.value.message == f"Invalid protobuf file: '{tmp_path / 'bad'}'"


def test_listeners(core: ServerCore, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="^At least one of server_options.grpc_port"):
        start_grpc_server(core, GrpcOptions(port=0))
    ssl = SslOptions("key", "cert")
    with pytest.raises(InvalidArgumentError, match="^Either use_alts_credentials must be false"):
        start_grpc_server(core, GrpcOptions(port=1, ssl=ssl, use_alts_credentials=True))
    port = free_port()
    server = start_grpc_server(core, GrpcOptions(port=port, host="127.0.0.1",
                                                 socket_path=str(tmp_path / "grpc.sock")))
    try:
        with grpc.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            response = stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
            assert response.status == health_pb2.HealthCheckResponse.SERVING
        # A second server cannot take a port in use (no silent port sharing).
        with pytest.raises(InvalidArgumentError,
                           match=f"^Failed to BuildAndStart gRPC server: cannot listen on "
                                 f"127.0.0.1:{port}"):
            start_grpc_server(core, GrpcOptions(port=port, host="127.0.0.1"))
    finally:
        server.stop(None)


def test_stop_lets_calls_in_flight_finish(core: ServerCore) -> None:
    gated = GatedCore(core, auto_release=False)
    port = free_port()
    server = start_grpc_server(gated, GrpcOptions(port=port, host="127.0.0.1"))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = GatedCore.GATED
        request.inputs["x"].CopyFrom(make_tensor_proto(np.array([[4.0]], np.float32)))
        held = stub.Predict.future(request, timeout=120)
        assert gated.entered.wait(60)
        stopped = server.stop(120)
        assert server.stop(120) is stopped  # once
        assert not stopped.is_set()  # the held call cannot have finished
        gated.release.set()
        assert to_ndarray(held.result().outputs["y"]).tolist() == [[4.0]]
        assert stopped.wait(60)
