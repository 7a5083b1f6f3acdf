"""Workers benchmark: graphserve with ``--workers=1`` beside ``--workers=2`` (and more), its
throughput and latency next to the serving benchmark's ceilings, and the memory the whole
server takes.

    .venv/bin/python bench/workers_bench.py [--quick] [--seconds 5] [--concurrency 64]
        [--transports rest,grpc] [--workers 1,2] [--skip-memory] [--skip-throughput]
        [--memory-models mlp,resnet50] [--json PATH]

Throughput: the small MLP of ``bench/serving_bench.py`` (batch-1 requests, batching off), closed
loop with the serving benchmark's generators and cells (``wrk`` for REST, ``h2load`` for gRPC, a
warm-up run then a timed run per concurrency), for each ``--workers`` value, then the bare ASGI
(uvicorn) and bare grpcio ceiling servers in the same run. graphserve starts as in the serving
benchmark, plus ``--workers=N``; load begins once every worker listens on both ports and
``GET /v1/models/NAME`` says AVAILABLE, and after one answer per transport checked against
TensorFlow's. Each server stops with SIGTERM, and the run waits for it
to exit.

Memory: total PSS (``Pss:`` of ``/proc/PID/smaps_rollup``) over the server process and all its
descendants (the supervisor and its workers; one process with ``--workers=1``), read
``--settle`` seconds after ``--requests`` REST predicts per worker (batch 1, each on a new
connection, so the kernel spreads them over the workers), for the MLP and
``bench/.cache/models/resnet50`` (skipped when absent; ``bench/make_bench_models.py`` builds it).
Each answer's largest |difference| from TensorFlow's recorded outputs is shown beside it.

Prints markdown tables: each worker count's ratio to ``--workers=1`` and to the ceiling of its
transport. ``--json`` keeps every number.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from bench import serving_load as load
from bench.serving_bench import (
    BUILT_MODELS,
    GRAPHSERVE,
    MODELS,
    START_DEADLINE_S,
    TRANSPORTS,
    RunStart,
    Target,
    failed_cell,
    serve_and_measure,
    start_asgi,
    start_grpc_ceiling,
)
from bench.serving_report import SMALL_MODEL, _num, ceiling_for
from bench.serving_servers import Server, ServerFailed, TryAgain, _children, free_port
from bench.serving_workload import (
    Workload,
    _post,
    _rest_outputs,
    load_workload,
    write_request_files,
)
from bench.tensors import max_abs_diff
from tests.serving.workers.support import listening_ports

MEMORY_MODELS: dict[str, Path] = {  # name -> base path (version 1/ and expected.npz inside)
    SMALL_MODEL: MODELS[SMALL_MODEL],
    "resnet50": BUILT_MODELS / "resnet50",
}
ROLLUP_FIELDS = ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Rss")
STATUS_TIMEOUT_S = 10.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 s per cell, 2 predicts per worker, 2 s settle")
    parser.add_argument("--seconds", type=int, help="timed window per cell, whole seconds (5)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up run per cell, s (1)")
    parser.add_argument("--concurrency", default="64", help="closed-loop concurrencies (64)")
    parser.add_argument("--transports", default="rest,grpc",
                        help=f"of {', '.join(TRANSPORTS)} (rest,grpc)")
    parser.add_argument("--workers", default="1,2", help="--workers values to compare (1,2)")
    parser.add_argument("--skip-throughput", action="store_true", help="memory only")
    parser.add_argument("--skip-memory", action="store_true", help="throughput only")
    parser.add_argument("--memory-models", default=",".join(MEMORY_MODELS),
                        help=f"of {', '.join(MEMORY_MODELS)} (all)")
    parser.add_argument("--requests", type=int,
                        help="memory: REST predicts per worker before reading PSS (4)")
    parser.add_argument("--settle", type=float,
                        help="memory: seconds between the last answer and reading PSS (3)")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (2 if args.quick else 5)
    args.requests = args.requests or (2 if args.quick else 4)
    args.settle = args.settle if args.settle is not None else (2.0 if args.quick else 3.0)
    try:
        args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
        args.workers = [int(w) for w in args.workers.split(",") if w]
    except ValueError as err:
        parser.error(str(err))
    if not args.workers or min(args.workers) < 1 or not args.concurrency:
        parser.error("--workers and --concurrency take positive integers")
    args.transports = [t for t in args.transports.split(",") if t]
    args.memory_models = [m for m in args.memory_models.split(",") if m]
    for name, values, allowed in (("transports", args.transports, TRANSPORTS),
                                  ("memory-models", args.memory_models, MEMORY_MODELS)):
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            parser.error(f"unknown {name} {unknown}; known: {', '.join(allowed)}")
    return args


# --- processes ---------------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants, parents first."""
    tree = _children()
    found, stack = [], [pid]
    while stack:
        current = stack.pop(0)
        found.append(current)
        stack.extend(sorted(tree.get(current, [])))
    return found


