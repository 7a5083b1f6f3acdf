"""Our runtime, in the driver's process, behind the same small surface as the peers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


class Pending(Exception):
    """``runtime.saved_model`` does not exist yet."""


@dataclass
class OursModel:
    model: Any
    feed_names: dict[str, str]  # alias -> tensor name
    fetch_names: dict[str, str]  # alias -> tensor name
    load_ms: float

    def feeds(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {self.feed_names[a]: to_runtime(v) for a, v in arrays.items()}

    def run_call(self, arrays: dict[str, np.ndarray]) -> Callable[[], Any]:
        """``session.run(fetches, feeds)`` with everything prepared outside the timed call."""
        run = self.model.session.run
        fetches = list(self.fetch_names.values())
        feeds = self.feeds(arrays)
        return lambda: run(fetches, feeds)

    def outputs(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self.run_call(arrays)()
        return self._by_alias(values)

    def _by_alias(self, values: Any) -> dict[str, np.ndarray]:
        if isinstance(values, dict):
            return {a: np.asarray(values[n]) for a, n in self.fetch_names.items()}
        return {a: np.asarray(v) for a, v in zip(self.fetch_names, values, strict=True)}

    def callable_call(self, arrays: dict[str, np.ndarray]) -> Callable[[], Any] | None:
        """``make_callable(feed_names, fetch_names)`` called with the feeds in order, if offered."""
        make = getattr(self.model.session, "make_callable", None)
        if make is None:
            return None
        feeds = self.feeds(arrays)
        names = list(feeds)
        fn = make(names, list(self.fetch_names.values()))
        values = [feeds[n] for n in names]
        return lambda: fn(*values)

    def callable_outputs(self, call: Callable[[], Any]) -> dict[str, np.ndarray]:
        return self._by_alias(call())


def to_runtime(array: np.ndarray) -> np.ndarray:
    # The runtime holds strings as object arrays of bytes; fixtures store fixed-width bytes.
    if array.dtype.kind == "S":
        return array.astype(object)
    return array


def load(model_dir: Path, signature: str) -> OursModel:
    try:
        from runtime.kernels import load_all_kernels
        from runtime.ops import load_all_op_definitions
        from runtime.saved_model import load_saved_model
    except ModuleNotFoundError as err:
        # A runtime module still missing means the runtime has not landed, not that it failed.
        if err.name is not None and (err.name == "runtime" or err.name.startswith("runtime.")):
            raise Pending(str(err)) from err
        raise
    # Registering every op and kernel happens once per process, as importing TensorFlow does
    # in the peers before their timed loads: keep it out of the first model's load time.
    load_all_op_definitions()
    load_all_kernels()
    start = time.perf_counter()
    model = load_saved_model(str(model_dir))
    load_ms = (time.perf_counter() - start) * 1000
    sig = model.signatures[signature]
    return OursModel(
        model=model,
        feed_names={a: t.name for a, t in sig.inputs.items()},
        fetch_names={a: t.name for a, t in sorted(sig.outputs.items())},
        load_ms=load_ms,
    )
