"""Regular expressions under hostile patterns: graphserve's RE2 kernel beside TensorFlow's and a
backtracking engine, and how long the server's other requests wait meanwhile.

    .venv/bin/python bench/regex_bench.py [--tf-python .venv-tf/bin/python] [--budget S]

Table 1 times one RegexFullMatch of a pattern over a subject of n characters (median of several
calls): graphserve (RE2 through google-re2), TensorFlow (its own RE2, eager, in its own process)
and Python's ``re`` (a backtracking engine, each call in a child process stopped after --budget
seconds). Table 2 runs the daemon serving ``regex_model`` while four clients send predicts of a
pathological pattern, and times ``/healthz`` meanwhile. Prints tables; never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runtime.kernels.registry import instantiate
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS

# (pattern, subject of length n): nested quantifiers and overlapping alternatives, each over a
# subject that almost matches, so a backtracking engine tries every split.
CASES = [
    ("(a+)+$", lambda n: "a" * n + "!"),
    ("(x+x+)+y", lambda n: "x" * n),
    ("(a|aa)+$", lambda n: "a" * n + "!"),
]
SIZES = [16, 24, 28, 5000]
REPEATS = 5

_TF_SCRIPT = """
import json, sys, time
import tensorflow as tf
out = {}
for pattern, subject in json.loads(sys.argv[1]):
    x = tf.constant([subject])
    tf.strings.regex_full_match(x, pattern)  # first call builds the kernel
    times = []
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        tf.strings.regex_full_match(x, pattern).numpy()
        times.append(time.perf_counter() - t)
    out[pattern + "|" + str(len(subject))] = sorted(times)[len(times) // 2]
print(json.dumps(out))
"""

_RE_SCRIPT = "import re, sys; re.fullmatch(sys.argv[1], sys.argv[2])"


def ours(pattern: str, subject: str) -> float:
    kernel = instantiate("RegexFullMatch", {})
    x = np.empty(1, dtype=object)
    x[0] = subject.encode()
    p = np.array(pattern.encode(), dtype=object)
    kernel(x, p)
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        kernel(x, p)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def backtracking(pattern: str, subject: str, budget: float) -> float | None:
    """Seconds Python's ``re`` took (process start subtracted), or None past the budget."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    empty = time.perf_counter() - started
    started = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-c", _RE_SCRIPT, pattern, subject], timeout=budget,
                       check=True)
    except subprocess.TimeoutExpired:
        return None
    return max(time.perf_counter() - started - empty, 0.0)


def tensorflow(tf_python: str, pairs: list[tuple[str, str]]) -> dict[str, float]:
    if not Path(tf_python).exists():
        return {}
    done = subprocess.run([tf_python, "-c", _TF_SCRIPT, json.dumps(pairs), str(REPEATS)], check=True,
                          capture_output=True, text=True,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def show(seconds: float | None, budget: float) -> str:
    if seconds is None:
        return f"> {budget:g} s"
    return f"{seconds * 1e3:.3f} ms"


def kernel_table(tf_python: str, budget: float) -> None:
    pairs = [(pattern, make(n)) for pattern, make in CASES for n in SIZES]
    tf_times = tensorflow(tf_python, pairs)
    print(f"RegexFullMatch, one subject of n characters (median of {REPEATS} calls)\n")
    print("| pattern | n | graphserve (RE2) | TensorFlow (RE2) | Python re (backtracking) |")
    print("|---|---|---|---|---|")
    for pattern, subject in pairs:
        n = len(subject)
        tf_time = tf_times.get(f"{pattern}|{n}")
        re_time = backtracking(pattern, subject, budget) if n < 1000 else None
        shown = pattern.replace("|", "\\|")  # a bar would end the table cell
        print(f"| `{shown}` | {n} | {show(ours(pattern, subject), budget)} | "
              f"{show(tf_time, budget) if tf_time is not None else 'n/a'} | "
              f"{show(re_time, budget)} |")


def stall_table() -> None:
    process = ServerProcess(
        ["--model_name=regex_model", f"--model_base_path={FIXTURE_MODELS / 'regex_model'}"],
        ["regex_model"],
    )
    try:
        body = {"inputs": {"text": ["a" * 26 + "!"] * 64, "pattern": "(a+)+$"}}
        stop = threading.Event()
        predicts: list[float] = []

        def client() -> None:
            with httpx.Client(base_url=process.base_url, timeout=120) as http:
                while not stop.is_set():
                    started = time.perf_counter()
                    http.post("/v1/models/regex_model:predict", json=body).raise_for_status()
                    predicts.append(time.perf_counter() - started)

        clients = [threading.Thread(target=client) for _ in range(4)]
        for thread in clients:
            thread.start()
        health: list[float] = []
        with httpx.Client(base_url=process.base_url, timeout=120) as http:
            time.sleep(0.5)
            for _ in range(200):
                started = time.perf_counter()
                http.get("/healthz").raise_for_status()
                health.append(time.perf_counter() - started)
        stop.set()
        for thread in clients:
            thread.join()
    finally:
        process.stop()

    def row(name: str, times: list[float]) -> str:
        ordered = sorted(times)
        p50, p99 = ordered[len(ordered) // 2], ordered[int(0.99 * (len(ordered) - 1))]
        return f"| {name} | {len(times)} | {p50 * 1e3:.2f} ms | {p99 * 1e3:.2f} ms | " \
               f"{ordered[-1] * 1e3:.2f} ms |"

    print("\nThe daemon while 4 clients send predicts of 64 x `(a+)+$` over 26 a's + '!'\n")
    print("| request | count | p50 | p99 | max |")
    print("|---|---|---|---|---|")
    print(row("predict (pathological)", predicts))
    print(row("/healthz meanwhile", health))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tf-python", default=str(ROOT / ".venv-tf" / "bin" / "python"))
    parser.add_argument("--budget", type=float, default=5.0,
                        help="seconds a backtracking match may take before it is stopped")
    args = parser.parse_args()
    kernel_table(args.tf_python, args.budget)
    stall_table()


if __name__ == "__main__":
    main()