def workers_listening(supervisor: int, workers: int, ports: set[int]) -> list[int]:
    """The worker pids once ``workers`` of the supervisor's children listen on every one of
    ``ports``; raises TryAgain before."""
    ready: list[int] = []
    for child in _children().get(supervisor, []):
        try:
            if ports <= listening_ports(child):
                ready.append(child)
        except OSError:  # gone meanwhile
            continue
    if len(ready) < workers:
        raise TryAgain(f"{len(ready)} of {workers} workers listening")
    return sorted(ready)


def model_available(port: int, model: str) -> None:
    """Returns once ``GET /v1/models/MODEL`` lists a version AVAILABLE; raises TryAgain before."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=STATUS_TIMEOUT_S)
    try:
        connection.request("GET", f"/v1/models/{model}")
        response = connection.getresponse()
        body = response.read()
    except http.client.HTTPException as err:
        raise TryAgain(str(err)) from err
    finally:
        connection.close()
    if response.status != 200:
        raise TryAgain(f"HTTP {response.status}: {body[:200]!r}")
    states = [v.get("state") for v in json.loads(body).get("model_version_status", [])]
    if "AVAILABLE" not in states:
        raise TryAgain(f"versions {states}")


def start_graphserve(work: Workload, workers: int, scratch: Path, label: str) -> Server:
    """graphserve as the serving benchmark starts it (batching off), with ``--workers``;
    returns once every worker listens and the model is AVAILABLE. Raises ServerFailed (the
    server stopped) when it does not get there."""
    ports = {"grpc": free_port(), "rest": free_port()}
    argv = [str(GRAPHSERVE), f"--port={ports['grpc']}", f"--rest_api_port={ports['rest']}",
            f"--model_name={work.model}", f"--model_base_path={work.base_path}",
            f"--workers={workers}"]
    server = Server(label, argv, ports, scratch, fatal=r"Loading servable: .* failed: .*")
    try:
        if workers > 1:
            server.wait_until(lambda: workers_listening(server.pid, workers, set(ports.values())),
                              START_DEADLINE_S,
                              f"{workers} workers listening")
        server.wait_until(lambda: model_available(ports["rest"], work.model), START_DEADLINE_S,
                          f"{work.model} AVAILABLE")
    except BaseException:
        stop(server, [])
        raise
    return server


def stop(server: Server, notes: list[str], pids: Sequence[int] = ()) -> None:
    """SIGTERM, then wait for the server to exit; notes a non-zero status or a process of its
    tree (``pids``, else the tree found now) still alive afterwards."""
    pids = list(pids) or (process_tree(server.pid) if server.alive() else [server.pid])
    started = time.monotonic()
    server.stop()
    took = time.monotonic() - started
    status = server.process.returncode
    left = [pid for pid in pids[1:] if Path(f"/proc/{pid}").exists()]
    if status != 0 or left:
        notes.append(f"{server.name}: exited with status {status} after SIGTERM in {took:.1f} s"
                     + (f"; still running: {left}" if left else ""))


# --- throughput --------------------------------------------------------------------------------


def graphserve_cells(work: Workload, workers: int, files: dict[str, Path],
                     args: argparse.Namespace, scratch: Path, answers: dict[str, bytes],
                     notes: list[str]) -> list[dict[str, Any]]:
    label = f"graphserve workers={workers}"
    started: list[tuple[Server, list[int]]] = []

    def launch() -> Server:
        server = start_graphserve(work, workers, scratch, label)
        started.append((server, process_tree(server.pid)))
        return server

    try:
        cells = serve_and_measure(launch, label, "off", args.transports, work, files, args,
                                  scratch, answers, notes)
    except ServerFailed as err:
        return [failed_cell(work, Target(None, label, "off", t),  # type: ignore[arg-type]
                            str(err), err.tail) for t in args.transports]
    for server, pids in started:
        stop(server, notes, pids)  # stopped by now: checks how it ended
    return cells


def throughput(args: argparse.Namespace, scratch: Path, notes: list[str]) -> list[dict[str, Any]]:
    base = MODELS[SMALL_MODEL]
    work = load_workload(SMALL_MODEL, base, base / "expected.npz")
    files = write_request_files(work, scratch)
    files["wrk_script"] = load.write_wrk_script(files["rest_body"],
                                                scratch / f"{work.model}.wrk.lua")
    files["wrk_v2_script"] = load.write_wrk_script(files["rest_v2_body"],
                                                   scratch / f"{work.model}.v2.wrk.lua")
    answers: dict[str, bytes] = {}  # graphserve's own answers, for the ceilings to repeat
    cells: list[dict[str, Any]] = []
    for workers in args.workers:
        cells += graphserve_cells(work, workers, files, args, scratch, answers, notes)
    if any(t.startswith("rest") for t in args.transports):
        response = answers.get("rest") or work.fixed_rest_response()
        cells += serve_and_measure(lambda: start_asgi(work, response, scratch), "asgi ceiling",
                                   "-", ["rest"], work, files, args, scratch, {}, notes)
    if any(t.startswith("grpc") for t in args.transports):
        response = answers.get("grpc") or work.fixed_grpc_response()
        cells += serve_and_measure(lambda: start_grpc_ceiling(work, response, scratch),
                                   "grpcio ceiling", "-", ["grpc"], work, files, args, scratch,
                                   {}, notes)
    return cells


# --- memory ------------------------------------------------------------------------------------


@dataclass
class MemorySample:
    model: str
    workers: int
    processes: int = 0
    kib: dict[str, int] = field(default_factory=dict)  # ROLLUP_FIELDS summed over the tree
    requests: int = 0
    max_abs_diff: float = 0.0  # over the answers, from TensorFlow's recorded outputs
    failed: str | None = None
    tail: str = ""


def smaps_rollup_kib(pid: int) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ROLLUP_FIELDS:
            values[key] = int(rest.split()[0])  # "NNN kB"
    return values


def tree_memory(pid: int) -> tuple[int, dict[str, int]]:
    """(processes, ROLLUP_FIELDS summed in KiB) over ``pid`` and its descendants."""
    totals = dict.fromkeys(ROLLUP_FIELDS, 0)
    processes = 0
    for current in process_tree(pid):
        try:
            values = smaps_rollup_kib(current)
        except OSError:  # gone meanwhile
            continue
        processes += 1
        for key, value in values.items():
            totals[key] += value
    return processes, totals


def predict_rest(work: Workload, port: int) -> float:
    """One REST predict on a new connection: the largest |difference| of its outputs from
    TensorFlow's recorded ones (reported, not judged: a convnet's float32 sums may differ past
    the serving benchmark's tolerance for small models). Raises TryAgain while the model loads,
    ValueError for a wrong status or outputs of the wrong shape."""
    answer = json.loads(_post(port, work.rest_path, work.rest_body))
    diff = max_abs_diff(_rest_outputs(answer, work.expected), work.expected)
    if isinstance(diff, float):
        return diff
    raise ValueError(diff)  # what is missing or of the wrong shape


def memory_sample(work: Workload, workers: int, args: argparse.Namespace, scratch: Path,
                  notes: list[str]) -> MemorySample:
    sample = MemorySample(work.model, workers)
    label = f"memory {work.model} workers={workers}"
    try:
        server = start_graphserve(work, workers, scratch, label)
    except ServerFailed as err:
        sample.failed, sample.tail = str(err), err.tail
        return sample
    try:
        port = server.ports["rest"]
        for _ in range(args.requests * workers):
            diff = server.wait_until(lambda: predict_rest(work, port), START_DEADLINE_S,
                                     "rest predict")
            sample.max_abs_diff = max(sample.max_abs_diff, diff)
            sample.requests += 1
        time.sleep(args.settle)
        if not server.alive():
            raise ServerFailed(f"{label}: exited before PSS was read", server.tail())
        sample.processes, sample.kib = tree_memory(server.pid)
        print(f"  {label}: {sample.processes} processes, PSS "
              f"{sample.kib['Pss'] / 1024:,.1f} MiB", file=sys.stderr, flush=True)
    except ServerFailed as err:
        sample.failed, sample.tail = str(err), err.tail
    finally:
        stop(server, notes)
    return sample


def memory(args: argparse.Namespace, scratch: Path, notes: list[str]) -> list[MemorySample]:
    samples: list[MemorySample] = []
    for model in args.memory_models:
        base = MEMORY_MODELS[model]
        if not (base / "1").is_dir() or not (base / "expected.npz").exists():
            notes.append(f"memory {model}: skipped, {base} has no version 1/ and expected.npz "
                         "(bench/make_bench_models.py builds it)")
            continue
        work = load_workload(model, base, base / "expected.npz")
        for workers in args.workers:
            samples.append(memory_sample(work, workers, args, scratch, notes))
    return samples


# --- tables ------------------------------------------------------------------------------------


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A markdown table, padded to width; the first ``left`` columns left-aligned."""
    widths = [max(3, *(len(r[i]) for r in [header, *rows])) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i < left else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    rule = ["-" * (w + 2) if i < left else "-" * (w + 1) + ":" for i, w in enumerate(widths)]
    return "\n".join([line(header), "|" + "|".join(rule) + "|", *map(line, rows)])


def _ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.2f}x" if num is not None and den else "-"


