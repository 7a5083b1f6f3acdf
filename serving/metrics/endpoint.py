"""The Prometheus endpoint: ``--monitoring_config_file`` and what a scrape answers.

A scrape is TensorFlow Serving's metrics in upstream's exact text format (``exposition``),
followed by ours in prometheus_client's standard exposition (``# HELP`` lines, counters ending
``_total``): ``graphserve_*`` gauges read at scrape time (batch queue depth, requests in flight,
version states), our counters, and the client's process collector (CPU, RSS, open files). Both
parts parse with ``prometheus_client.parser.text_string_to_metric_families``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from serving.metrics.catalog import METRICS, ServingMetrics
from serving.metrics.exposition import render
from serving.metrics.requests import OBSERVERS
from serving.proto_text import read_proto_text_file

DEFAULT_PATH = "/monitoring/prometheus/metrics"
CONTENT_TYPE = "text/plain"
VERSION_STATES = ("START", "LOADING", "AVAILABLE", "UNLOADING", "END")

# (model, version, state name) of every version the server knows
VersionStates = Callable[[], Iterable[tuple[str, int, str]]]
# batch queue name ("model/version/signature") -> tasks waiting
QueueDepths = Callable[[], Mapping[str, int]]


def _no_versions() -> list[tuple[str, int, str]]:
    return []


def _no_queues() -> dict[str, int]:
    return {}


@dataclass(frozen=True)
class MonitoringOptions:
    path: str = ""  # the endpoint's HTTP path; "" = no endpoint


def read_monitoring_config(path: str | Path) -> MonitoringOptions:
    """A text-format ``MonitoringConfig``; NotFoundError when it cannot be read,
    InvalidArgumentError when it does not parse."""
    from protos.tensorflow_serving.config import monitoring_config_pb2

    proto = read_proto_text_file(
        path, monitoring_config_pb2.MonitoringConfig(), what="monitoring config file"
    )
    prometheus = proto.prometheus_config
    if not prometheus.enable:
        return MonitoringOptions()
    return MonitoringOptions(prometheus.path or DEFAULT_PATH)


@dataclass
class ScrapeSources:
    """Where the scrape-time gauges come from (the server core and its batch scheduler)."""

    version_states: VersionStates = _no_versions
    queue_depths: QueueDepths = _no_queues
    in_flight: Callable[[], Mapping[str, int]] = OBSERVERS.in_flight
    metrics: ServingMetrics = METRICS
    _registry: CollectorRegistry | None = field(default=None, repr=False)


def model_of_queue(name: str) -> str:
    return name.split("/", 1)[0]


def version_state_samples(
    states: Iterable[tuple[str, int, str]],
) -> list[tuple[tuple[str, str, str], float]]:
    """One sample per (model, version, state): 1 for the version's state, 0 for the others,
    so a version that leaves a state shows 0 there rather than vanishing."""
    samples = []
    for model, version, current in sorted(states):
        for state in VERSION_STATES:
            samples.append(((model, str(version), state), 1.0 if state == current else 0.0))
    return samples


class _OurCollector:
    def __init__(self, sources: ScrapeSources) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        sources, metrics = self._sources, self._sources.metrics
        depth = GaugeMetricFamily(
            "graphserve_batch_queue_depth", "Tasks waiting in batch queues, per model",
            labels=["model_name"],
        )
        per_model: dict[str, int] = {}
        for queue, tasks in sources.queue_depths().items():
            model = model_of_queue(queue)
            per_model[model] = per_model.get(model, 0) + tasks
        for model, tasks in sorted(per_model.items()):
            depth.add_metric([model], tasks)
        yield depth
        in_flight = GaugeMetricFamily(
            "graphserve_requests_in_flight", "Requests being answered, per model",
            labels=["model_name"],
        )
        for model, requests in sorted(sources.in_flight().items()):
            in_flight.add_metric([model], requests)
        yield in_flight
        states = GaugeMetricFamily(
            "graphserve_model_version_state",
            "1 for the state each model version is in, 0 for the others",
            labels=["model_name", "version", "state"],
        )
        for labels, value in version_state_samples(sources.version_states()):
            states.add_metric(list(labels), value)
        yield states
        for counter, help_text in (
            (metrics.load_failures, "Failed loads of a model version, per version directory"),
            (metrics.requests_dropped,
             "Requests answered without being run: deadline, cancelled, queue_full"),
        ):
            family = CounterMetricFamily(counter.path, help_text, labels=list(counter.labels))
            for cell, count in sorted(counter.values().items()):
                family.add_metric(list(cell), count)
            yield family


def scrape(sources: ScrapeSources) -> bytes:
    """The body of a scrape."""
    if sources._registry is None:
        registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=registry)
        registry.register(_OurCollector(sources))
        sources._registry = registry
    ours = generate_latest(sources._registry)
    return render(sources.metrics.tensorflow_families()).encode() + ours
