"""What every rewrite pass may consult, and small helpers passes share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from runtime.graph import Graph, Node, TensorRef
from runtime.resources import ResourceManager


@dataclass(frozen=True)
class PassContext:
    protected: frozenset[TensorRef]
    resources: ResourceManager
    protected_nodes: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "protected_nodes", frozenset(r.node for r in self.protected))


Pass = Callable[[Graph, PassContext], Graph]


def run_passes(
    graph: Graph,
    protected: Iterable[TensorRef],
    resources: ResourceManager,
    passes: Sequence[tuple[str, Pass]],
) -> Graph:
    """``graph`` rewritten by each of ``passes`` in turn, keeping ``protected`` as they are."""
    context = PassContext(frozenset(protected), resources)
    for _name, rewrite in passes:
        graph = rewrite(graph, context)
    return graph


class ServingPipeline:
    """The serving passes in order (``runtime.optimize.DEFAULT_PASSES``). One of them optimizes
    function bodies with all of them, so the package that lists them installs them here rather
    than that pass importing the list that holds it."""

    passes: Sequence[tuple[str, Pass]] = ()


SERVING_PIPELINE = ServingPipeline()


def rewire(graph: Graph, replace: dict[TensorRef, TensorRef], drop: Iterable[str]) -> Graph:
    """Graph with tensor references redirected by ``replace`` and the ``drop`` nodes removed.

    A control edge on a dropped node moves to the producers of the tensors that replaced it.
    """
    dropped = set(drop)
    control_map: dict[str, list[str]] = {}
    for old, new in replace.items():
        if old.node in dropped:
            control_map.setdefault(old.node, []).append(new.node)

    def resolve(ref: TensorRef) -> TensorRef:
        seen = 0
        while ref in replace:
            ref = replace[ref]
            seen += 1
            if seen > 10_000:
                raise RuntimeError(f"reference cycle while rewiring at {ref}")
        return ref

    def resolve_control(name: str, out: list[str]) -> None:
        if name not in dropped:
            out.append(name)
            return
        for target in control_map.get(name, []):
            resolve_control(target, out)

    nodes: list[Node] = []
    for node in graph:
        if node.name in dropped:
            continue
        inputs = [resolve(ref) for ref in node.inputs]
        controls: list[str] = []
        for name in node.control_inputs:
            resolve_control(name, controls)
        data_producers = {ref.node for ref in inputs}
        controls = [c for c in dict.fromkeys(controls) if c not in data_producers]
        if inputs != node.inputs or controls != node.control_inputs:
            node = node.copy(inputs=inputs, control_inputs=controls)
        nodes.append(node)
    return graph.with_nodes(nodes)


def readers_of(graph: Graph) -> tuple[dict[str, list[Node]], set[str]]:
    """Per producer, the nodes reading its outputs (each once); and every control-edge source."""
    readers: dict[str, list[Node]] = {}
    control_readers: set[str] = set()
    for node in graph:
        for producer in dict.fromkeys(ref.node for ref in node.inputs):
            readers.setdefault(producer, []).append(node)
        control_readers.update(node.control_inputs)
    return readers, control_readers


def const_value(graph: Graph, ref: TensorRef) -> np.ndarray | None:
    """The value of a Const without control inputs that ``ref`` reads, or None."""
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "Const" or ref.port != 0 or node.control_inputs:
        return None
    value = node.attrs.get("value")
    return value if isinstance(value, np.ndarray) else None


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_N`` for the first N not in ``taken``; the result is added to it."""
    unique, n = name, 0
    while unique in taken:
        n += 1
        unique = f"{name}_{n}"
    taken.add(unique)
    return unique


def is_stateful(graph: Graph, node: Node) -> bool:
    op_def = graph.op_def(node.op)
    return op_def is None or op_def.stateful
