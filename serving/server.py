"""Builds the server from its options and runs it until SIGTERM/SIGINT.

Start-up: read and check the model config (an invalid one ends the process with exit status
255, as in TensorFlow Serving), hand it to the ServerCore, and open the transports at once;
models load in the background and ``/readyz`` (and gRPC health) report when every one has a
version AVAILABLE (TensorFlow Serving instead blocks start-up until then). gRPC serves on
``--port`` (and/or ``--grpc_socket_path``) from its own thread pool; REST runs on uvicorn in the
main thread. On SIGTERM/SIGINT both stop accepting and finish the requests in flight, then the
models are unloaded.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

from runtime.errors import InvalidArgumentError, OpError
from serving.config import ServerOptions, model_configs
from serving.core.config_watcher import ConfigFileWatcher
from serving.core.server_core import CoreOptions, ServerCore
from serving.memory import configure_allocator
from serving.open_files import raise_open_file_limit

log = logging.getLogger("graphserve")

EXIT_START_FAILED = 255  # tensorflow_model_server returns -1
GRACE_S = 30  # how long requests in flight may take to finish at shutdown


def build_core(options: ServerOptions) -> tuple[ServerCore, ConfigFileWatcher | None]:
    """The core with the initial config applied, and the config file's watcher (not started).
    Raises OpError for an invalid command line or config; nothing is left running then."""
    if options.batching_parameters_file and not options.enable_batching:
        raise InvalidArgumentError(
            "--batching_parameters_file is set but --enable_batching is not"
        )
    if not options.model_config_file:
        log.info(
            "Building single TensorFlow model file config:  model_name: %s model_base_path: %s",
            options.model_name, options.model_base_path,
        )
    configs = model_configs(options)
    core = ServerCore(CoreOptions.from_server_options(options))
    try:
        core.reload_config(configs)
    except BaseException:
        core.close()
        raise
    watcher = None
    if options.model_config_file and options.model_config_file_poll_wait_seconds > 0:
        path = Path.cwd() / options.model_config_file
        watcher = ConfigFileWatcher(
            path, core.reload_config, options.model_config_file_poll_wait_seconds
        )
        watcher.mark_applied(path.read_text())
    return core, watcher


def _wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def _serve_rest(core: ServerCore, options: ServerOptions) -> int:
    from serving.rest.app import RestOptions, create_app
    from serving.rest.http_server import HttpLimits, serve_http

    app = create_app(
        core,
        RestOptions(
            num_threads=options.rest_threads,
            timeout_in_ms=options.rest_api_timeout_in_ms,
            enable_cors=options.rest_api_enable_cors_support,
            signature_method_name_check=options.enable_signature_method_name_check,
            max_body_bytes=options.rest_api_max_body_bytes,
            max_tensor_bytes=options.max_request_tensor_bytes,
        ),
        readiness=core.readiness,
    )
    try:
        limits = HttpLimits.from_server_options(options)
        log.info(
            "Exporting HTTP/REST API at:%s:%d ...", options.rest_api_host, options.rest_api_port
        )
        return serve_http(app, options.rest_api_host, options.rest_api_port, limits, GRACE_S)
    except OpError as err:
        message = f"Failed to start server. Error: {err.status_text()}"
        log.error("%s", message)
        print(message, flush=True)
        return EXIT_START_FAILED
    finally:
        app.close()


def serve(options: ServerOptions) -> int:
    """Run the server; returns the process exit status."""
    configure_allocator()  # first: malloc settings apply to what is allocated after them
    raise_open_file_limit()  # before either listener sizes its connection cap from it
    try:
        core, watcher = build_core(options)
    except OpError as err:
        message = f"Failed to start server. Error: {err.status_text()}"
        log.error("%s", message)
        print(message, flush=True)
        return EXIT_START_FAILED
    grpc_server = None
    try:
        if options.port or options.grpc_socket_path:
            from serving.grpc.server import GrpcOptions, start_grpc_server

            grpc_server = start_grpc_server(core, GrpcOptions.from_server_options(options))
    except OpError as err:
        message = f"Failed to start server. Error: {err.status_text()}"
        log.error("%s", message)
        print(message, flush=True)
        core.close()
        return EXIT_START_FAILED
    if watcher is not None:
        watcher.start()
    try:
        if options.rest_api_port == 0:
            log.warning("REST API disabled (--rest_api_port=0); no API is being served")
            _wait_for_signal()
            return 0
        if options.rest_api_port == options.port:
            log.error(
                "server_options.http_port cannot be same as grpc_port. Please use a different "
                "port for HTTP/REST API. Skipped exporting HTTP/REST API."
            )
            _wait_for_signal()
            return 0
        return _serve_rest(core, options)
    finally:
        if watcher is not None:
            watcher.close()
        if grpc_server is not None:
            grpc_server.stop(GRACE_S).wait()
        core.close()