def _workers_of(cell: dict[str, Any]) -> int | None:
    prefix = "graphserve workers="
    server = str(cell["server"])
    return int(server[len(prefix):]) if server.startswith(prefix) else None


def throughput_table(cells: list[dict[str, Any]], base_workers: int) -> str:
    header = ["server", "transport", "conc", "req/s", "p50 ms", "p99 ms", "CPU us/req",
              f"req/s / w={base_workers}", f"p99 / w={base_workers}", "req/s / ceiling",
              "errors"]
    rows: list[list[str]] = []
    footnotes: list[str] = []
    failures = 0
    order = {t: i for i, t in enumerate(TRANSPORTS)}
    family = {"asgi ceiling": "rest", "grpcio ceiling": "grpc"}

    def key(cell: dict[str, Any]) -> tuple[int, str, int]:
        transport = cell["transport"]
        conc = cell["concurrency"] if isinstance(cell["concurrency"], int) else -1
        return (order.get(transport, 99), transport, conc)

    for cell in sorted(cells, key=key):
        label = [cell["server"], cell["transport"], str(cell["concurrency"])]
        if "failed" in cell:
            failures += 1
            footnotes.append(f"[{failures}] {cell['server']} {cell['transport']}: "
                             f"{cell['failed']}")
            footnotes += ["      " + x for x in cell.get("tail", "").splitlines()]
            rows.append([*label, "FAIL", "", "", "", "", "", "", f"see [{failures}]"])
            continue
        base = None
        if _workers_of(cell) is not None:
            base = next((c for c in cells if _workers_of(c) == base_workers and "rps" in c
                         and c["transport"] == cell["transport"]
                         and c["concurrency"] == cell["concurrency"]), None)
        ceiling = None if cell["server"] in family else ceiling_for(cells, cell)
        errors = ", ".join(f"{k} {v}" for k, v in cell["errors"].items())
        rows.append([*label, _num(cell["rps"]), _num(cell["p50_ms"], 2), _num(cell["p99_ms"], 2),
                     _num(cell["cpu_us_per_req"]),
                     _ratio(cell["rps"], base["rps"]) if base else "-",
                     _ratio(cell["p99_ms"], base["p99_ms"]) if base else "-",
                     _ratio(cell["rps"], ceiling["rps"]) if ceiling else "-",
                     errors or "0"])
    return "\n".join([markdown(header, rows, left=2), *(["", *footnotes] if footnotes else [])])


