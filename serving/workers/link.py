"""A worker's ties to the others (``--workers``): it answers their control requests and asks
them, so that a reload and a scrape mean the whole server, not one process.

Thin shell over ``peers``: ``WorkerLink`` serves this worker's socket (a scrape's share of the
metrics, a reload applied here) and gives the server what to call on the others
(``reload_peers`` for the ReloadConfig RPC, ``peer_snapshots`` for the metrics endpoint).
"""

from __future__ import annotations

import base64
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import OpError
from serving.config import ModelConfig
from serving.metrics.snapshot import Snapshot
from serving.requests.call_context import CallContext
from serving.workers.peers import Message, PeerServer, PeerUnavailable, ask_all
from serving.workers.role import WorkerRole

if TYPE_CHECKING:
    from protos.tensorflow_serving.apis.model_management_pb2 import ReloadConfigRequest
    from serving.core.server_core import ServerCore

log = logging.getLogger("graphserve")

SCRAPE_TIMEOUT_S = 5.0  # a worker that does not answer a scrape in time is left out of it
_ANSWER_MARGIN_S = 2.0


def reloaded_configs(role: WorkerRole) -> list[ModelConfig] | None:
    """The model list a ReloadConfig last set for the whole server (None: none has), which a
    worker started later serves instead of its command line's."""
    from protos.tensorflow_serving.apis import model_management_pb2
    from serving.requests import proto_convert as convert

    try:
        data = role.reloaded_config.read_bytes()
    except FileNotFoundError:
        return None
    request = model_management_pb2.ReloadConfigRequest()
    request.ParseFromString(data)
    configs: list[ModelConfig] = convert.model_configs(request.config, Path.cwd())
    return configs


def labels_when_ready(role: WorkerRole, core: ServerCore, configs: list[ModelConfig]) -> None:
    """Apply ``configs`` (their version labels) once every model has a version in, on a thread
    of its own, unless a newer reload has replaced them by then; a config with no labels needs
    nothing."""
    if not any(c.version_labels for c in configs):
        return

    def apply() -> None:
        while not core.draining():
            if core.wait_until_ready(1.0):
                if reloaded_configs(role) != configs:
                    return  # a newer reload came meanwhile, labels and all
                try:
                    core.reload_config(configs)
                except OpError as err:
                    log.error("The reloaded version labels could not be applied: %s", err)
                return

    threading.Thread(target=apply, name="worker-labels", daemon=True).start()


class WorkerLink:
    def __init__(self, role: WorkerRole, core: ServerCore) -> None:
        self.role = role
        self._core = core
        self._server: PeerServer | None = None

    def start(self) -> None:
        self._server = PeerServer(
            self.role.socket_path, {"metrics": self._metrics, "reload": self._reload}
        )

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def mark_ready(self) -> None:
        """Tell the supervisor this worker's listeners are open."""
        self.role.ready_file.touch()

    # -- answering the others ---------------------------------------------------------------

    def _metrics(self, request: Message) -> Message:
        from serving.metrics.setup import own_snapshot

        return own_snapshot(self._core)

    def _reload(self, request: Message) -> Message:
        from protos.tensorflow_serving.apis import model_management_pb2
        from serving.grpc.model_service import ModelService

        reload = model_management_pb2.ReloadConfigRequest()
        reload.ParseFromString(base64.b64decode(request["request"]))
        timeout = request.get("timeout_s")
        call = CallContext.with_timeout(None if timeout is None else float(timeout))
        increases = ModelService(self._core).reload_here(reload, call)
        return {"increases": increases}

    # -- asking the others ------------------------------------------------------------------

    def peer_snapshots(self) -> list[Snapshot]:
        replies = ask_all(self.role.peer_sockets(), {"op": "metrics"}, SCRAPE_TIMEOUT_S)
        return [reply for reply in replies if isinstance(reply, dict)]

    def reload_peers(self, request: ReloadConfigRequest, timeout_s: float | None) -> dict[str, int]:
        """Record the reload for workers started later, then apply it on every other worker;
        their metric increases, summed. Raises the first OpError a worker answered."""
        data = request.SerializeToString()
        partial = self.role.reloaded_config.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, self.role.reloaded_config)
        started = time.monotonic()
        replies = ask_all(
            self.role.peer_sockets(),
            {"op": "reload", "request": base64.b64encode(data).decode(), "timeout_s": timeout_s},
            # A peer past the deadline says so itself; waiting a little longer hears it.
            None if timeout_s is None else timeout_s + _ANSWER_MARGIN_S,
        )
        return _summed(replies, time.monotonic() - started)


def _summed(replies: Sequence[Message | BaseException], waited_s: float) -> dict[str, int]:
    totals: dict[str, int] = {}
    for reply in replies:
        if isinstance(reply, OpError):
            raise reply
        if isinstance(reply, PeerUnavailable):
            # It is being replaced, and starts from the recorded config.
            log.warning("ReloadConfig: a worker did not answer (%s) after %.1fs", reply, waited_s)
            continue
        if isinstance(reply, dict):
            for name, increase in reply.get("increases", {}).items():
                totals[name] = totals.get(name, 0) + int(increase)
    return totals
