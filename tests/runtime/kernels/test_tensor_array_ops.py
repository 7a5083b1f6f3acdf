"""TensorArray ops against TensorFlow's recorded graph runs (values and misuse errors, alone and
in v1 while loops), plain and optimized; and the array's life: one per run, never shared between
runs or threads, never merged or folded by the optimizer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from runtime.dataflow_executor import DataflowPlan
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.graph import Graph, Node, TensorRef, fill_default_attrs
from runtime.ops import OP_REGISTRY, load_all_op_definitions
from runtime.optimize import optimize_for_serving
from runtime.resources import ResourceManager
from runtime.session import Session
from tests.runtime.kernels.graph_cases import (
    GraphCase,
    case_params,
    check_case,
    graph_of,
    load_cases,
    run_case,
    session_for,
)

CASES = {
    case.name: case
    for family in ("tensor_array_ops", "tensor_array_loops")
    for case in load_cases(family)
}
F32 = DataType.DT_FLOAT


@pytest.mark.parametrize(("case", "optimize"), case_params(list(CASES.values())))
def test_matches_tensorflow(case: GraphCase, optimize: bool) -> None:
    check_case(case, optimize)


def test_loops_run_on_the_dataflow_executor_and_plain_graphs_on_the_static_plan() -> None:
    loop = CASES["while_loop_stack"]
    assert isinstance(session_for(loop, False).plan(loop.feeds, loop.fetches), DataflowPlan)
    plain = CASES["scatter_gather"]
    assert not isinstance(session_for(plain, False).plan(plain.feeds, plain.fetches), DataflowPlan)


@pytest.mark.parametrize("name", ["write_read", "nested_map_fn", "unstack_read_in_loop"])
def test_every_run_gets_new_arrays(name: str) -> None:
    # Writing index 0 again in a later run (or in another thread) is no second write.
    case = CASES[name]
    session = session_for(case, optimize=True)
    feeds = dict(zip(case.feeds, case.inputs))
    assert case.outputs is not None
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: session.run(list(case.fetches), feeds), range(16)))
    for result in results:
        for ours, expected in zip(result, case.outputs):
            np.testing.assert_array_equal(np.asarray(ours), expected)


def _v2_graph(graph: Graph) -> Graph:
    """The same graph over the V2 names: TensorArrayV2 has no flow output, so its readers get
    a constant flow instead."""
    nodes: list[Node] = []
    flows: dict[TensorRef, TensorRef] = {}
    for node in graph:
        if node.op == "TensorArrayV3":
            flow = Node(f"{node.name}/flow", "Const", attrs={
                "value": np.zeros((), np.float32), "dtype": F32})
            nodes.append(flow)
            flows[TensorRef(node.name, 1)] = TensorRef(flow.name)
            attrs = {k: v for k, v in node.attrs.items() if k != "identical_element_shapes"}
            nodes.append(node.copy(op="TensorArrayV2", attrs=attrs))
        elif node.op.startswith("TensorArray") and node.op.endswith("V3"):
            nodes.append(node.copy(op=node.op[:-2] + "V2"))
        else:
            nodes.append(node)
    return Graph(
        [n.copy(inputs=[flows.get(ref, ref) for ref in n.inputs]) for n in nodes], graph.functions
    )


@pytest.mark.parametrize(
    "name", ["write_read", "scatter_gather", "concat", "split", "read_twice_cleared",
             "while_loop_stack"],
)
def test_v2_names_run_the_same_kernels(name: str) -> None:
    case = CASES[name]
    check_case(case, optimize=False, graph=_v2_graph(graph_of(case)))


def test_definitions_are_stateful() -> None:
    load_all_op_definitions()
    for op in OP_REGISTRY.names():
        if op.startswith("TensorArray"):
            assert OP_REGISTRY.get(op).stateful, op  # type: ignore[union-attr]


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def op(self, name: str, op: str, inputs: list[str], **attrs: Any) -> str:
        refs = [TensorRef.parse(text) for text in inputs]
        self.nodes.append(Node(name, op, refs, [], fill_default_attrs(op, attrs)))
        return name

    def const(self, name: str, value: Any) -> str:
        array = np.asarray(value)
        return self.op(name, "Const", [], value=array, dtype=DataType.DT_INT32
                       if array.dtype == np.int32 else F32)

    def array(self, name: str, size: str) -> str:
        return self.op(name, "TensorArrayV3", [size], dtype=F32)


def _optimized_session(graph: _Graph, fetches: list[str]) -> Session:
    protected = [TensorRef.parse(name) for name in fetches]
    return Session(optimize_for_serving(Graph(graph.nodes), protected, ResourceManager()))


def test_equal_arrays_are_not_merged() -> None:
    # map_fn makes several arrays of the same size: merged, they would share elements.
    g = _Graph()
    size, index = g.const("size", np.int32(2)), g.const("index", np.int32(0))
    results = []
    for k in (1, 2):
        handle = g.array(f"ta{k}", size)
        value = g.const(f"value{k}", np.full(3, k, np.float32))
        flow = g.op(f"write{k}", "TensorArrayWriteV3", [handle, index, value, f"{handle}:1"],
                    T=F32)
        results.append(g.op(f"read{k}", "TensorArrayReadV3", [handle, index, flow], dtype=F32))
    first, second = _optimized_session(g, results).run(results)
    np.testing.assert_array_equal(first, np.full(3, 1, np.float32))
    np.testing.assert_array_equal(second, np.full(3, 2, np.float32))


def test_equal_reads_are_not_merged() -> None:
    # Two reads of one element of a clear_after_read array: TensorFlow fails on the second.
    g = _Graph()
    index = g.const("index", np.int32(0))
    handle = g.array("ta", g.const("size", np.int32(1)))
    flow = g.op("write", "TensorArrayWriteV3",
                [handle, index, g.const("value", np.float32(5)), f"{handle}:1"], T=F32)
    reads = [g.op(f"read{k}", "TensorArrayReadV3", [handle, index, flow], dtype=F32)
             for k in (1, 2)]
    total = g.op("total", "AddV2", reads, T=F32)
    with pytest.raises(InvalidArgumentError, match="Could not read index 0 twice"):
        _optimized_session(g, [total]).run(total)


def test_a_model_with_loops_keeps_its_arrays_when_optimized() -> None:
    case = CASES["nested_map_fn"]
    graph = session_for(case, optimize=True).graph
    assert sum(node.op == "TensorArrayV3" for node in graph) == sum(
        node.op == "TensorArrayV3" for node in graph_of(case)
    )
    assert run_case(case, optimize=True)[0].shape == (3, 4)
