"""Control-flow function bodies, specialised for their call site and optimized like the graph.

An If, While or Case node runs functions of the graph's library; unoptimized, each runs as its
FunctionDef says (``runtime.function_plans``). This pass, for every such node:

1. binds the arguments whose value the call site fixes: a constant, or a variable handle when no
   node of the serving graph (functions included) may write a variable. For a While, only
   loop-invariant ones, which the body returns unchanged. A bound argument leaves the node's
   inputs and, for a While, its outputs: their readers read the bound tensor itself;
2. instantiates each function with the bound values in place of its argument Placeholders and
   optimizes that graph with the serving passes (this one among them, for nested control flow), so
   a loop body's variable reads become constants that fold and fuse, once, instead of being read
   at every iteration;
3. stores the result in the node's library as a ``FunctionBody`` under a new name, which the
   node's function attrs then refer to.

Binding handles before the graph's own variables are frozen also lets freezing see that a loop
only reads them. So the pass runs twice: after pruning (handles), and after constant folding
(constants that folding made). A node whose functions are specialised already, and which has
nothing new to bind, is left as it is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from runtime.attrs import FuncAttr
from runtime.function_plans import FunctionBody, instantiate, split_func
from runtime.graph import Graph, Node, TensorRef
from runtime.optimize.context import SERVING_PIPELINE, PassContext, run_passes, unique_name

# Function attrs of each control-flow op, and where its function arguments start.
_FUNCTION_ATTRS = {
    "If": ("then_branch", "else_branch"),
    "StatelessIf": ("then_branch", "else_branch"),
    "Case": ("branches",),
    "StatelessCase": ("branches",),
    "While": ("cond", "body"),
    "StatelessWhile": ("cond", "body"),
}
_LOOPS = frozenset({"While", "StatelessWhile"})
CONTROL_FLOW_OPS = frozenset(_FUNCTION_ATTRS)

# Stateful ops that cannot write a variable.
_NO_VARIABLE_WRITES = frozenset(
    {
        "VarHandleOp",
        "ReadVariableOp",
        "ResourceGather",
        "VarIsInitializedOp",
        "DisableCopyOnRead",
        "Assert",
        "Print",
        "PrintV2",
        "NoOp",
        *CONTROL_FLOW_OPS,
        "PartitionedCall",
        "StatefulPartitionedCall",
    }
)

# Functions being specialised on this thread: one reached again from its own body recurses, and
# is left to fail when compiled.
_active = threading.local()


def specialize_function_bodies(graph: Graph, context: PassContext) -> Graph:
    sites = [node for node in graph if node.op in _FUNCTION_ATTRS]
    if not sites:
        return graph
    bind_handles = not _may_write_variables(graph)
    functions = dict(graph.functions)
    taken = set(functions)
    replaced: dict[str, Node] = {}
    moved: dict[TensorRef, TensorRef] = {}  # While outputs renumbered or dropped
    for node in sites:
        result = _specialize(graph, node, context, bind_handles, functions, taken)
        if result is not None:
            replaced[node.name], outputs = result
            moved.update(outputs)
    if not replaced:
        return graph
    nodes = []
    for node in graph:
        node = replaced.get(node.name, node)
        if any(ref in moved for ref in node.inputs):
            node = node.copy(inputs=[moved.get(ref, ref) for ref in node.inputs])
        nodes.append(node)
    return Graph(nodes, functions, graph.model_op_defs)


def _specialize(
    graph: Graph,
    node: Node,
    context: PassContext,
    bind_handles: bool,
    functions: dict[str, Any],
    taken: set[str],
) -> tuple[Node, dict[TensorRef, TensorRef]] | None:
    first = 0 if node.op in _LOOPS else 1
    args = node.inputs[first:]
    funcs = _functions_of(node)
    entries = [graph.functions.get(split_func(f)[0]) for _, f in funcs]
    if any(entry is None for entry in entries):
        return None  # reported when the node's kernel is built
    keys = {id(entry) for entry in entries}
    active: set[int] = _active.__dict__.setdefault("ids", set())
    if keys & active:
        return None
    active.update(keys)
    try:
        bodies = [instantiate(graph, f) for _, f in funcs]
        bound = _bindable_args(graph, node, args, bodies, context, bind_handles)
        if not bound and all(isinstance(entry, FunctionBody) for entry in entries):
            return None
        specialised = []
        for (attr, func), body, entry in zip(funcs, bodies, entries):
            is_loop_body = node.op in _LOOPS and attr == "body"
            # A body this pass made already belongs to this node alone: it is replaced.
            if isinstance(entry, FunctionBody):
                name = entry.name
            else:
                name = unique_name(f"{node.name}/{attr}", taken)
            body = _bind(body, name, bound, drop_outputs=is_loop_body)
            specialised.append((attr, _optimized(body, context)))
        for _, body in specialised:
            functions[body.name] = body
    finally:
        active.difference_update(keys)
    return _rewritten(node, first, bound, specialised)


def _functions_of(node: Node) -> list[tuple[str, Any]]:
    """(label, func) for each function the node runs, in attr order."""
    found = []
    for attr in _FUNCTION_ATTRS[node.op]:
        value = node.attrs.get(attr)
        if isinstance(value, list):
            found += [(f"{attr}[{i}]", f) for i, f in enumerate(value)]
        else:
            found.append((attr, value))
    return found


def _bindable_args(
    graph: Graph,
    node: Node,
    args: Sequence[TensorRef],
    bodies: Sequence[FunctionBody],
    context: PassContext,
    bind_handles: bool,
) -> dict[int, Node]:
    """Function argument index -> the Const or VarHandleOp that fixes its value."""
    loop = node.op in _LOOPS
    if loop and node.name in context.protected_nodes:
        return {}  # its outputs must keep their numbering
    bound: dict[int, Node] = {}
    for k, ref in enumerate(args):
        producer = _fixed_producer(graph, ref, context, bind_handles)
        if producer is None:
            continue
        if loop and not _passes_through(bodies[1], k):
            continue
        bound[k] = producer
    return bound


def _fixed_producer(
    graph: Graph, ref: TensorRef, context: PassContext, bind_handles: bool
) -> Node | None:
    """The Const or VarHandleOp that ``ref`` forwards, if nothing it passes waits on another
    node (binding it would drop that wait)."""
    ref = _resolve(graph, ref, through_controls=False)
    node = graph.nodes.get(ref.node)
    if (
        node is None
        or node.name in context.protected_nodes
        or node.inputs
        or node.control_inputs
        or ref.port != 0
    ):
        return None
    if node.op == "Const" or (node.op == "VarHandleOp" and bind_handles):
        return node
    return None


def _resolve(graph: Graph, ref: TensorRef, through_controls: bool = True) -> TensorRef:
    """``ref`` with identity-like nodes looked through (only those without control inputs,
    unless ``through_controls``)."""
    for _ in range(10_000):
        node = graph.nodes.get(ref.node)
        if node is None or not graph.is_identity(node):
            break
        if node.control_inputs and not through_controls:
            break
        ref = node.inputs[ref.port]
    return ref


def _passes_through(body: FunctionBody, k: int) -> bool:
    """Whether a loop body returns its argument ``k`` unchanged as result ``k``."""
    if k >= len(body.outputs) or k >= len(body.inputs):
        return False
    return _resolve(body.graph, body.outputs[k]) == body.inputs[k]


def _bind(
    body: FunctionBody, name: str, bound: Mapping[int, Node], drop_outputs: bool
) -> FunctionBody:
    """``body`` with the bound arguments' Placeholders replaced by copies of their producers."""
    by_placeholder = {body.inputs[k].node: producer for k, producer in bound.items()}
    nodes = []
    for node in body.graph:
        producer = by_placeholder.get(node.name)
        if producer is not None:
            attrs = dict(producer.attrs)
            if producer.op == "VarHandleOp":
                # The kernel finds the variable by shared_name, or else by its node's name.
                attrs["shared_name"] = attrs.get("shared_name") or producer.name
            node = Node(node.name, producer.op, [], [], attrs, producer.device)
        nodes.append(node)
    keep = [k for k in range(len(body.inputs)) if k not in bound]
    outputs = body.outputs
    output_types = body.output_types
    if drop_outputs:
        output_types = tuple(output_types[k] for k in keep)
        outputs, nodes = _drop_outputs(outputs, nodes, keep)
    return FunctionBody(
        name,
        body.graph.with_nodes(nodes),
        tuple(body.inputs[k] for k in keep),
        outputs,
        body.targets,
        tuple(body.input_types[k] for k in keep),
        output_types,
    )


