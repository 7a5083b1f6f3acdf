"""``tensorflow.serving.ModelService``: model status, and replacing the model list at run time.

``HandleReloadConfigRequest`` follows TensorFlow Serving (``model_service_impl.cc``,
``ServerCore::ReloadConfig``): only a ``model_config_list`` is accepted; the new list replaces
the old one (models left out are unloaded); then the call waits until every model that was not
configured before has a version that became AVAILABLE or failed (END) since the reload, and
fails with UNKNOWN ``N model(s) did not become available: {...}`` if one failed. Models already
configured are not waited for. The outcome is the RPC's status and, on success, ``status`` in
the response. Each counter named in ``metric_names`` (by monitoring path,
``/tensorflow/cc/saved_model/load_attempt_count``, or exposed name) is reported with its
increase across the reload, summed over its labels; a name that is not a counter reports 0, as
upstream.

The wait has no limit of its own (as upstream); it ends when the caller's deadline passes or
the caller goes away.

With ``--workers``, the worker that takes the RPC applies it, then has every other worker apply
it (``reload_peers``) and answers once all have: the status is the first failure, and the
metric increases are summed over the workers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from protos.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2,
)
from runtime.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    OpError,
    PermissionDeniedError,
    UnknownError,
)
from serving.config import ModelConfig
from serving.core.state_monitor import ServableStateMonitor
from serving.grpc.rpc import Rpc
from serving.metrics.catalog import METRICS
from serving.requests import proto_convert as convert
from serving.requests.call_context import CallContext
from serving.requests.status import get_model_status
from serving.servable import ManagerState, ServableManager, ServableState

log = logging.getLogger("graphserve")

# From the descriptor, which importing registers for reflection.
SERVICE_NAME = model_service_pb2.DESCRIPTOR.services_by_name["ModelService"].full_name
_FINISHED = (ManagerState.AVAILABLE, ManagerState.END)


class ReloadableCore(ServableManager, Protocol):
    """What the model service needs from ``ServerCore``."""

    monitor: ServableStateMonitor

    def reload_config(self, configs: Sequence[ModelConfig]) -> None: ...

    def configs(self) -> Mapping[str, ModelConfig]: ...


# (the request, the caller's time left) -> each metric's increase summed over the other workers;
# raises the first OpError a worker answered.
ReloadPeers = Callable[
    [model_management_pb2.ReloadConfigRequest, float | None], dict[str, int]
]


class ModelService:
    def __init__(
        self,
        core: ReloadableCore,
        *,
        base_dir: Path | None = None,
        poll_s: float = 0.5,
        reload_enabled: bool = True,
        reload_peers: ReloadPeers | None = None,
    ) -> None:
        self.core = core
        self.reload_peers = reload_peers
        self.reload_enabled = reload_enabled  # --enable_model_management_rpc
        self.base_dir = base_dir  # relative base paths resolve here; None: the working dir
        self.poll_s = poll_s  # how often a waiting reload checks that its caller still waits

    def rpcs(self) -> dict[str, Rpc]:
        return {
            "GetModelStatus": Rpc(get_model_status_pb2.GetModelStatusRequest, self.get_status),
            "HandleReloadConfigRequest": Rpc(
                model_management_pb2.ReloadConfigRequest, self.reload_config
            ),
        }

    def get_status(
        self, request: get_model_status_pb2.GetModelStatusRequest, call: CallContext
    ) -> get_model_status_pb2.GetModelStatusResponse:
        response: get_model_status_pb2.GetModelStatusResponse = convert.status_response(
            get_model_status(self.core, convert.status_request(request))
        )
        return response

    def reload_config(
        self, request: model_management_pb2.ReloadConfigRequest, call: CallContext
    ) -> model_management_pb2.ReloadConfigResponse:
        try:
            increases = self.reload_here(request, call)
            if self.reload_peers is not None:
                for name, increase in self.reload_peers(request, call.time_remaining()).items():
                    increases[name] = increases.get(name, 0) + increase
        except OpError as err:
            log.error("ReloadConfig failed: %s", err.message)
            raise
        response = model_management_pb2.ReloadConfigResponse()
        response.status.SetInParent()  # OK, present as upstream sets it
        for name in request.metric_names:
            response.metric.add(name=name, int64_value_increase=increases[name])
        return response

    def reload_here(
        self, request: model_management_pb2.ReloadConfigRequest, call: CallContext
    ) -> dict[str, int]:
        """Apply the reload to this process's core and wait as the RPC does; each named
        metric's increase meanwhile. Raises OpError."""
        names = list(request.metric_names)
        before = METRICS.counter_totals(names)
        self._reload(request, call)
        after = METRICS.counter_totals(names)
        return {name: after[name] - before[name] for name in names}

    def _reload(self, request: model_management_pb2.ReloadConfigRequest, call: CallContext) -> None:
        if not self.reload_enabled:
            raise PermissionDeniedError(
                "HandleReloadConfigRequest is disabled on this server "
                "(--enable_model_management_rpc=false)"
            )
        if request.config.WhichOneof("config") != "model_config_list":
            raise InvalidArgumentError(
                "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
                "ModelConfigList is currently supported"
            )
        configs = convert.model_configs(request.config, self.base_dir or Path.cwd())
        for index, config in enumerate(configs):
            log.info("Config entry %d: name %s, base path %s", index, config.name,
                     config.base_path)
        known = self.core.configs()
        new_models = [c.name for c in configs if c.name not in known]
        # States published before the reload do not count: a model configured again may still
        # show the END of the versions it had last time.
        before = {name: self.core.monitor.states(name) for name in new_models}
        self.core.reload_config(configs)
        self._wait_for(new_models, before, call)

    def _wait_for(
        self,
        names: list[str],
        before: dict[str, list[ServableState]],
        call: CallContext,
    ) -> None:
        reached: dict[str, ServableState] = {}

        def all_finished(monitor: ServableStateMonitor) -> bool:
            for name in names:
                if name not in reached:
                    state = _first_finished(monitor.states(name), before[name])
                    if state is not None:
                        reached[name] = state
            return len(reached) == len(names)

        while not self.core.monitor.wait_for(all_finished, self.poll_s):
            if not call.is_active():
                remaining = call.time_remaining()
                if remaining is not None and remaining <= 0:
                    raise DeadlineExceededError(
                        f"Deadline exceeded waiting for models to load: "
                        f"{', '.join(n for n in names if n not in reached)}"
                    )
                raise CancelledError("The reload request was cancelled while models loaded")
        failed = [s for s in reached.values() if s.state is not ManagerState.AVAILABLE]
        if failed:
            parts = "".join(
                f"{{{s.id}"
                + (f" due to error: {s.error.status_text()}" if s.error is not None else "")
                + "}, "
                for s in failed
            )
            raise UnknownError(f"{len(failed)} model(s) did not become available: {{{parts}}}")


def _first_finished(
    states: list[ServableState], before: list[ServableState]
) -> ServableState | None:
    """The lowest version published since ``before`` that is AVAILABLE or END (upstream's
    ``HasAnyServableInStreamReachedState`` on a fresh monitor)."""
    old = {id(s) for s in before}
    fresh = [s for s in states if id(s) not in old and s.state in _FINISHED]
    return min(fresh, key=lambda s: s.id.version) if fresh else None
