"""C load generators for the serving benchmark, run as subprocesses, and their output parsed.

- ``wrk_closed``: REST, closed loop. wrk with a Lua script that POSTs a fixed JSON body and, when
  done, prints its own summary as one JSON line (requests, errors by kind, latency percentiles in
  µs from wrk's histogram), so nothing depends on wrk's text layout.
- ``h2load_grpc``: gRPC, closed loop. h2load POSTs a pre-framed ``PredictRequest`` (1 byte 0,
  4-byte big-endian length, message) with gRPC's headers; per-request latencies come from its
  ``--log-file``. A gRPC error is still HTTP 200 (the status is in the trailers, which h2load does
  not read), but it carries no message: the DATA bytes received, compared with the framed
  response's size times the answers, count the answers that had no response message.
- ``h2load_open``: REST, open loop at a fixed offered rate (the latency-vs-load sweep): many
  HTTP/1.1 connections, each sending at ``--rps`` its share of the rate, their start times
  staggered with ``-r/--rate-period`` so the arrivals are spread evenly over time instead of
  coming as one burst per tick.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

WRK = "/usr/bin/wrk"
H2LOAD = "/usr/bin/h2load"
GRPC_PATH = "/tensorflow.serving.PredictionService/Predict"
V2_GRPC_PATH = "/inference.GRPCInferenceService/ModelInfer"
GRPC_HEADERS = ("content-type: application/grpc", "te: trailers")
JSON_HEADER = "content-type: application/json"
GRPC_STREAMS_PER_CONNECTION = 8
REQUEST_TIMEOUT_S = 10

_WRK_SCRIPT = """\
local body_file = assert(io.open("{body}", "rb"))
wrk.method = "POST"
wrk.body = body_file:read("*a")
body_file:close()
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\nWRK_JSON {{"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {{"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}, ' ..
    '"latency_us": {{"min": %d, "mean": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, ' ..
    '"p999": %d}}}}\\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.max, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9)))
end
"""


@dataclass
class LoadResult:
    """One timed run. ``completed``: answers inside the window (errors included); ``ok``: the
    good ones; ``errors``: by kind; latencies in µs over the completed requests."""

    tool: str
    command: list[str]
    seconds: float
    completed: int = 0
    ok: int = 0
    rps: float = 0.0
    p50_us: float = math.nan
    p90_us: float = math.nan
    p99_us: float = math.nan
    max_us: float = math.nan
    errors: dict[str, int] = field(default_factory=dict)
    failed: str | None = None  # the tool itself failed: no numbers
    extra: dict[str, Any] = field(default_factory=dict)

    def error_count(self) -> int:
        return sum(self.errors.values())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def write_wrk_script(body_file: Path, script: Path) -> Path:
    script.write_text(_WRK_SCRIPT.format(body=str(body_file).replace('"', '\\"')))
    return script


def wrk_threads(concurrency: int) -> int:
    return 1 if concurrency < 8 else 2


def wrk_closed(url: str, script: Path, concurrency: int, seconds: float) -> LoadResult:
    duration = max(1, round(seconds))  # wrk takes whole seconds
    command = [WRK, f"-t{wrk_threads(concurrency)}", f"-c{concurrency}", f"-d{duration}s",
               f"--timeout={REQUEST_TIMEOUT_S}s", "--latency", "-s", str(script), url]
    result = LoadResult("wrk", command, float(duration))
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True,
                              timeout=duration + 60)
    except subprocess.TimeoutExpired:
        result.failed = f"wrk ran past {duration + 60} s"
        return result
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        result.failed = (done.stderr.strip() or done.stdout.strip() or
                         f"wrk exited {done.returncode}").splitlines()[-1]
        return result
    summary = json.loads(line[len("WRK_JSON "):])
    latency = summary["latency_us"]
    errors = {k: v for k, v in summary["errors"].items() if v}
    result.seconds = summary["duration_us"] / 1e6
    result.completed = summary["requests"]
    # wrk counts non-2xx/3xx answers in "status"; socket errors are not answers.
    result.ok = summary["requests"] - summary["errors"]["status"]
    result.rps = result.ok / result.seconds if result.seconds else 0.0
    result.p50_us, result.p90_us, result.p99_us = latency["p50"], latency["p90"], latency["p99"]
    result.max_us = latency["max"]
    result.errors = {f"http_{k}" if k == "status" else k: v for k, v in errors.items()}
    result.extra = {"latency_us": latency, "bytes": summary["bytes"]}
    return result


def grpc_frame(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


def grpc_connections(concurrency: int) -> tuple[int, int]:
    """(connections, streams per connection): one connection up to 8 callers (a channel's
    usual use), then 8 streams on each of ceil(c / 8) connections."""
    if concurrency <= GRPC_STREAMS_PER_CONNECTION:
        return 1, concurrency
    clients = math.ceil(concurrency / GRPC_STREAMS_PER_CONNECTION)
    return clients, math.ceil(concurrency / clients)


_H2_REQUESTS = re.compile(
    r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
    r"(\d+) errored, (\d+) timeout")
_H2_STATUS = re.compile(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx")
_H2_TRAFFIC = re.compile(r"traffic: .*\((\d+)\) total, .*\((\d+)\) headers .*\((\d+)\) data")
_H2_FINISHED = re.compile(r"finished in ([\d.]+)(m?s)")


def _parse_h2load(result: LoadResult, stdout: str) -> dict[str, int] | None:
    requests = _H2_REQUESTS.search(stdout)
    status = _H2_STATUS.search(stdout)
    traffic = _H2_TRAFFIC.search(stdout)
    if not (requests and status and traffic):
        result.failed = (stdout.strip().splitlines() or ["no h2load summary"])[-1]
        return None
    _total, started, done, ok, failed, errored, timeout = map(int, requests.groups())
    s2, s3, s4, s5 = map(int, status.groups())
    result.completed = done
    errors = {"failed": failed, "errored": errored, "timeout": timeout,
              "http_3xx": s3, "http_4xx": s4, "http_5xx": s5}
    result.errors = {k: v for k, v in errors.items() if v}
    return {"started": started, "done": done, "succeeded": ok, "status_2xx": s2,
            "data_bytes": int(traffic.group(3)), "header_bytes": int(traffic.group(2))}


def _log_rows(log_file: Path) -> np.ndarray:
    """h2load's log: (start µs since the epoch, HTTP status, µs to the end of the response)."""
    if not log_file.exists() or log_file.stat().st_size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    rows = np.loadtxt(log_file, dtype=np.int64, ndmin=2, usecols=(0, 1, 2))
    return rows


def _percentiles(result: LoadResult, latencies_us: np.ndarray) -> None:
    if latencies_us.size:
        p50, p90, p99 = np.percentile(latencies_us, [50, 90, 99], method="nearest")
        result.p50_us, result.p90_us, result.p99_us = float(p50), float(p90), float(p99)
        result.max_us = float(latencies_us.max())


def h2load_grpc(url: str, framed_request: Path, framed_response_bytes: int, concurrency: int,
                seconds: float, log_file: Path) -> LoadResult:
    clients, streams = grpc_connections(concurrency)
    command = [H2LOAD, f"-c{clients}", f"-m{streams}", f"-D{max(1, round(seconds))}",
               "-d", str(framed_request), f"--log-file={log_file}",
               f"-N{REQUEST_TIMEOUT_S}s"]
    for header in GRPC_HEADERS:
        command += ["-H", header]
    command.append(url)
    result = LoadResult("h2load", command, float(max(1, round(seconds))))
    log_file.unlink(missing_ok=True)
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True,
                              timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        result.failed = f"h2load ran past {seconds + 60:.0f} s"
        return result
    counts = _parse_h2load(result, done.stdout)
    if counts is None:
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            result.failed = lines[-1] if lines else (result.failed or "h2load failed")
        return result
    finished = _H2_FINISHED.search(done.stdout)
    if finished:
        value = float(finished.group(1))
        result.seconds = value / 1e3 if finished.group(2) == "ms" else value
    # Answers without a response message (gRPC errors arrive as HTTP 200 + trailers only).
    without_message = max(0, counts["succeeded"] - counts["data_bytes"] // framed_response_bytes)
    if without_message:
        result.errors["grpc_no_message"] = without_message
    result.ok = counts["succeeded"] - without_message
    result.rps = result.ok / result.seconds if result.seconds else 0.0
    rows = _log_rows(log_file)
    _percentiles(result, rows[:, 2])
    result.extra = {"connections": clients, "streams_per_connection": streams, **counts}
    return result


@dataclass(frozen=True)
class OpenLoopPlan:
    """How h2load spreads ``rate`` requests/s over connections: ``connections`` each at
    ``per_connection_rps``, ``burst`` new connections every ``period_ms``; the connections'
    phases then cover one per-connection interval evenly (to the millisecond)."""

    rate: float
    connections: int
    per_connection_rps: float
    burst: int
    period_ms: int

    @property
    def ramp_s(self) -> float:
        return self.connections / self.burst * self.period_ms / 1e3


def plan_open_loop(rate: float, interval_s: float = 0.1, max_connections: int = 256,
                   max_burst: int = 8) -> OpenLoopPlan:
    """Each connection sends about every ``interval_s`` (well above the latencies measured
    before saturation, so HTTP/1.1's one request in flight per connection rarely delays a
    send); connections open ``burst`` at a time every ``period_ms`` (h2load's granularity is
    1 ms), with burst / period within 5% of rate / 1000 and the burst as small as that allows. The
    planned rate is that fraction's, which may differ a little from ``rate``."""
    candidates = []
    for period_ms in range(1, 101):
        burst = max(1, round(rate * period_ms / 1000))
        if burst <= max_burst or period_ms == 1:
            candidates.append((abs(1000 * burst / period_ms - rate) / rate, burst, period_ms))
    # The smallest burst within 5% of the rate; failing that, the nearest rate.
    near = [c for c in candidates if c[0] <= 0.05]
    _, burst, period_ms = (min(near, key=lambda c: (c[1], c[0])) if near
                           else min(candidates))
    true_rate = 1000 * burst / period_ms
    connections = int(min(max_connections, max(4, round(true_rate * interval_s))))
    return OpenLoopPlan(true_rate, connections, true_rate / connections, burst, period_ms)


def h2load_open(url: str, body: Path, plan: OpenLoopPlan, seconds: float,
                log_file: Path) -> LoadResult:
    """Offered load ``plan.rate`` for ``seconds`` at full rate (plus the ramp-up). Only requests
    sent inside the full-rate window count: ``extra['sent_rps']`` is the rate actually sent
    there (below the plan when the server cannot keep up: each connection waits for its answer),
    ``rps`` the answers received there."""
    per_connection = math.ceil((seconds + plan.ramp_s) * plan.per_connection_rps) + 1
    total = per_connection * plan.connections
    command = [H2LOAD, "--h1", f"-c{plan.connections}", f"--rps={plan.per_connection_rps:.6f}",
               f"-r{plan.burst}", f"--rate-period={plan.period_ms}ms", f"-n{total}",
               "-d", str(body), "-H", JSON_HEADER, f"--log-file={log_file}", url]
    result = LoadResult("h2load --h1 --rps", command, seconds)
    log_file.unlink(missing_ok=True)
    # Past saturation each connection falls behind and the run lasts longer than planned
    # (h2load stops after a number of requests, not a time, when it staggers connections).
    timeout = 5 * (seconds + plan.ramp_s) + 15
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        result.failed = f"h2load ran past {timeout:.0f} s"
        return result
    if _parse_h2load(result, done.stdout) is None:
        return result
    rows = _log_rows(log_file)
    if rows.size == 0:
        result.failed = "no requests logged"
        return result
    first = int(rows[:, 0].min())
    start = first + int(plan.ramp_s * 1e6)  # every connection is sending from here on
    end = start + int(seconds * 1e6)
    inside = rows[(rows[:, 0] >= start) & (rows[:, 0] < end)]
    good = inside[(inside[:, 1] >= 200) & (inside[:, 1] < 300)]
    ended = rows[:, 0] + rows[:, 2]
    answered = rows[(ended >= start) & (ended < end)]
    result.seconds = seconds
    result.completed = int(answered.shape[0])
    result.ok = int(((answered[:, 1] >= 200) & (answered[:, 1] < 300)).sum())
    result.rps = result.ok / seconds
    _percentiles(result, good[:, 2])
    result.extra = {"offered_rps": plan.rate, "sent_rps": inside.shape[0] / seconds,
                    "plan": asdict(plan), "requests_logged": int(rows.shape[0])}
    return result
