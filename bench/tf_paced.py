"""One TensorFlow model that makes one call each time it is asked: TensorFlow's side of paired
timing, run in TensorFlow's environment (never in ours).

    .venv-tf/bin/python bench/tf_paced.py REQUEST.json

The request: ``dir`` and ``signature`` of the SavedModel, ``engine`` (``tf2``: the loaded
signature called eagerly, numpy in and out; ``tf1``: a ``Session``, TensorFlow Serving's path),
``threads`` (intra-op and inter-op, set before any op runs) and ``batches``, the input ``.npz`` of
each batch size. Once loaded it writes ``ready LOAD_MS TF_VERSION`` (or ``error REASON``) on
stdout, then answers each line it reads on stdin:

- ``call BATCH``: one call on that batch's inputs, answered with its duration in nanoseconds;
- ``collect``: a garbage collection (otherwise paused, as ``timeit`` does), answered ``ok``;
- ``quit`` (or the end of stdin): exits.

Nothing else reaches stdout (TensorFlow's own output goes to stderr). The driver times our
runtime between two of these calls, so both engines' calls of a pair meet the machine in the
same state.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tf_worker import tf1_session, tf2_call

Call = Callable[[], object]


def _inputs(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {alias: data[alias] for alias in data.files}


def _tf2(tf: Any, request: dict[str, Any], batches: dict[str, dict[str, np.ndarray]]
         ) -> dict[str, Call]:
    fn = tf.saved_model.load(request["dir"]).signatures[request["signature"]]
    return {batch: tf2_call(tf, fn, arrays) for batch, arrays in batches.items()}


def _tf1(tf: Any, request: dict[str, Any], batches: dict[str, dict[str, np.ndarray]]
         ) -> dict[str, Call]:
    sess, meta = tf1_session(tf, request["dir"], int(request["threads"]))
    sig = meta.signature_def[request["signature"]]
    fetches = [info.name for info in sig.outputs.values()]
    calls: dict[str, Call] = {}
    for batch, arrays in batches.items():
        feed = {sig.inputs[a].name: v for a, v in arrays.items()}
        calls[batch] = lambda feed=feed: sess.run(fetches, feed)
    return calls


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    # The protocol owns stdout; anything printed from here on goes to stderr.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    request = json.loads(Path(argv[0]).read_text())
    try:
        import tensorflow as tf

        threads = int(request["threads"])
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        batches = {b: _inputs(p) for b, p in request["batches"].items()}
        start = time.perf_counter()
        load = _tf1 if request.get("engine") == "tf1" else _tf2
        calls = load(tf, request, batches)
        load_ms = (time.perf_counter() - start) * 1000
    except Exception as exc:  # noqa: BLE001 - reported to the driver
        answers.write(f"error {type(exc).__name__}: {exc}".replace("\n", " ")[:2000] + "\n")
        return 1
    answers.write(f"ready {load_ms:.1f} {tf.__version__}\n")
    gc.disable()
    clock = time.perf_counter_ns
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "collect":
            gc.collect()
            answers.write("ok\n")
            continue
        call = calls[words[1]]
        t0 = clock()
        call()
        answers.write(f"{clock() - t0}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
