"""The plan compiler: one call shape (feeds, fetches, targets) of a graph, compiled once.

It prunes the graph to what the call needs, then picks how that subgraph runs:

- acyclic, without TF1 control flow: a static plan (``runtime.plan``), one precomputed order of
  kernel calls;
- with TF1 control flow (Switch/Merge deadness, Enter/Exit loop frames): the dataflow executor
  (``runtime.dataflow_executor``).

Each plan gets a ``FunctionCompiler`` over its graph's library, which compiles the functions that
functional control flow (If, While, Case) runs with this same compiler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.dataflow_executor import compile_dataflow_plan
from runtime.errors import InvalidArgumentError
from runtime.function_plans import FunctionCompiler
from runtime.graph import Graph, TensorRef
from runtime.graph_queries import needed_nodes
from runtime.kernels.registry import CPU
from runtime.ops.dataflow_ops import DATAFLOW_OPS
from runtime.plan import Plan, compile_static_plan


def compile_plan(
    graph: Graph,
    feeds: Sequence[TensorRef],
    fetches: Sequence[TensorRef],
    targets: Sequence[str] = (),
    resources: Any = None,
    device: str = CPU,
) -> Plan:
    """The plan that feeds ``feeds``, returns ``fetches`` and runs ``targets``."""
    for ref in list(feeds) + list(fetches):
        node = graph.node(ref.node)
        if ref.port >= graph.num_outputs(node):
            raise InvalidArgumentError(
                f"Tensor '{ref}' does not exist: node '{node.name}' ({node.op}) has "
                f"{graph.num_outputs(node)} outputs"
            )
    needed = needed_nodes(graph, fetches, targets, set(feeds))
    function_compiler = FunctionCompiler(graph, resources, device, compile_plan)
    if any(graph.nodes[name].op in DATAFLOW_OPS for name in needed):
        return compile_dataflow_plan(
            graph, feeds, fetches, needed, function_compiler, resources, device
        )
    return compile_static_plan(graph, feeds, fetches, needed, function_compiler, resources, device)


__all__ = ["compile_plan"]
