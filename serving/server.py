"""Builds the server from its options and runs it until SIGTERM/SIGINT.

Start-up: read and check the model config (an invalid one ends the process with exit status
255, as in TensorFlow Serving) and hand it to the ServerCore. As TensorFlow Serving, the ports
open once the first config's models have loaded, and a failed initial load ends the process
(``initial_load.py``); with ``--wait_for_initial_models=false`` they open at once and
``/readyz`` and gRPC health say when the models are in. gRPC serves on ``--port`` (and/or
``--grpc_socket_path``) and REST on ``--rest_api_port``, each from an event loop on a thread of
its own; the main thread keeps the stop signals (``shutdown.py``).

The drain, on the first SIGTERM/SIGINT: readiness turns false at once (``/readyz`` 503, gRPC
health NOT_SERVING) and loads in progress are abandoned; the listeners keep accepting for
``--drain_delay_seconds``, then both stop accepting and finish their requests in flight side by
side within ``--drain_grace_seconds``; then the models are unloaded and the process exits 0. A
second signal exits at once.

With ``--workers`` above 1 this runs in each worker process (``serving.workers``): its listeners
share their ports with the other workers', its versions' weights come from the shared store, and
a reload or a scrape reaches the other workers through ``WorkerLink``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import intra_op
from runtime.errors import InvalidArgumentError, OpError
from runtime.kernels.compiled import compiled_loops
from serving.config import ServerOptions, model_configs
from serving.core.config_watcher import ConfigFileWatcher
from serving.core.initial_load import initial_load
from serving.core.server_core import CoreOptions, ServerCore
from serving.memory import configure_allocator
from serving.metrics.setup import observe_requests, rest_metrics
from serving.open_files import raise_open_file_limit
from serving.parallelism import intra_op_threads
from serving.shutdown import ShutdownSignals
from serving.workers.link import WorkerLink, labels_when_ready, reloaded_configs
from serving.workers.role import WorkerRole

if TYPE_CHECKING:
    from serving.grpc.server import GrpcServer
    from serving.rest.app import RestApp
    from serving.rest.http_server import HttpServer

log = logging.getLogger("graphserve")

EXIT_START_FAILED = 255  # tensorflow_model_server returns -1
# Beyond the grace period, how long unloading may take before the process gives up on it.
_STOPPED_WAIT_S = 2.0


def build_core(
    options: ServerOptions, role: WorkerRole | None = None
) -> tuple[ServerCore, ConfigFileWatcher | None]:
    """The core with the initial config applied, and the config file's watcher (not started).
    Raises OpError for an invalid command line or config; nothing is left running then. A
    worker (``role``) maps weights from the shared store and starts from the model list a
    ReloadConfig last set, if one has."""
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
    core_options = CoreOptions.from_server_options(options)
    reloaded = None
    if role is not None:
        reloaded = reloaded_configs(role)
        configs = reloaded or configs
        core_options = dataclasses.replace(core_options, weight_store=role.weights_dir)
    core = ServerCore(core_options)
    try:
        if role is not None and reloaded:
            # The other workers serve these labels already; this one applies them once its
            # versions are in, as the reload that set them could.
            core.reload_config([dataclasses.replace(c, version_labels={}) for c in configs])
            labels_when_ready(role, core, configs)
        else:
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


def _start_failed(err: OpError) -> int:
    message = f"Failed to start server. Error: {err.status_text()}"
    log.error("%s", message)
    print(message, flush=True)
    return EXIT_START_FAILED


def _wait_for_initial_models(core: ServerCore, signals: ShutdownSignals) -> OpError | None:
    """Block until the initial config's models have loaded (None), one failed (its error), or a
    stop was asked for (None)."""
    configs = list(core.configs().values())
    log.info("Waiting for the models of the initial config to load: %s",
             ", ".join(c.name for c in configs) or "(none)")
    while not signals.requested:
        outcome = initial_load(configs, core.version_states)
        if outcome.finished:
            return outcome.error() if outcome.failed else None
        core.monitor.wait_for(lambda _: initial_load(configs, core.version_states).finished, 0.2)
    return None


def _start_rest(
    core: ServerCore, options: ServerOptions, link: WorkerLink | None
) -> tuple[RestApp, HttpServer]:
    from serving.rest.app import RestOptions, create_app
    from serving.rest.http_server import HttpLimits, HttpServer

    # OpError: before anything runs
    metrics_path, scrape = rest_metrics(
        core, options, link.peer_snapshots if link is not None else None
    )
    app = create_app(
        core,
        RestOptions(
            num_threads=options.rest_threads,
            timeout_in_ms=options.rest_api_timeout_in_ms,
            enable_cors=options.rest_api_enable_cors_support,
            signature_method_name_check=options.enable_signature_method_name_check,
            max_body_bytes=options.rest_api_max_body_bytes,
            max_tensor_bytes=options.max_request_tensor_bytes,
            metrics_path=metrics_path,
        ),
        readiness=core.readiness,
        draining=core.draining,
        scrape=scrape,
    )
    try:
        server = HttpServer(
            app,
            options.rest_api_host,
            options.rest_api_port,
            HttpLimits.from_server_options(options),
            options.drain_grace_seconds,
            reuse_port=link is not None,
        )
        log.info(
            "Exporting HTTP/REST API at:%s:%d ...", options.rest_api_host, options.rest_api_port
        )
        server.start()
    except BaseException:
        app.close()
        raise
    return app, server


def _check_listener_options(core: ServerCore, options: ServerOptions) -> None:
    """Raise OpError for listener options that cannot work (an SSL or monitoring config that
    does not parse, an invalid limit) before the initial load is waited for."""
    from serving.grpc.server import GrpcOptions
    from serving.rest.http_server import HttpLimits

    if options.port or options.grpc_socket_path:
        GrpcOptions.from_server_options(options)
    if options.rest_api_port and options.rest_api_port != options.port:
        HttpLimits.from_server_options(options)
        rest_metrics(core, options)


def _open_listeners(
    core: ServerCore, options: ServerOptions, link: WorkerLink | None
) -> tuple[GrpcServer | None, tuple[RestApp, HttpServer] | None]:
    """Start gRPC and REST as the options ask; raises OpError, leaving neither running."""
    grpc_server: GrpcServer | None = None
    if options.port or options.grpc_socket_path:
        from serving.grpc.server import GrpcOptions, start_grpc_server

        grpc_options = GrpcOptions.from_server_options(options)
        if link is not None:
            grpc_options = dataclasses.replace(grpc_options, reuse_port=True)
        grpc_server = start_grpc_server(
            core, grpc_options, link.reload_peers if link is not None else None
        )
    try:
        if options.rest_api_port == 0:
            log.warning("REST API disabled (--rest_api_port=0); no API is being served")
            return grpc_server, None
        if options.rest_api_port == options.port:
            log.error(
                "server_options.http_port cannot be same as grpc_port. Please use a different "
                "port for HTTP/REST API. Skipped exporting HTTP/REST API."
            )
            return grpc_server, None
        return grpc_server, _start_rest(core, options, link)
    except BaseException:
        if grpc_server is not None:
            grpc_server.stop(None).wait()
        raise


def serve(options: ServerOptions) -> int:
    """Run the server, or one worker of ``--workers`` (``serving.workers.supervisor`` runs
    them); returns the process exit status."""
    if options.workers < 1:
        return _start_failed(
            InvalidArgumentError(f"--workers must be 1 or more; was {options.workers}")
        )
    role = WorkerRole.from_env()
    if role is not None and role.index > 0:
        # A Unix socket path cannot be shared: the first worker serves it.
        options = dataclasses.replace(options, grpc_socket_path="")
    configure_allocator()  # first: malloc settings apply to what is allocated after them
    raise_open_file_limit()  # before either listener sizes its connection cap from it
    signals = ShutdownSignals()
    signals.install()  # before the initial load, which a stop must be able to end
    observe_requests(options)
    try:
        intra_op.set_threads(intra_op_threads(options))
        loops = compiled_loops()
        log.info("Compiled loops in use: %s", ", ".join(loops) if loops else
                 "none (built without a C compiler, or the CPU lacks AVX2 and FMA): numpy only")
        core, watcher = build_core(options, role)
    except OpError as err:
        return _start_failed(err)
    link = WorkerLink(role, core) if role is not None else None
    if link is not None:
        link.start()
    grpc_server: GrpcServer | None = None
    rest: tuple[RestApp, HttpServer] | None = None
    try:
        _check_listener_options(core, options)
        if options.wait_for_initial_models:
            failure = _wait_for_initial_models(core, signals)
            if failure is not None:
                raise failure
        if not signals.requested:
            grpc_server, rest = _open_listeners(core, options, link)
            if link is not None:
                link.mark_ready()
    except OpError as err:
        if watcher is not None:
            watcher.close()
        core.close()
        if link is not None:
            link.close()
        return _start_failed(err)
    if watcher is not None:
        watcher.start()
    while not signals.wait(0.5):
        if rest is not None and rest[1].stopped.is_set():
            log.error("The REST listener ended unexpectedly; shutting down")
            break
    _stop(core, watcher, grpc_server, rest, options)
    if link is not None:
        link.close()
    return 0


def _stop(
    core: ServerCore,
    watcher: ConfigFileWatcher | None,
    grpc_server: GrpcServer | None,
    rest: tuple[RestApp, HttpServer] | None,
    options: ServerOptions,
) -> None:
    """The drain (see the module doc); a second signal ends the process meanwhile."""
    core.begin_shutdown()  # first: readiness turns false before anything else can wait
    if grpc_server is not None:
        grpc_server.refresh_health()
    if watcher is not None:
        watcher.close()
    if options.drain_delay_seconds > 0 and (grpc_server is not None or rest is not None):
        log.info("Not ready; still accepting for %gs", options.drain_delay_seconds)
        time.sleep(options.drain_delay_seconds)
    grace = max(options.drain_grace_seconds, 0.0)
    stopped = []
    if rest is not None:
        stopped.append(rest[1].stop())
    if grpc_server is not None:
        stopped.append(grpc_server.stop(grace))
    deadline = time.monotonic() + grace + _STOPPED_WAIT_S
    for event in stopped:
        if not event.wait(max(deadline - time.monotonic(), 0.0)):
            log.warning("A listener did not stop within the grace period")
    if rest is not None:
        rest[0].close()
    core.close()