def _mib(kib: dict[str, int], name: str) -> str:
    return _num(kib[name] / 1024, 1) if name in kib else "-"


def memory_table(samples: list[MemorySample], base_workers: int) -> str:
    header = ["model", "workers", "processes", "PSS MiB", "anon MiB", "file MiB", "shmem MiB",
              "RSS MiB", f"PSS / w={base_workers}", "max abs diff"]
    rows: list[list[str]] = []
    footnotes: list[str] = []
    failures = 0
    for sample in samples:
        label = [sample.model, str(sample.workers)]
        if sample.failed:
            failures += 1
            footnotes.append(f"[{failures}] {sample.failed}")
            footnotes += ["      " + x for x in sample.tail.splitlines()]
            rows.append([*label, "FAIL", "", "", "", "", "", "", f"see [{failures}]"])
            continue
        base = next((s for s in samples if s.model == sample.model
                     and s.workers == base_workers and not s.failed), None)
        sizes = [_mib(sample.kib, name) for name in ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem",
                                                      "Rss")]
        rows.append([*label, str(sample.processes), *sizes,
                     _ratio(sample.kib["Pss"], base.kib["Pss"]) if base else "-",
                     f"{sample.max_abs_diff:.1e}"])
    return "\n".join([markdown(header, rows, left=1), *(["", *footnotes] if footnotes else [])])