def _drop_outputs(
    outputs: tuple[TensorRef, ...], nodes: list[Node], keep: Sequence[int]
) -> tuple[tuple[TensorRef, ...], list[Node]]:
    """Only the ``keep`` results. When the results are the ports of one IdentityN, as an
    instantiated function's are, that node forwards only those (so that nothing keeps the
    dropped ones' producers alive)."""
    names = {ref.node for ref in outputs}
    ports = [ref.port for ref in outputs]
    if len(names) == 1 and ports == list(range(len(outputs))):
        (name,) = names
        for i, node in enumerate(nodes):
            if node.name == name and node.op == "IdentityN" and len(node.inputs) == len(ports):
                attrs = dict(node.attrs)
                if isinstance(attrs.get("T"), list) and len(attrs["T"]) == len(ports):
                    attrs["T"] = [attrs["T"][k] for k in keep]
                nodes = list(nodes)
                nodes[i] = node.copy(inputs=[node.inputs[k] for k in keep], attrs=attrs)
                return tuple(TensorRef(name, j) for j in range(len(keep))), nodes
    return tuple(outputs[k] for k in keep), nodes


def _optimized(body: FunctionBody, context: PassContext) -> FunctionBody:
    protected = {*body.inputs, *body.outputs, *(TensorRef(t) for t in body.targets)}
    graph = run_passes(body.graph, protected, context.resources, SERVING_PIPELINE.passes)
    return FunctionBody(
        body.name,
        graph,
        body.inputs,
        body.outputs,
        body.targets,
        body.input_types,
        body.output_types,
    )


