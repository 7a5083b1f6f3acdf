"""Server options and model configuration (TensorFlow Serving's flags and ModelServerConfig).

``ServerOptions`` holds the flags the server acts on, under TensorFlow Serving's names and with
its defaults. ``model_configs`` turns them into the list of models to serve: the text-format
``--model_config_file`` when given, else the single model of ``--model_name`` /
``--model_base_path``. Relative base paths resolve against the current directory (TensorFlow
Serving rejects them; accepting them keeps checked-in configs portable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import InvalidArgumentError, UnimplementedError
from serving.proto_text import parse_proto_text, read_proto_text_file

if TYPE_CHECKING:
    from protos.tensorflow_serving.config.model_server_config_pb2 import ModelServerConfig

TENSORFLOW_PLATFORM = "tensorflow"


@dataclass(frozen=True)
class LatestVersions:
    num_versions: int = 1


@dataclass(frozen=True)
class AllVersions:
    pass


@dataclass(frozen=True)
class SpecificVersions:
    versions: tuple[int, ...]


VersionPolicy = LatestVersions | AllVersions | SpecificVersions


@dataclass(frozen=True)
class ModelConfig:
    name: str
    base_path: Path
    version_policy: VersionPolicy = LatestVersions()
    version_labels: Mapping[str, int] = field(default_factory=dict)
    # A base path on object storage (s3://, gs://, az://) as given; the server mirrors it into
    # a local directory and sets ``base_path`` to that (serving.core.remote_mirror).
    remote: str = ""


def _model_config(
    name: str,
    base_path: str,
    base_dir: Path,
    version_policy: VersionPolicy = LatestVersions(),
    version_labels: Mapping[str, int] | None = None,
) -> ModelConfig:
    """A local base path resolves against ``base_dir``; an object-storage URL is kept as is."""
    from serving.object_storage import scheme_of

    labels = dict(version_labels or {})
    if scheme_of(base_path) is not None:
        return ModelConfig(name, Path(), version_policy, labels, remote=base_path)
    return ModelConfig(name, (base_dir / base_path).absolute(), version_policy, labels)


@dataclass(frozen=True)
class ServerOptions:
    port: int = 8500
    grpc_socket_path: str = ""
    # Workers for blocking gRPC work (Predict itself runs on the asyncio loop); 0: 4 x CPUs.
    grpc_max_threads: int = 0
    grpc_channel_arguments: str = ""
    ssl_config_file: str = ""
    use_alts_credentials: bool = False
    enable_serialization_as_tensor_content: bool = False
    rest_api_port: int = 0
    rest_api_host: str = "0.0.0.0"
    rest_api_num_threads: int = 0  # 0: 4 x CPUs, as TensorFlow Serving
    rest_api_timeout_in_ms: int = 30000
    rest_api_enable_cors_support: bool = False
    # Beyond TensorFlow Serving: per-connection limits of the REST listener. A request head
    # (request line and header lines) larger than this many bytes is answered 431.
    rest_api_max_header_bytes: int = 65536
    # Beyond TensorFlow Serving: a request head with more header fields is answered 431.
    rest_api_max_headers: int = 100
    # Beyond TensorFlow Serving: a request head must be complete this long after its first
    # byte, else 408 and the connection closes.
    rest_api_header_timeout_in_ms: int = 10_000
    # Beyond TensorFlow Serving: a request body must be complete this long after its head,
    # else 408 and the connection closes.
    rest_api_body_timeout_in_ms: int = 60_000
    # Beyond TensorFlow Serving: a connection with no request in progress (new, or kept alive
    # after a response) closes after this long; longer than the 60 s idle timeout common in
    # load balancers, so they close idle connections first.
    rest_api_idle_timeout_in_ms: int = 75_000
    # Beyond TensorFlow Serving: open REST connections beyond this are answered 503 and closed;
    # 0: the open-file limit (raised to its hard limit at start) less a reserve for the rest.
    rest_api_max_connections: int = 0
    # Beyond TensorFlow Serving: a REST body larger than this (as sent, or once inflated from
    # gzip) is answered 413 before it is buffered; TensorFlow Serving's cap on inflated bodies.
    rest_api_max_body_bytes: int = 100 << 20
    # Beyond TensorFlow Serving: the tensors one request decodes to, in all (a short value list
    # repeats to fill its shape, so a small message can ask for much); beyond it
    # RESOURCE_EXHAUSTED. The default is the largest message a request could send.
    max_request_tensor_bytes: int = 2**31 - 1
    model_name: str = "default"
    model_base_path: str = ""
    model_config_file: str = ""
    model_config_file_poll_wait_seconds: int = 0
    file_system_poll_wait_seconds: int = 1
    # Beyond TensorFlow Serving: how long a new version directory must stay unchanged before
    # it is loaded, so a directory still being copied is never loaded half-written.
    file_system_settle_seconds: float = 0.5
    # Beyond TensorFlow Serving: react to file-system events at once (polling stays on).
    file_system_watch: bool = True
    # Loads run on a worker per model (each model's in order, models side by side); this caps
    # how many run at once (0: one), and a load running 10 s stops counting against the cap,
    # so a hung load never holds the others back for good.
    num_load_threads: int = 0
    # Beyond TensorFlow Serving: worker processes answering on the same ports under one
    # supervisor, each version's weights mapped once for all (serving/workers); 1: one process.
    workers: int = 1
    # Threads one kernel of a run may use (serving/parallelism.py); 0: automatic.
    tensorflow_session_parallelism: int = 0
    tensorflow_intra_op_parallelism: int = 0
    tensorflow_inter_op_parallelism: int = 0
    max_num_load_retries: int = 5
    load_retry_interval_micros: int = 60_000_000
    enable_model_warmup: bool = True
    num_request_iterations_for_warmup: int = 0
    enable_batching: bool = False
    batching_parameters_file: str = ""
    enable_per_model_batching_parameters: bool = False
    saved_model_tags: str = "serve"
    allow_version_labels_for_unavailable_models: bool = False
    enable_signature_method_name_check: bool = False
    # Beyond TensorFlow Serving: false turns HandleReloadConfigRequest off (PERMISSION_DENIED,
    # nothing changes), for a server whose model list only its config file may change.
    enable_model_management_rpc: bool = True
    # As TensorFlow Serving, the ports open once the first config's models have loaded, and a
    # failed initial load ends the process (255). Beyond it: false opens them at once, with
    # /readyz and gRPC health saying when the models are in.
    wait_for_initial_models: bool = True
    # Beyond TensorFlow Serving: the drain on SIGTERM/SIGINT. Readiness turns false at once; the
    # listeners keep accepting for the delay (endpoint propagation in Kubernetes), then REST
    # and gRPC finish their requests in flight within the grace period, side by side.
    drain_delay_seconds: float = 0.0
    drain_grace_seconds: float = 20.0
    # TensorFlow Lite models are not served: a version holding only model.tflite fails its load
    # with an error saying so (with or without the flag); one holding a SavedModel serves it.
    prefer_tflite_model: bool = False
    # Beyond TensorFlow Serving: the server's logs (serving.logs). --log_level is the lowest
    # level written (debug|info|warning|error); --log_format is text (TensorFlow Serving-like
    # lines) or json (one object per line, for log collectors).
    log_level: str = "info"
    log_format: str = "text"
    # Monitoring (serving.metrics): a text-format MonitoringConfig; with
    # prometheus_config { enable: true } and REST on, metrics are served at its path.
    monitoring_config_file: str = ""
    # Beyond TensorFlow Serving: one line per REST and gRPC request on logger
    # graphserve.access (method, path or RPC, status, latency, bytes; never headers or bodies).
    enable_access_log: bool = False

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.saved_model_tags.split(",") if t.strip())

    @property
    def rest_threads(self) -> int:
        return self.rest_api_num_threads or 4 * (os.cpu_count() or 1)


def _policy(config: object) -> VersionPolicy:
    policy = config.model_version_policy  # type: ignore[attr-defined]
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return AllVersions()
    if choice == "specific":
        return SpecificVersions(tuple(policy.specific.versions))
    if choice == "latest":
        return LatestVersions(max(policy.latest.num_versions, 1))
    return LatestVersions()


def parse_model_server_config(text: str, base_dir: Path) -> list[ModelConfig]:
    """Models of a text-format ModelServerConfig; raises InvalidArgumentError when invalid."""
    from protos.tensorflow_serving.config import model_server_config_pb2

    proto = model_server_config_pb2.ModelServerConfig()
    return models_from_proto(parse_proto_text(text, proto), base_dir)


def models_from_proto(proto: ModelServerConfig, base_dir: Path) -> list[ModelConfig]:
    """Models of a ModelServerConfig message; raises InvalidArgumentError when invalid."""
    if proto.WhichOneof("config") == "custom_model_config":
        raise UnimplementedError("ModelServer does not yet support custom model config.")
    models: list[ModelConfig] = []
    seen: set[str] = set()
    for config in proto.model_config_list.config:
        if config.name in seen:
            raise InvalidArgumentError(
                f"Illegal to list model {config.name} multiple times in config list"
            )
        seen.add(config.name)
        if config.model_platform and config.model_type:
            raise InvalidArgumentError(
                "Illegal setting both model_type (deprecated) and model_platform."
            )
        platform = config.model_platform or TENSORFLOW_PLATFORM
        if platform != TENSORFLOW_PLATFORM:
            raise InvalidArgumentError(
                f"Model {config.name} has model_platform {platform!r}; "
                f"only {TENSORFLOW_PLATFORM!r} is served"
            )
        if not config.base_path:
            raise InvalidArgumentError(f"Model {config.name} has no base_path")
        models.append(
            _model_config(
                config.name,
                config.base_path,
                base_dir,
                version_policy=_policy(config),
                version_labels=dict(config.version_labels),
            )
        )
    return models


def model_configs(options: ServerOptions, cwd: Path | None = None) -> list[ModelConfig]:
    base_dir = cwd or Path.cwd()
    if options.model_config_file:
        from protos.tensorflow_serving.config import model_server_config_pb2

        # Named as given (relative to the current directory) unless ``cwd`` says otherwise, so
        # errors name the file as tensorflow_model_server does.
        path = Path(options.model_config_file) if cwd is None else cwd / options.model_config_file
        proto = read_proto_text_file(
            path,
            model_server_config_pb2.ModelServerConfig(),
            what="model config file",
        )
        return models_from_proto(proto, base_dir)
    if not options.model_base_path:
        raise InvalidArgumentError(
            "Both server_options.model_base_path and server_options.model_config_file are empty!"
        )
    return [_model_config(options.model_name, options.model_base_path, base_dir)]