# --- main --------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # unwinds through every ``finally`` that stops a server


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    run = RunStart.announce("Workers benchmark")
    cpus = run.cpus
    if not args.skip_throughput and not (shutil.which(load.WRK) and shutil.which(load.H2LOAD)):
        print("wrk and h2load are needed (Debian packages wrk, nghttp2-client)", file=sys.stderr)
        return 2
    base_workers = 1 if 1 in args.workers else args.workers[0]
    notes: list[str] = []
    cells: list[dict[str, Any]] = []
    samples: list[MemorySample] = []
    with tempfile.TemporaryDirectory(prefix="workers-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        if not args.skip_throughput:
            cells = throughput(args, scratch, notes)
        if not args.skip_memory:
            samples = memory(args, scratch, notes)
    load_after = os.getloadavg()

    if cells:
        print()
        print(f"Throughput: {SMALL_MODEL}, batch-1 predicts, batching off, closed loop "
              f"({args.warmup} s warm-up + {args.seconds} s per cell; wrk for REST, h2load for "
              f"gRPC, sharing the {cpus} CPUs with the server); ceilings: bare uvicorn ASGI "
              "(REST), bare grpc.aio (gRPC)")
        print()
        print(throughput_table(cells, base_workers))
    if samples:
        print()
        print(f"Memory: PSS summed over the server's processes (supervisor and workers), "
              f"{args.settle:g} s after {args.requests} REST predicts per worker")
        print()
        print(memory_table(samples, base_workers))
    if notes:
        print()
        print("\n".join(notes))
    print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    if args.json:
        args.json.write_text(json.dumps({
            **run.fields(load_after),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "cells": cells, "memory": [asdict(s) for s in samples], "notes": notes,
        }, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
