"""What crosses between workers: metric snapshots that add up exactly, and control requests over
real Unix sockets, errors included."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from runtime.errors import Code, DeadlineExceededError, FailedPreconditionError, OpError
from serving.metrics.catalog import ServingMetrics
from serving.metrics.exposition import render
from serving.metrics.snapshot import merged, snapshot
from serving.workers.peers import Message, PeerServer, PeerUnavailable, ask, ask_all
from serving.workers.supervisor import MAX_RESTART_DELAY_S, restart_delay


def _worker(requests: int, latency_us: float) -> ServingMetrics:
    metrics = ServingMetrics()
    for _ in range(requests):
        metrics.request_count.add(("m", "OK"))
        metrics.request_latency.observe(("m", "predict", "REST"), latency_us)
    metrics.load_failures.add(("/models/m/1",))
    return metrics


def test_snapshots_sum_to_what_one_process_would_count() -> None:
    one, two = _worker(3, 120.0), _worker(5, 90_000.0)
    snapshots = [
        json.loads(json.dumps(snapshot(one, {"m": 1}, {"m/1/serving_default": 2}))),
        json.loads(json.dumps(snapshot(two, {"m": 2}, {})),),
    ]
    total, in_flight, depths = merged(snapshots)
    everything = _worker(0, 0.0)
    everything.load_failures.add(("/models/m/1",))  # twice in all, once per worker
    for _ in range(3):
        everything.request_count.add(("m", "OK"))
        everything.request_latency.observe(("m", "predict", "REST"), 120.0)
    for _ in range(5):
        everything.request_count.add(("m", "OK"))
        everything.request_latency.observe(("m", "predict", "REST"), 90_000.0)
    assert render(total.tensorflow_families()) == render(everything.tensorflow_families())
    assert total.load_failures.values() == {("/models/m/1",): 2}
    assert in_flight == {"m": 3} and depths == {"m/1/serving_default": 2}


def _echo(request: Message) -> Message:
    return {"echo": request["value"]}


def _refuse(request: Message) -> Message:
    raise FailedPreconditionError("not now")


def test_control_requests_and_their_errors_cross_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "worker-0.sock"
    server = PeerServer(path, {"echo": _echo, "refuse": _refuse})
    try:
        assert ask(path, {"op": "echo", "value": [1, "x"]}, 5.0) == {"echo": [1, "x"]}
        with pytest.raises(FailedPreconditionError, match="not now"):
            ask(path, {"op": "refuse"}, 5.0)
        with pytest.raises(OpError) as info:
            ask(path, {"op": "unknown"}, 5.0)
        assert info.value.code is Code.INTERNAL
        missing = tmp_path / "worker-9.sock"
        replies = ask_all([path, missing], {"op": "echo", "value": 7}, 5.0)
        assert replies[0] == {"echo": 7} and isinstance(replies[1], PeerUnavailable)
    finally:
        server.close()
    assert not path.exists()
    with pytest.raises(PeerUnavailable):
        ask(path, {"op": "echo", "value": 1}, 5.0)


def test_a_peer_that_answers_too_late_is_a_deadline(tmp_path: Path) -> None:
    path = tmp_path / "worker-0.sock"
    release = threading.Event()

    def slow(request: Message) -> Message:
        release.wait(10)
        return {}

    server = PeerServer(path, {"slow": slow})
    try:
        with pytest.raises(DeadlineExceededError, match="did not answer within 0.2s"):
            ask(path, {"op": "slow"}, 0.2)
    finally:
        release.set()
        server.close()


def test_a_worker_that_keeps_dying_young_is_replaced_ever_more_slowly() -> None:
    assert [restart_delay(n) for n in range(1, 6)] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert restart_delay(40) == MAX_RESTART_DELAY_S
