"""Time from a complete version directory appearing to its first successful predict.

    .venv/bin/python bench/swap_latency.py [--rounds N] [--settle S] [--poll S]

Runs the real daemon on a base path and swaps versions in three ways: renamed into place with
file-system events (watchdog) and polling, the same with polling only, and copied in plainly
(fresh mtimes, so the version must first stay quiet for the settle time) with events. Version k
answers y = 0.5x + 2 or + 3 alternately, so the answer tells which version served; the clock
starts when the complete directory is in place and stops at the first predict the new version
answers. Prints a table; never pass/fail.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serving.e2e.support import (
    HALF_PLUS_THREE_V,
    HALF_PLUS_TWO_V,
    copy_atomically,
)
from tests.serving.rest.server_process import ServerProcess

MODEL = "m"
SOURCES = {2.5: HALF_PLUS_TWO_V, 3.5: HALF_PLUS_THREE_V}  # answer for x = 1 -> version dir


def first_answer_ms(client: httpx.Client, expected: float, started: float) -> float:
    while True:
        response = client.post(f"/v1/models/{MODEL}:predict", json={"instances": [[1.0]]})
        if response.status_code == 200 and response.json()["predictions"][0][0] == expected:
            return (time.perf_counter() - started) * 1000
        if time.perf_counter() - started > 120:
            raise TimeoutError("the new version never answered")


def copy_plainly(source: Path, target: Path) -> None:
    shutil.copytree(source, target, copy_function=shutil.copyfile)


def run_mode(watch: bool, atomic: bool, rounds: int, settle: float, poll: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / MODEL
        base.mkdir()
        copy_atomically(HALF_PLUS_TWO_V, base / "1")
        server = ServerProcess(
            [f"--model_name={MODEL}", f"--model_base_path={base}", "--port=0",
             f"--file_system_poll_wait_seconds={poll:g}",
             f"--file_system_settle_seconds={settle:g}",
             f"--file_system_watch={'true' if watch else 'false'}"],
            [MODEL],
        )
        try:
            times = []
            for version in range(2, rounds + 2):
                expected = 3.5 if version % 2 == 0 else 2.5
                time.sleep(0.5)  # let the previous swap finish unloading
                if atomic:
                    started = time.perf_counter()
                    copy_atomically(SOURCES[expected], base / str(version))
                else:
                    copy_plainly(SOURCES[expected], base / str(version))
                    started = time.perf_counter()
                times.append(first_answer_ms(server.client, expected, started))
                shutil.rmtree(base / str(version - 1))
            return times
        finally:
            server.stop()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=0.5)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args(argv)
    print(f"model half_plus_two/half_plus_three, settle {args.settle:g} s, "
          f"poll every {args.poll:g} s, {args.rounds} swaps per mode")
    print(f"{'mode':<34} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    modes = (
        (True, True, "renamed in, watchdog + polling"),
        (False, True, "renamed in, polling only"),
        (True, False, "copied in, watchdog + polling"),
    )
    for watch, atomic, label in modes:
        times = run_mode(watch, atomic, args.rounds, args.settle, args.poll)
        print(f"{label:<34} {statistics.median(times):>10.0f} {min(times):>8.0f} "
              f"{max(times):>8.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
