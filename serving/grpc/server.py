"""Builds and starts the gRPC server: TensorFlow Serving's two services, the Open Inference
Protocol's ``inference.GRPCInferenceService`` (KServe v2, as Triton speaks it), health,
reflection.

As in TensorFlow Serving (``model_servers/server.cc``): TCP on ``0.0.0.0:<port>`` (0 = none)
and/or a UNIX socket, the same credentials on both (insecure, SSL from an ``SSLConfig``, or
ALTS), message sizes up to INT32_MAX both ways, ``--grpc_channel_arguments`` applied on top
(``k=v,k=v``; values that parse as int32 are passed as ints).

Beyond TensorFlow Serving, connections are bounded by default (each overridable the same way):

* ``grpc.max_connection_idle_ms`` (5 minutes): a connection with no RPC in progress for that
  long is closed (GOAWAY; clients reconnect on their next RPC);
* ``grpc.server_handshake_timeout_ms`` (10 s): a connection that has not completed its
  handshake (TLS, and the client's HTTP/2 preface and SETTINGS) by then is closed;
* ``grpc.max_allowed_incoming_connections`` (an eighth of the open-file limit, at least 16):
  further connections are closed as they arrive, so the listener keeps accepting and never
  runs out of descriptors (the REST listener may take three quarters of them);
* ``grpc.max_concurrent_streams`` (1024): RPCs in progress on one connection; a client queues
  the ones beyond it.

The server is grpcio's asyncio flavour on an event loop thread of its own (see ``GrpcServer``);
``--grpc_max_threads`` (default 4 x CPUs) sizes the dispatcher's workers for blocking work:
the RPCs other than Predict, and the model runs of versions that neither batch nor run inline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from runtime.errors import InvalidArgumentError
from serving.grpc import inference_service, model_service, prediction_service
from serving.grpc.health import ReadinessHealth
from serving.grpc.inference_service import InferenceService
from serving.grpc.model_service import ModelService, ReloadableCore, ReloadPeers
from serving.grpc.prediction_service import PredictionService
from serving.grpc.rpc import method_handlers
from serving.open_files import open_file_limit
from serving.proto_text import read_proto_text_file
from serving.requests.dispatcher import DEFAULT_MAX_TENSOR_BYTES, Dispatcher, DispatchOptions
from serving.requests.run_site import INLINE_RUN_S

log = logging.getLogger("graphserve")

INT32_MAX = 2**31 - 1
MAX_RECEIVE = "grpc.max_receive_message_length"
MAX_SEND = "grpc.max_send_message_length"
# grpcio lets a second process bind a port already in use (SO_REUSEPORT) and share its traffic;
# a second server on the same port should fail to start instead.
REUSE_PORT = "grpc.so_reuseport"
MAX_CONNECTION_IDLE = "grpc.max_connection_idle_ms"
HANDSHAKE_TIMEOUT = "grpc.server_handshake_timeout_ms"
MAX_CONNECTIONS = "grpc.max_allowed_incoming_connections"
MAX_STREAMS = "grpc.max_concurrent_streams"
DEFAULT_MAX_CONNECTION_IDLE_MS = 5 * 60_000
DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000  # the REST listener's header timeout
DEFAULT_MAX_STREAMS = 1024


@dataclass(frozen=True)
class SslOptions:
    """TensorFlow Serving's ``SSLConfig``: PEM text, and whether clients must present a
    certificate signed by ``custom_ca``."""

    server_key: str
    server_cert: str
    custom_ca: str = ""
    client_verify: bool = False


def ssl_options_from_file(path: str | Path) -> SslOptions:
    """Read a text-format ``SSLConfig`` (``--ssl_config_file``); NotFoundError when it cannot be
    read, InvalidArgumentError when it does not parse."""
    from protos.tensorflow_serving.config import ssl_config_pb2

    proto = read_proto_text_file(path, ssl_config_pb2.SSLConfig(), what="SSL config file")
    return SslOptions(proto.server_key, proto.server_cert, proto.custom_ca, proto.client_verify)


class GrpcFlags(Protocol):
    """The server options ``GrpcOptions.from_server_options`` reads (TensorFlow Serving's
    flag names)."""

    @property
    def port(self) -> int: ...

    @property
    def grpc_socket_path(self) -> str: ...

    @property
    def grpc_max_threads(self) -> int: ...

    @property
    def grpc_channel_arguments(self) -> str: ...

    @property
    def ssl_config_file(self) -> str: ...

    @property
    def use_alts_credentials(self) -> bool: ...

    @property
    def enable_serialization_as_tensor_content(self) -> bool: ...

    @property
    def enable_signature_method_name_check(self) -> bool: ...

    @property
    def max_request_tensor_bytes(self) -> int: ...

    @property
    def enable_model_management_rpc(self) -> bool: ...


@dataclass(frozen=True)
class GrpcOptions:
    port: int = 8500  # TCP port; 0: no TCP listener
    host: str = "0.0.0.0"
    socket_path: str = ""  # UNIX socket, in addition to (or instead of) the port
    max_threads: int = 0  # the dispatcher's worker threads; 0: 4 x CPUs
    channel_arguments: str = ""  # "k=v,k=v", applied after the defaults below
    max_receive_message_length: int = INT32_MAX
    max_send_message_length: int = INT32_MAX
    ssl: SslOptions | None = None
    use_alts_credentials: bool = False
    tensor_content: bool = False  # --enable_serialization_as_tensor_content
    method_name_check: bool = False  # --enable_signature_method_name_check
    max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES  # decoded tensors of one request
    inline_run_s: float = INLINE_RUN_S  # see DispatchOptions
    reflection: bool = True
    model_management: bool = True  # --enable_model_management_rpc
    reuse_port: bool = False  # --workers: every worker listens on the port (SO_REUSEPORT)

    @classmethod
    def from_server_options(cls, options: GrpcFlags) -> GrpcOptions:
        ssl = ssl_options_from_file(options.ssl_config_file) if options.ssl_config_file else None
        return cls(
            port=options.port,
            socket_path=options.grpc_socket_path,
            max_threads=options.grpc_max_threads,
            channel_arguments=options.grpc_channel_arguments,
            ssl=ssl,
            use_alts_credentials=options.use_alts_credentials,
            tensor_content=options.enable_serialization_as_tensor_content,
            method_name_check=options.enable_signature_method_name_check,
            max_tensor_bytes=options.max_request_tensor_bytes,
            model_management=options.enable_model_management_rpc,
        )

    @property
    def threads(self) -> int:
        return self.max_threads if self.max_threads > 0 else 4 * (os.cpu_count() or 1)


def parse_channel_arguments(text: str) -> list[tuple[str, int | str]]:
    """``--grpc_channel_arguments``: comma-separated ``key=value`` pairs; a value that parses
    as a 32-bit int is passed as an int, anything else as a string."""
    arguments: list[tuple[str, int | str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(
                f"Invalid gRPC channel argument {item!r}: expected key=value"
            )
        key, value = key.strip(), value.strip()
        try:
            number = int(value)
        except ValueError:
            arguments.append((key, value))
            continue
        arguments.append((key, number) if -(2**31) <= number < 2**31 else (key, value))
    return arguments


def connection_cap(open_files: int) -> int:
    """gRPC connections allowed under an open-file limit: an eighth of it, at least 16."""
    return max(16, open_files // 8)


def server_arguments(
    options: GrpcOptions, open_files: int | None = None
) -> list[tuple[str, int | str]]:
    """The defaults, overridden by the channel arguments (one value per key); ``open_files``
    (default: ``open_file_limit()``) sizes the connection cap."""
    merged: dict[str, int | str] = {
        MAX_RECEIVE: options.max_receive_message_length,
        MAX_SEND: options.max_send_message_length,
        REUSE_PORT: int(options.reuse_port),
        MAX_CONNECTION_IDLE: DEFAULT_MAX_CONNECTION_IDLE_MS,
        HANDSHAKE_TIMEOUT: DEFAULT_HANDSHAKE_TIMEOUT_MS,
        MAX_CONNECTIONS: connection_cap(open_file_limit() if open_files is None else open_files),
        MAX_STREAMS: DEFAULT_MAX_STREAMS,
    }
    merged.update(parse_channel_arguments(options.channel_arguments))
    return list(merged.items())


def _credentials(options: GrpcOptions) -> grpc.ServerCredentials | None:
    if options.use_alts_credentials:
        if options.ssl is not None:
            raise InvalidArgumentError(
                "Either use_alts_credentials must be false or ssl_config_file must be empty."
            )
        log.info("Using ALTS credentials")
        return grpc.alts_server_credentials()
    if options.ssl is None:
        return None
    log.info("Using SSL credentials")
    ssl = options.ssl
    return grpc.ssl_server_credentials(
        [(ssl.server_key.encode(), ssl.server_cert.encode())],
        root_certificates=ssl.custom_ca.encode() if ssl.custom_ca else None,
        require_client_auth=ssl.client_verify,
    )


class GrpcCore(ReloadableCore, Protocol):
    """What the gRPC services need from ``ServerCore``."""

    def readiness(self) -> list[str]: ...

    def draining(self) -> bool: ...


def _listen(
    server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None
) -> None:
    try:
        if credentials is None:
            server.add_insecure_port(address)
        else:
            server.add_secure_port(address, credentials)
    except RuntimeError as err:
        raise InvalidArgumentError(
            f"Failed to BuildAndStart gRPC server: cannot listen on {address}: {err}"
        ) from err


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where there is one (the REST server's loop too): grpcio's asyncio path spends
    much of its per-call time in the loop's own scheduling, which uvloop does in C."""
    try:
        import uvloop
    except ImportError:  # not on every platform
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class GrpcServer:
    """The gRPC server, serving from an event loop on a thread of its own.

    Handlers are coroutines on that one thread: a Predict waiting for its batch holds no
    thread, and the per-request cost is grpcio's asyncio path with no thread hand-offs. Blocking
    work (the other RPCs, model runs of versions that do not batch) goes to the dispatcher's
    ``--grpc_max_threads`` workers. ``stop(grace)`` is grpcio's: it returns an event that is set
    once the server has stopped.
    """

    def __init__(
        self, core: GrpcCore, options: GrpcOptions, reload_peers: ReloadPeers | None = None
    ) -> None:
        if not options.port and not options.socket_path:
            raise InvalidArgumentError(
                "At least one of server_options.grpc_port or server_options.grpc_socket_path "
                "must be set."
            )
        self._credentials = _credentials(options)
        self._core = core
        self._options = options
        self._reload_peers = reload_peers
        self.dispatcher = Dispatcher(
            core,
            DispatchOptions(
                threads=options.threads,
                max_tensor_bytes=options.max_tensor_bytes,
                method_name_check=options.method_name_check,
                thread_name_prefix="grpc",
                inline_run_s=options.inline_run_s,
            ),
        )
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="grpc-loop", daemon=True)
        self._server: grpc.aio.Server | None = None
        self._health: ReadinessHealth | None = None
        self._stop_lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()  # the loop has ended and closed

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()
            # Queued work is dropped (each dropped run releases its version); runs in progress
            # were stopped with their callers.
            self.dispatcher.close()
            self._stopped.set()

    def start(self) -> None:
        """Listen and serve; raises InvalidArgumentError for an address that cannot be bound
        (nothing is left running then)."""
        self._thread.start()
        try:
            self._server, self._health = asyncio.run_coroutine_threadsafe(
                self._start(), self._loop
            ).result()
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            raise
        # Once nothing else can fail.
        self._core.monitor.add_listener(self._health.on_state_change)

    async def _start(self) -> tuple[grpc.aio.Server, ReadinessHealth]:
        options, core = self._options, self._core
        server = grpc.aio.server(options=server_arguments(options))
        # First: the v2 ServerReady answers what health answers.
        health_servicer = ReadinessHealth(core.readiness, core.draining)
        predictions = PredictionService(self.dispatcher, options.tensor_content)
        for service, rpcs in (
            (prediction_service.SERVICE_NAME, predictions.rpcs()),
            (
                model_service.SERVICE_NAME,
                ModelService(
                    core,
                    reload_enabled=options.model_management,
                    reload_peers=self._reload_peers,
                ).rpcs(),
            ),
            (
                inference_service.SERVICE_NAME,
                InferenceService(self.dispatcher, health_servicer.ready).rpcs(),
            ),
        ):
            handlers = method_handlers(rpcs, self.dispatcher, service)
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(service, handlers),)
            )
            # Registered methods are matched in gRPC's core, without a Python lookup per call.
            server.add_registered_method_handlers(service, handlers)
        await health_servicer.start()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        if options.reflection:
            names = (
                prediction_service.SERVICE_NAME,
                model_service.SERVICE_NAME,
                inference_service.SERVICE_NAME,
                health.SERVICE_NAME,
                reflection.SERVICE_NAME,
            )
            reflection.enable_server_reflection(names, server)
        if options.port:
            _listen(server, f"{options.host}:{options.port}", self._credentials)
        if options.socket_path:
            _listen(server, f"unix:{options.socket_path}", self._credentials)
        await server.start()
        return server, health_servicer

    def refresh_health(self) -> None:
        """Have health checks and watchers hear a readiness change now (e.g. the drain)."""
        if self._health is not None:
            self._health.on_state_change()

    def stop(self, grace: float | None) -> threading.Event:
        """Stop accepting calls, let those in flight finish for up to ``grace`` seconds (None:
        no wait), cancel the rest; the event is set once everything has stopped."""
        with self._stop_lock:
            if self._stopping or not self._thread.is_alive():
                if self._thread.ident is None:  # never started
                    self.dispatcher.close()
                    self._stopped.set()
                return self._stopped
            self._stopping = True
        server, health_servicer = self._server, self._health
        assert server is not None and health_servicer is not None  # else the loop has ended

        async def stop_then_end() -> None:
            try:
                # Health checks and watchers hear NOT_SERVING while calls in flight finish.
                await health_servicer.enter_graceful_shutdown()
                await server.stop(grace)
            finally:
                self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop_then_end(), self._loop)
        return self._stopped


def start_grpc_server(
    core: GrpcCore, options: GrpcOptions, reload_peers: ReloadPeers | None = None
) -> GrpcServer:
    """Build and start the server; stop it with ``server.stop(grace)`` (an event to wait on).
    Raises InvalidArgumentError for bad options or an address that cannot be bound."""
    server = GrpcServer(core, options, reload_peers)
    server.start()
    if options.port:
        log.info("Running gRPC ModelServer at %s:%d ...", options.host, options.port)
    if options.socket_path:
        log.info("Running gRPC ModelServer at UNIX socket %s ...", options.socket_path)
    return server