def _rewritten(
    node: Node, first: int, bound: Mapping[int, Node], bodies: Sequence[tuple[str, FunctionBody]]
) -> tuple[Node, dict[TensorRef, TensorRef]]:
    """The node calling the specialised bodies without its bound arguments; for a While, where
    each of its old outputs is now."""
    args = node.inputs[first:]
    keep = [k for k in range(len(args)) if k not in bound]
    attrs = dict(node.attrs)
    for label, body in bodies:
        attr, _, index = label.partition("[")
        func = FuncAttr(body.name)
        if index:
            funcs = list(attrs[attr])
            funcs[int(index[:-1])] = func
            attrs[attr] = funcs
        else:
            attrs[attr] = func
    # Bookkeeping attrs that count or index the old inputs and outputs.
    attrs.pop("_read_only_resource_inputs", None)
    attrs.pop("_num_original_outputs", None)
    moved: dict[TensorRef, TensorRef] = {}
    if node.op in _LOOPS:
        for key in ("T", "output_shapes", "_output_shapes"):
            value = attrs.get(key)
            if isinstance(value, list) and len(value) == len(args):
                attrs[key] = [value[k] for k in keep]
        for k in range(len(args)):
            old = TensorRef(node.name, k)
            moved[old] = args[k] if k in bound else TensorRef(node.name, keep.index(k))
        moved = {old: new for old, new in moved.items() if old != new}
    else:
        attrs["Tin"] = [attrs["Tin"][k] for k in keep]
    inputs = [*node.inputs[:first], *(args[k] for k in keep)]
    return node.copy(inputs=inputs, attrs=attrs), moved


def _may_write_variables(graph: Graph) -> bool:
    """Whether any node of ``graph``, or of a function it runs, might write a variable."""
    seen: set[int] = set()
    pending: list[tuple[Any, Mapping[str, Any]]] = [(graph, graph.functions)]
    while pending:
        item, functions = pending.pop()
        for op, called in _ops_of(item):
            if op in functions:
                called = [*called, op]
            elif op not in _NO_VARIABLE_WRITES:
                op_def = graph.op_def(op)
                if op_def is None or op_def.stateful:
                    return True
            for name in called:
                entry = functions.get(name)
                if entry is not None and id(entry) not in seen:
                    seen.add(id(entry))
                    inner = entry.graph.functions if isinstance(entry, FunctionBody) else functions
                    pending.append((entry, inner))
    return False


def _ops_of(item: Any) -> Iterator[tuple[str, list[str]]]:
    """(op, names of the functions its attrs name) for each node of a graph or function."""
    if isinstance(item, FunctionBody):
        item = item.graph
    if isinstance(item, Graph):
        for node in item:
            yield node.op, _func_names(node.attrs.values())
        return
    for nd in item.node_def:
        names = []
        for value in nd.attr.values():
            kind = value.WhichOneof("value")
            if kind == "func":
                names.append(value.func.name)
            elif kind == "list":
                names += [f.name for f in value.list.func]
        yield nd.op, names


def _func_names(values: Any) -> list[str]:
    names = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, FuncAttr):
                names.append(item.name)
    return names
