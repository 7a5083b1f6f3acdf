"""The Prometheus endpoint and the access log on the real daemon, over REST and gRPC."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO

METRICS_PATH = "/custom/metrics"
SECRET = 123.456  # a request value that must never reach the logs
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    config = tmp_path_factory.mktemp("monitoring") / "monitoring.config"
    config.write_text(f'prometheus_config {{ enable: true path: "{METRICS_PATH}" }}\n')
    process = ServerProcess(
        [
            "--model_name=half_plus_two", f"--model_base_path={HALF_PLUS_TWO}",
            f"--monitoring_config_file={config}", "--enable_access_log", "--enable_batching",
        ],
        ["half_plus_two"],
    )
    yield process
    process.stop()


def scrape(server: ServerProcess) -> tuple[str, Samples]:
    response = server.client.get(METRICS_PATH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain"
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return response.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def grpc_predict(server: ServerProcess, model: str, x: float) -> grpc.StatusCode:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["x"].CopyFrom(make_tensor_proto(np.array([x], dtype=np.float32)))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            stub.Predict(request, timeout=60)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


COUNT = ":tensorflow:serving:request_count_total"
LATENCY_COUNT = ":tensorflow:serving:request_latency_count"


def test_request_counts_and_latency_per_model_and_status(server: ServerProcess) -> None:
    _, before = scrape(server)
    body = {"instances": [SECRET]}
    for _ in range(3):
        assert server.client.post("/v1/models/half_plus_two:predict", json=body).status_code == 200
    for _ in range(2):
        assert server.client.post("/v1/models/nope:predict", json=body).status_code == 404
    assert server.client.get("/v1/models/half_plus_two").status_code == 200
    assert grpc_predict(server, "half_plus_two", SECRET) == grpc.StatusCode.OK
    assert grpc_predict(server, "half_plus_two", 1.0) == grpc.StatusCode.OK
    assert grpc_predict(server, "nope", 1.0) == grpc.StatusCode.NOT_FOUND
    _, after = scrape(server)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta(COUNT, model_name="half_plus_two", status="OK") == 3 + 1 + 2
    assert delta(COUNT, model_name="nope", status="NOT_FOUND") == 2 + 1
    assert delta(LATENCY_COUNT, model_name="half_plus_two", API="predict", entrypoint="REST") == 3
    assert delta(LATENCY_COUNT, model_name="half_plus_two", API="", entrypoint="REST") == 1
    assert delta(LATENCY_COUNT, model_name="half_plus_two", API="Predict", entrypoint="GRPC") == 2
    assert delta(LATENCY_COUNT, model_name="nope", API="predict", entrypoint="REST") == 0
    # Buckets are cumulative and end with the count.
    inf = value(after, ":tensorflow:serving:request_latency_bucket", model_name="half_plus_two",
                API="Predict", entrypoint="GRPC", le="+Inf")
    assert inf == value(after, LATENCY_COUNT, model_name="half_plus_two", API="Predict",
                        entrypoint="GRPC")


RUNTIME_COUNT = ":tensorflow:serving:runtime_latency_count"


def test_runtime_latency_per_api(server: ServerProcess) -> None:
    # Every successful run, by the API that ran it: Predict (batched here: the batching
    # session's run, the wait included, as upstream), Classify, Regress, MultiInference.
    _, before = scrape(server)
    for _ in range(2):
        assert server.client.post("/v1/models/half_plus_two:predict",
                                  json={"instances": [1.0]}).status_code == 200
    assert grpc_predict(server, "half_plus_two", 1.0) == grpc.StatusCode.OK
    assert grpc_predict(server, "nope", 1.0) == grpc.StatusCode.NOT_FOUND
    examples = {"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}]}
    assert server.client.post("/v1/models/half_plus_two:classify",
                              json=examples).status_code == 200
    examples = {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]}
    assert server.client.post("/v1/models/half_plus_two:regress",
                              json=examples).status_code == 200
    _, after = scrape(server)

    def delta(api: str) -> float:
        labels = {"model_name": "half_plus_two", "API": api, "runtime": "TF1"}
        return value(after, RUNTIME_COUNT, **labels) - value(before, RUNTIME_COUNT, **labels)

    assert (delta("Predict"), delta("Classify"), delta("Regress")) == (3, 1, 1)
    assert value(after, RUNTIME_COUNT, model_name="nope", API="Predict", runtime="TF1") == 0


def test_batching_histograms_under_load(server: ServerProcess) -> None:
    def one(i: int) -> int:
        body = {"instances": [float(i)]}
        return server.client.post("/v1/models/half_plus_two:predict", json=body).status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(one, range(64))) == {200}
    text, samples = scrape(server)
    assert "# TYPE :tensorflow:serving:batching_session:queuing_latency histogram" in text
    runs = value(samples, ":tensorflow:serving:batching_session:wrapped_run_count_total")
    assert runs >= 1
    assert value(samples, ":tensorflow:serving:batching_session:input_batch_size_count") == runs
    assert value(samples, ":tensorflow:serving:batching_session:processed_batch_size_count") >= 1
    assert value(samples, ":tensorflow:serving:batching_session:queuing_latency_count",
                 thread_pool_name="batch_threads") >= 64


def test_load_metrics_and_our_gauges(server: ServerProcess) -> None:
    text, samples = scrape(server)
    path = str(next(p for p in HALF_PLUS_TWO.iterdir() if p.name.isdigit()))
    assert value(samples, ":tensorflow:cc:saved_model:load_attempt_count_total",
                 model_path=path, status="success") == 1
    assert value(samples, ":tensorflow:cc:saved_model:load_latency_total", model_path=path) > 0
    assert value(samples, "graphserve_model_version_state", model_name="half_plus_two",
                 version=Path(path).name.lstrip("0"), state="AVAILABLE") == 1
    assert "# TYPE graphserve_batch_queue_depth gauge" in text
    assert "# TYPE graphserve_requests_in_flight gauge" in text
    assert value(samples, "process_resident_memory_bytes") > 0
    assert "_total{" not in text.split("# HELP")[0]  # upstream's counters keep their names


def test_access_log_lines_without_payloads(server: ServerProcess) -> None:
    server.client.post("/v1/models/half_plus_two:predict", json={"instances": [SECRET]})
    grpc_predict(server, "half_plus_two", SECRET)
    output = server.output()
    lines = [line for line in output.splitlines() if "graphserve.access" in line]
    assert any("REST POST /v1/models/half_plus_two:predict 200 OK" in line for line in lines)
    assert any("GRPC /tensorflow.serving.PredictionService/Predict OK" in line for line in lines)
    assert str(SECRET) not in output


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_scrape(server: ServerProcess) -> None:
    text, _ = scrape(server)
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    # Lint findings (no HELP text upstream, counters without _total) are style, not errors.
    assert "error while linting" not in result.stderr + result.stdout, result.stderr


def test_no_endpoint_without_monitoring_config() -> None:
    process = ServerProcess(
        ["--model_name=half_plus_two", f"--model_base_path={HALF_PLUS_TWO}"], ["half_plus_two"]
    )
    try:
        assert process.client.get("/monitoring/prometheus/metrics").status_code == 404
        assert "graphserve.access" not in process.output()
    finally:
        process.stop()
