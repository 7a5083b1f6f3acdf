"""Every metric the server records, named and labelled as TensorFlow Serving names them.

One process-wide ``METRICS``, as TensorFlow's monitoring cells are process-wide: the loader, the
warmup, the batcher and both transports record into it wherever they run; the endpoint reads it.
Latencies are in microseconds, as upstream.
"""

from __future__ import annotations

from serving.metrics import buckets
from serving.metrics.store import Counter, Family, Histogram

SERVING = "/tensorflow/serving"
SAVED_MODEL = "/tensorflow/cc/saved_model"
LOAD_SUCCESS, LOAD_FAIL = "success", "fail"  # TensorFlow's load_attempt_count statuses
BATCH_THREAD_POOL = "batch_threads"  # the shared batch scheduler's threads
RUNTIME = "TF1"  # upstream's runtime label for a Session::Run


class ServingMetrics:
    """TensorFlow Serving's metrics (section 8 of the reference), then ours."""

    def __init__(self) -> None:
        self.request_count = Counter(f"{SERVING}/request_count", ("model_name", "status"))
        self.request_latency = Histogram(
            f"{SERVING}/request_latency", ("model_name", "API", "entrypoint"), buckets.LATENCY_US
        )
        self.runtime_latency = Histogram(
            f"{SERVING}/runtime_latency", ("model_name", "API", "runtime"), buckets.LATENCY_US
        )
        self.request_example_counts = Histogram(
            f"{SERVING}/request_example_counts", ("model",), buckets.EXAMPLE_COUNTS
        )
        self.request_example_count_total = Counter(
            f"{SERVING}/request_example_count_total", ("model",)
        )
        self.model_warmup_latency = Histogram(
            f"{SERVING}/model_warmup_latency", ("model_path", "status"), buckets.LATENCY_US
        )
        self.model_warmup_records_read = Counter(
            f"{SERVING}/model_warmup_records_read", ("model_path", "status")
        )
        batching = f"{SERVING}/batching_session"
        self.queuing_latency = Histogram(
            f"{batching}/queuing_latency", ("thread_pool_name",), buckets.QUEUING_LATENCY_US
        )
        self.wrapped_run_count = Counter(f"{batching}/wrapped_run_count")
        self.input_batch_size = Histogram(f"{batching}/input_batch_size", (), buckets.BATCH_SIZES)
        self.processed_batch_size = Histogram(
            f"{batching}/processed_batch_size", (), buckets.BATCH_SIZES
        )
        self.padding_size = Histogram(
            f"{batching}/padding_size", ("execution_batch_size",), buckets.BATCH_SIZES
        )
        self.load_attempt_count = Counter(
            f"{SAVED_MODEL}/load_attempt_count", ("model_path", "status")
        )
        self.load_latency = Counter(f"{SAVED_MODEL}/load_latency", ("model_path",))
        # Ours (exposed with a graphserve_ prefix by the endpoint).
        self.load_failures = Counter("graphserve_load_failures", ("model_path",))
        self.requests_dropped = Counter("graphserve_requests_dropped", ("model_name", "reason"))

    def tensorflow_families(self) -> list[Family]:
        """Upstream's metrics, in the order the endpoint writes them."""
        return [
            self.request_count, self.request_latency, self.runtime_latency,
            self.request_example_counts, self.request_example_count_total,
            self.model_warmup_latency, self.model_warmup_records_read, self.queuing_latency, self.wrapped_run_count,
            self.input_batch_size, self.processed_batch_size, self.padding_size,
            self.load_attempt_count, self.load_latency,
        ]

    def counter(self, name: str) -> Counter | None:
        """The counter exposed as ``name`` (``:tensorflow:serving:request_count``) or known by
        its monitoring path (``/tensorflow/serving/request_count``), for ReloadConfig's
        ``metric_names``."""
        from serving.metrics.exposition import metric_name

        for family in self.tensorflow_families():
            if isinstance(family, Counter) and name in (family.path, metric_name(family.path)):
                return family
        return None

    def counter_totals(self, names: list[str]) -> dict[str, int]:
        """Each named counter summed over its cells (0 for a name not known, as upstream)."""
        totals = {}
        for name in names:
            counter = self.counter(name)
            totals[name] = int(sum(counter.values().values())) if counter is not None else 0
        return totals


METRICS = ServingMetrics()
