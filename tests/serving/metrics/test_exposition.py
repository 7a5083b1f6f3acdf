"""The pure parts: bucket layouts, names, the text format, record routing, the access line."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.errors import CancelledError, DeadlineExceededError, UnavailableError
from serving.batching.scheduler import QUEUE_FULL_MESSAGE
from serving.batching.stats import BATCH_SIZE_BOUNDS, QUEUEING_LATENCY_BOUNDS_US
from serving.metrics import buckets
from serving.metrics.access_log import access_line
from serving.metrics.catalog import ServingMetrics
from serving.metrics.endpoint import read_monitoring_config, version_state_samples
from serving.metrics.exposition import escape_value, label_name, metric_name, render
from serving.metrics.load_metrics import timed_warmup
from serving.metrics.request_metrics import RequestMetrics, counted
from serving.metrics.requests import GRPC, REST, RequestObservers, RequestRecord, drop_reason
from serving.metrics.store import Counter, Histogram


def test_bucket_layouts_are_tensorflow_servings() -> None:
    assert len(buckets.LATENCY_US) == 33
    assert buckets.LATENCY_US[:3] == pytest.approx((10, 18, 32.4))
    assert buckets.LATENCY_US[-1] == pytest.approx(10 * 1.8**32)
    assert buckets.EXAMPLE_COUNTS == tuple(float(2**i) for i in range(15))
    assert buckets.BATCH_SIZES == tuple(float(b) for b in BATCH_SIZE_BOUNDS)
    assert buckets.QUEUING_LATENCY_US == pytest.approx(QUEUEING_LATENCY_BOUNDS_US)
    assert len(buckets.QUEUING_LATENCY_US) == 52


def test_a_value_on_a_bound_falls_in_that_bucket() -> None:
    bounds = buckets.exponential(1, 2, 3)  # 1, 2, 4
    assert [buckets.bucket_index(bounds, v) for v in (0.5, 1, 1.5, 2, 4, 4.1)] == [0, 0, 1, 1, 2, 3]
    assert buckets.cumulative([1, 0, 2, 1]) == [1, 1, 3, 4]
    with pytest.raises(ValueError):
        buckets.exponential(1, 1, 3)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/tensorflow/serving/request_count", ":tensorflow:serving:request_count"),
        ("/tensorflow/cc/saved_model/load_latency", ":tensorflow:cc:saved_model:load_latency"),
        ("9lives/x-y", "_9lives:x:y"),
        ("graphserve_ok", "graphserve_ok"),
    ],
)
def test_metric_names_are_sanitized_as_upstream(path: str, name: str) -> None:
    assert metric_name(path) == name


def test_label_names_and_values() -> None:
    assert label_name("model-name!") == "modelname"
    assert escape_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_render_is_upstreams_format_and_parses_as_counters_and_histograms() -> None:
    count = Counter("/tensorflow/serving/request_count", ("model_name", "status"))
    count.add(("m", "OK"), 3)
    count.add(("m", "NOT_FOUND"))
    latency = Histogram("/tensorflow/serving/request_latency", ("model_name",), (10, 20))
    latency.observe(("m",), 5)
    latency.observe(("m",), 15)
    latency.observe(("m",), 25)
    empty = Counter("/tensorflow/serving/unused")
    text = render([count, latency, empty])
    assert text == (
        "# TYPE :tensorflow:serving:request_count counter\n"
        ':tensorflow:serving:request_count{model_name="m",status="NOT_FOUND"} 1\n'
        ':tensorflow:serving:request_count{model_name="m",status="OK"} 3\n'
        "# TYPE :tensorflow:serving:request_latency histogram\n"
        ':tensorflow:serving:request_latency_bucket{model_name="m",le="10"} 1\n'
        ':tensorflow:serving:request_latency_bucket{model_name="m",le="20"} 2\n'
        ':tensorflow:serving:request_latency_bucket{model_name="m",le="+Inf"} 3\n'
        ':tensorflow:serving:request_latency_sum{model_name="m"} 45\n'
        ':tensorflow:serving:request_latency_count{model_name="m"} 3\n'
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families[":tensorflow:serving:request_count"].type == "counter"
    assert families[":tensorflow:serving:request_latency"].type == "histogram"


def _record(transport: str, api: str, status: str = "OK", target: str = "/v1/models/m:predict",
            dropped: str = "") -> RequestRecord:
    return RequestRecord(transport, api, "m", status, 0.002, 10, 20, "POST", target, 200, dropped)


def test_which_requests_count() -> None:
    assert counted(_record(REST, "predict"))
    assert counted(_record(REST, "", target="/v1/models/m"))
    assert not counted(_record(REST, "", target="/healthz"))
    for rpc in ("Predict", "Classify", "Regress"):
        assert counted(_record(GRPC, rpc))
    for rpc in ("GetModelStatus", "GetModelMetadata", "MultiInference"):
        assert not counted(_record(GRPC, rpc))


def test_request_metrics_count_every_status_and_time_only_successes() -> None:
    metrics = ServingMetrics()
    observer = RequestMetrics(metrics)
    observer.observe(_record(GRPC, "Predict"))
    observer.observe(_record(GRPC, "Predict", "DEADLINE_EXCEEDED", dropped="deadline"))
    observer.observe(_record(REST, "predict"))
    assert metrics.request_count.values() == {("m", "OK"): 2, ("m", "DEADLINE_EXCEEDED"): 1}
    latency = metrics.request_latency.values()
    assert {k: v.count for k, v in latency.items()} == {
        ("m", "Predict", "GRPC"): 1, ("m", "predict", "REST"): 1,
    }
    assert latency[("m", "Predict", "GRPC")].sum == pytest.approx(2000)
    assert metrics.requests_dropped.values() == {("m", "deadline"): 1}
    assert metrics.counter_totals([":tensorflow:serving:request_count", "nope"]) == {
        ":tensorflow:serving:request_count": 3, "nope": 0,
    }


def test_drop_reasons() -> None:
    assert drop_reason(DeadlineExceededError("x")) == "deadline"
    assert drop_reason(CancelledError("x")) == "cancelled"
    assert drop_reason(UnavailableError(f"{QUEUE_FULL_MESSAGE}; more")) == "queue_full"
    assert drop_reason(UnavailableError("not loaded")) == ""
    assert drop_reason(ValueError("x")) == ""


def test_access_line_holds_no_payload() -> None:
    rest = access_line(_record(REST, "predict"))
    assert rest == "REST POST /v1/models/m:predict 200 OK 2.000ms in=10B out=20B model=m"
    grpc_line = access_line(
        RequestRecord(GRPC, "Predict", "m", "OK", 0.001, 5, 6, "",
                      "/tensorflow.serving.PredictionService/Predict", 0)
    )
    assert grpc_line == (
        "GRPC /tensorflow.serving.PredictionService/Predict OK 1.000ms in=5B out=6B model=m"
    )


def test_version_states_are_one_hot() -> None:
    samples = version_state_samples([("m", 2, "AVAILABLE")])
    assert [(labels[2], value) for labels, value in samples] == [
        ("START", 0), ("LOADING", 0), ("AVAILABLE", 1), ("UNLOADING", 0), ("END", 0),
    ]


def test_monitoring_config(tmp_path: Path) -> None:
    path = tmp_path / "monitoring.config"
    path.write_text("prometheus_config { enable: true }\n")
    assert read_monitoring_config(path).path == "/monitoring/prometheus/metrics"
    path.write_text('prometheus_config { enable: true path: "/m" }\n')
    assert read_monitoring_config(path).path == "/m"
    path.write_text('prometheus_config { enable: false path: "/m" }\n')
    assert read_monitoring_config(path).path == ""


def test_requests_in_flight_per_model() -> None:
    observers = RequestObservers()
    assert observers.in_flight() == {}
    for _ in range(3):
        observers.begin("a")
    observers.begin("b")
    observers.end("a")
    observers.end("b")
    assert observers.in_flight() == {"a": 2}
    observers.end("a")
    observers.end("a")
    assert observers.in_flight() == {}


def test_requests_in_flight_from_many_threads() -> None:
    observers = RequestObservers()

    def traffic() -> None:
        for _ in range(2000):
            observers.begin("m")
            observers.end("m")

    threads = [threading.Thread(target=traffic) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert observers.in_flight() == {}


def test_warmups_are_timed_and_their_records_counted() -> None:
    metrics = ServingMetrics()
    path = Path("/models/m/1")
    assert timed_warmup(path, lambda: 6, metrics) == 6

    def failing() -> int:
        raise CancelledError("stopped")

    with pytest.raises(CancelledError):
        timed_warmup(path, failing, metrics)
    assert metrics.model_warmup_records_read.values() == {(str(path), "OK"): 6}
    latencies = metrics.model_warmup_latency.values()
    assert {labels: v.count for labels, v in latencies.items()} == {
        (str(path), "OK"): 1, (str(path), "CANCELLED"): 1
    }
