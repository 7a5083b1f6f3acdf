"""Recorded TF1 graph cases (``fixtures/record_graph_cases.py``), run through our runtime.

A case is a GraphDef with feeds, fetches and targets, and what TensorFlow gave: the fetched
values or the error, and what the runs printed. A model case calls a fixture SavedModel's
signature instead. Both run unoptimized and through the serving optimizer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protos.tensorflow.core.framework import graph_pb2
from runtime.errors import OpError
from runtime.graph import Graph, TensorRef, graph_from_graph_def
from runtime.optimize import optimize_for_serving
from runtime.resources import ResourceManager
from runtime.saved_model import load_saved_model
from runtime.session import Session

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RECORDINGS = FIXTURES / "graphs"


@dataclass(frozen=True)
class GraphCase:
    name: str
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...] | None  # None when TensorFlow's run failed
    error: str | None  # "<ErrorClass>: <message>"
    graph_def: bytes = b""
    feeds: tuple[str, ...] = ()
    fetches: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    runs: int = 1
    stdout: bytes = b""
    stderr: bytes = b""
    saved_model: str = ""  # a model case: a path under tests/fixtures/models
    signature: str = ""
    aliases: tuple[str, ...] = ()  # a model case's inputs, then its outputs

    def __str__(self) -> str:
        return self.name


def load_cases(family: str) -> list[GraphCase]:
    path = RECORDINGS / f"{family}.npz"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make kernel-fixtures`")
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    names = dict.fromkeys(key.split("/", 1)[0] for key in arrays)
    return [_case(name, arrays) for name in names]


def _numbered(arrays: dict[str, np.ndarray], prefix: str) -> tuple[np.ndarray, ...]:
    keys = sorted((k for k in arrays if re.fullmatch(re.escape(prefix) + r"\d+", k)),
                  key=lambda k: int(k[len(prefix):]))
    return tuple(arrays[k] for k in keys)


def _case(name: str, arrays: dict[str, np.ndarray]) -> GraphCase:
    def get(key: str) -> np.ndarray | None:
        return arrays.get(f"{name}/{key}")

    def names(key: str) -> tuple[str, ...]:
        value = get(key)
        return () if value is None else tuple(str(v) for v in value.tolist())

    def raw(key: str) -> bytes:
        value = get(key)
        return b"" if value is None else value.tobytes()

    error = get("error")
    inputs = tuple(_runtime_value(v) for v in _numbered(arrays, f"{name}/in"))
    return GraphCase(
        name=name,
        inputs=inputs,
        outputs=None if error is not None else _numbered(arrays, f"{name}/out"),
        error=None if error is None else str(error),
        graph_def=raw("graph"),
        feeds=names("feeds"),
        fetches=names("fetches"),
        targets=names("targets"),
        runs=int(get("runs") if get("runs") is not None else 1),  # type: ignore[arg-type]
        stdout=raw("stdout"),
        stderr=raw("stderr"),
        saved_model=str(get("saved_model") if get("saved_model") is not None else ""),
        signature=str(get("signature") if get("signature") is not None else ""),
        aliases=names("aliases"),
    )


def _runtime_value(array: np.ndarray) -> np.ndarray:
    # Strings are recorded as fixed-width bytes; the runtime holds them as object arrays.
    return array.astype(object) if array.dtype.kind == "S" else array


def graph_of(case: GraphCase) -> Graph:
    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString(case.graph_def)
    return graph_from_graph_def(graph_def)


def session_for(case: GraphCase, optimize: bool, graph: Graph | None = None) -> Session:
    graph = graph if graph is not None else graph_of(case)
    if optimize:
        protected = [TensorRef.parse(n) for n in (*case.feeds, *case.fetches, *case.targets)]
        graph = optimize_for_serving(graph, protected, ResourceManager())
    return Session(graph)


def run_case(case: GraphCase, optimize: bool, graph: Graph | None = None) -> list[Any]:
    """The fetched values of the last of the case's runs (model cases: the outputs by alias)."""
    if case.saved_model:
        model = load_saved_model(FIXTURES / "models" / case.saved_model, optimize=optimize)
        count = len(case.inputs)
        outputs = model.run(case.signature, dict(zip(case.aliases[:count], case.inputs)))
        return [outputs[alias] for alias in case.aliases[count:]]
    session = session_for(case, optimize, graph)
    feeds = dict(zip(case.feeds, case.inputs))
    result: list[Any] = []
    for _ in range(case.runs):
        result = session.run(list(case.fetches), feeds, list(case.targets))
    return result


def core_message(message: str) -> str:
    """A message without the node that raised it, and with TensorArray names' process-wide
    serial numbers (``TensorArrayV3_12``) left out."""
    message = message.split("\n\t [[", 1)[0]
    return re.sub(r"(TensorArray \S+?)_\d+([: ])", r"\1_N\2", message)


def check_case(case: GraphCase, optimize: bool, graph: Graph | None = None) -> None:
    if case.error is not None:
        kind, _, message = case.error.partition(": ")
        with pytest.raises(OpError) as info:
            run_case(case, optimize, graph)
        assert type(info.value).__name__ == kind
        assert core_message(info.value.message) == core_message(message)
        return
    assert case.outputs is not None
    ours = run_case(case, optimize, graph)
    assert len(ours) == len(case.outputs)
    for i, (value, expected) in enumerate(zip(ours, case.outputs)):
        assert isinstance(value, np.ndarray), f"{case.name} output {i}: {type(value)}"
        assert_same(value, expected, f"{case.name} output {i}")


def assert_same(ours: np.ndarray, expected: np.ndarray, what: str) -> None:
    if expected.dtype.kind == "S":
        assert ours.dtype == object, f"{what}: dtype {ours.dtype}"
        ours = ours.astype(bytes)
    assert ours.dtype == expected.dtype, f"{what}: dtype {ours.dtype} != {expected.dtype}"
    assert ours.shape == expected.shape, f"{what}: shape {ours.shape} != {expected.shape}"
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(ours, expected, err_msg=what)


def case_params(cases: Sequence[GraphCase]) -> list[Any]:
    return [
        pytest.param(case, optimize, id=f"{case.name}-{'optimized' if optimize else 'plain'}")
        for case in cases
        for optimize in (False, True)
    ]
