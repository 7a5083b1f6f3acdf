"""Wiring the metrics into a server: subscribe the request observers; build the scrape.

``observe_requests`` runs once at start-up: the request metrics are always recorded (as
TensorFlow Serving's; ReloadConfig's ``metric_names`` reads them too), the access log only with
``--enable_access_log``. ``rest_metrics`` reads ``--monitoring_config_file`` and gives the
endpoint's path and scrape, or ``("", None)`` when Prometheus is not enabled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from serving.batching.scheduler import SharedBatchScheduler
from serving.metrics.access_log import AccessLog
from serving.metrics.endpoint import ScrapeSources, read_monitoring_config, scrape
from serving.metrics.request_metrics import RequestMetrics
from serving.metrics.requests import OBSERVERS, RequestObservers
from serving.metrics.snapshot import Snapshot, merged, snapshot
from serving.servable import ServableState

_SUBSCRIBED: dict[int, RequestMetrics | AccessLog] = {}


class MetricsFlags(Protocol):
    @property
    def monitoring_config_file(self) -> str: ...

    @property
    def enable_access_log(self) -> bool: ...


class MonitoredCore(Protocol):
    batch_scheduler: SharedBatchScheduler | None

    def model_names(self) -> list[str]: ...

    def version_states(self, name: str) -> list[ServableState]: ...


def observe_requests(options: MetricsFlags, observers: RequestObservers = OBSERVERS) -> None:
    """Subscribe the request metrics, and the access log when asked for (once each)."""
    if id(observers) not in _SUBSCRIBED:
        metrics = RequestMetrics()
        observers.subscribe(metrics)
        _SUBSCRIBED[id(observers)] = metrics
    if options.enable_access_log and -id(observers) not in _SUBSCRIBED:
        access = AccessLog()
        observers.subscribe(access)
        _SUBSCRIBED[-id(observers)] = access


def scrape_sources(core: MonitoredCore) -> ScrapeSources:
    def version_states() -> list[tuple[str, int, str]]:
        return [
            (name, state.id.version, state.state.name)
            for name in core.model_names()
            for state in core.version_states(name)
        ]

    def queue_depths() -> dict[str, int]:
        scheduler = core.batch_scheduler
        return scheduler.queue_depths() if scheduler is not None else {}

    return ScrapeSources(version_states, queue_depths)


def own_snapshot(core: MonitoredCore) -> Snapshot:
    """This process's metrics as plain data, for a worker that sums its peers' (``--workers``)."""
    sources = scrape_sources(core)
    return snapshot(sources.metrics, sources.in_flight(), sources.queue_depths())


def summed_sources(sources: ScrapeSources, peers: Iterable[Snapshot]) -> ScrapeSources:
    """``sources`` with the counters, histograms and request gauges of ``peers`` added; the
    version states stay this process's (every worker runs the same lifecycle)."""
    own = snapshot(sources.metrics, sources.in_flight(), sources.queue_depths())
    total, in_flight, depths = merged([own, *peers])
    return ScrapeSources(sources.version_states, lambda: depths, lambda: in_flight, total)


def rest_metrics(
    core: MonitoredCore,
    options: MetricsFlags,
    peer_snapshots: Callable[[], list[Snapshot]] | None = None,
) -> tuple[str, Callable[[], bytes] | None]:
    """The Prometheus endpoint's (path, scrape); raises OpError for a config that cannot be
    read or parsed. With ``peer_snapshots`` (the other workers' metrics) a scrape answers for
    every worker."""
    if not options.monitoring_config_file:
        return "", None
    monitoring = read_monitoring_config(options.monitoring_config_file)
    if not monitoring.path:
        return "", None
    sources = scrape_sources(core)
    if peer_snapshots is None:
        return monitoring.path, lambda: scrape(sources)
    peers = peer_snapshots
    return monitoring.path, lambda: scrape(summed_sources(sources, peers()))
