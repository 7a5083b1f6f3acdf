"""``grpc.health.v1.Health`` following the core's readiness.

The server answers as soon as it is up, while models still load; health says when it can
predict. The overall status (""), ``tensorflow.serving.PredictionService`` and
``inference.GRPCInferenceService`` are SERVING once every configured model has an AVAILABLE
version, NOT_SERVING before (and if readiness cannot be determined, and from the drain on).
``tensorflow.serving.ModelService`` answers status and reload requests without any model, so
it is SERVING while the server runs. TensorFlow Serving registers the short names
``PredictionService`` and ``ModelService``; they are kept as aliases.

Statuses are recomputed after servable state changes (for ``Watch``) and on every ``Check``
and ``Watch`` call (a config reload can change readiness without a state change). The servicer
lives on the server's event loop; a state change, published on one of the manager's threads,
only asks the loop to recompute (coalescing bursts), so those threads never wait on a client.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2

from serving.grpc.inference_service import SERVICE_NAME as INFERENCE_SERVICE
from serving.grpc.model_service import SERVICE_NAME as MODEL_SERVICE
from serving.grpc.prediction_service import SERVICE_NAME as PREDICTION_SERVICE

log = logging.getLogger("graphserve")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

Readiness = Callable[[], list[str]]  # configured models without an AVAILABLE version
Context = grpc.aio.ServicerContext[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]

_FOLLOW_READINESS = (
    health.OVERALL_HEALTH, PREDICTION_SERVICE, "PredictionService", INFERENCE_SERVICE
)
_ALWAYS_SERVING = (MODEL_SERVICE, "ModelService")


class ReadinessHealth(health.aio.HealthServicer):
    """Create it on the server's event loop (``start`` sets the first statuses)."""

    def __init__(self, readiness: Readiness, draining: Callable[[], bool] = lambda: False) -> None:
        super().__init__()
        self._readiness = readiness
        self._draining = draining  # true from the first stop signal: NOT_SERVING
        self._loop = asyncio.get_running_loop()
        self._status: int | None = None
        self._refresh_lock = asyncio.Lock()  # publishing can wait for a watcher's write
        self._pending_lock = threading.Lock()
        self._pending = False
        # Set on shutdown: a refresh scheduled then could outlive the loop, unawaited.
        self._closing = False

    async def start(self) -> None:
        for service in _ALWAYS_SERVING:
            await self.set(service, SERVING)
        await self.refresh()

    def ready(self) -> bool:
        try:
            return not self._draining() and not self._readiness()
        except Exception:  # a failing readiness check means not ready, loudly
            log.exception("Readiness check failed")
            return False

    def on_state_change(self, *_: object) -> None:
        """The servable state listener (any thread): schedule a refresh; never blocks."""
        with self._pending_lock:
            if self._pending or self._closing:
                return
            self._pending = True
        try:
            self._loop.call_soon_threadsafe(self._refresh_pending)
        except RuntimeError:  # the loop has closed: the server is gone
            pass

    def _refresh_pending(self) -> None:
        with self._pending_lock:
            self._pending = False  # a change after this point schedules another refresh
            if self._closing:
                return
        self._loop.create_task(self.refresh())

    async def enter_graceful_shutdown(self) -> None:
        with self._pending_lock:
            self._closing = True
        await super().enter_graceful_shutdown()

    async def refresh(self) -> None:
        """Recompute the readiness-following statuses; watchers hear only of changes."""
        async with self._refresh_lock:  # keeps concurrent refreshes from publishing out of order
            status = SERVING if self.ready() else NOT_SERVING
            if status != self._status:
                self._status = status
                for service in _FOLLOW_READINESS:
                    await self.set(service, status)

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: Context
    ) -> health_pb2.HealthCheckResponse:
        await self.refresh()
        return await super().Check(request, context)

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Context) -> None:
        await self.refresh()
        await super().Watch(request, context)
