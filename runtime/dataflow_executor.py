"""The dataflow executor: runs graphs with TF1 control flow (Switch/Merge, Enter/Exit loops).

A static plan (``runtime.plan``) runs an acyclic graph in one precomputed order. TF1 control flow
needs TensorFlow's dynamic scheme instead, which this module follows:

- Every node counts the inputs (data and control) it still waits for and runs when none is left.
  A tensor may be *dead*: never produced, like the untaken output of a ``Switch``. A node with a
  dead input, or a control input from a dead node, does not run and its outputs are dead.
- ``Merge`` is the exception: it waits for its control inputs, then runs on the first live data
  input, and is dead only when every data input is dead (or a dead ``Enter`` reaches it: a loop on
  the untaken side of a conditional).
- Loops run in *frames*. ``Enter`` passes a tensor into iteration 0 of a child frame (one frame per
  loop and per iteration of the enclosing frame); a constant ``Enter`` makes it available to every
  iteration. ``NextIteration`` passes a tensor to the next iteration, starting it; at most
  ``parallel_iterations`` iterations are outstanding, later ones wait. ``Exit`` passes a live
  tensor back to the parent frame. When a frame has finished (every ``Enter`` seen and every
  iteration done), the ``Exit`` nodes that were dead in its last iteration send deadness out.

Which frame each node runs in is fixed by the graph (found once, breadth first from the roots,
as TensorFlow does); per-iteration state (input slots, pending and dead counts) is allocated
when an iteration starts and dropped when it is done. Kernels are the same factories the static
plan uses, built once per node.

A run with a ``Cancellation`` (given, or the thread's current one when the program is a function
body) reads its ``error`` before each node it takes off the ready queue.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime import errors
from runtime.cancellation import Cancellation, current
from runtime.errors import InvalidArgumentError, OpError
from runtime.function_plans import FunctionCompiler
from runtime.graph import Graph, Node, TensorRef
from runtime.kernels import KERNELS, NodeContext, load_all_kernels
from runtime.kernels.dataflow_ops import DEAD
from runtime.kernels.registry import CPU
from runtime.ops.dataflow_ops import ENTER_OPS, EXIT_OPS, MERGE_OPS, NEXT_ITERATION_OPS
from runtime.plan import Plan, build_kernel, feed_check

# How the executor treats a node.
_KERNEL = 0  # call its kernel
_FORWARD = 1  # outputs are its inputs (identities)
_NOTHING = 2  # no outputs, nothing to compute (NoOp, ControlTrigger)
_MERGE = 3
_ENTER = 4
_EXIT = 5
_NEXT = 6

_KINDS = {
    "NoOp": _NOTHING,
    "ControlTrigger": _NOTHING,
    **dict.fromkeys(MERGE_OPS, _MERGE),
    **dict.fromkeys(ENTER_OPS, _ENTER),
    **dict.fromkeys(EXIT_OPS, _EXIT),
    **dict.fromkeys(NEXT_ITERATION_OPS, _NEXT),
}

# What kind of consumer an edge leads to.
_TO_NODE = 0
_TO_MERGE = 1
_TO_TRIGGER = 2  # a ControlTrigger runs (live) whatever its inputs' deadness

_ROOT = ""
_BLANKS = [(None,) * n for n in range(64)]


@dataclass
class _StaticFrame:
    """What all instances of one loop frame (by frame name) share."""

    name: str
    index: int = 0
    size: int = 0  # nodes running in this frame
    total_inputs: int = 0  # input slots of those nodes
    enter_count: int = 0  # Enter nodes leading into the frame
    parallel_iterations: int = 1
    pending: list[int] = field(default_factory=list)  # initial pending count, by local index


class _Iteration:
    __slots__ = ("children", "dead", "frames", "num", "ops", "pending", "vals")

    def __init__(self, num: int, static: _StaticFrame) -> None:
        self.num = num
        self.vals: list[Any] = [None] * static.total_inputs
        self.pending: list[int] = list(static.pending)
        self.dead: list[int] = [0] * static.size
        self.ops = 0  # nodes of this iteration queued or running
        self.frames = 0  # child frames started in this iteration and not finished
        self.children: dict[int, _Frame] = {}


class _Frame:
    __slots__ = (
        "count", "dead_exits", "deferred", "finished", "invariants", "iterations", "outstanding",
        "parent", "parent_iter", "pending_inputs", "static",
    )

    def __init__(
        self, static: _StaticFrame, parent: _Frame | None, parent_iter: _Iteration | None
    ) -> None:
        self.static = static
        self.parent = parent
        self.parent_iter = parent_iter
        self.iterations: dict[int, _Iteration] = {0: _Iteration(0, static)}
        self.count = 0  # the newest iteration
        self.outstanding = 1  # iterations started and not done
        self.pending_inputs = static.enter_count  # Enter nodes not yet run
        self.invariants: list[tuple[int, Any]] = []  # constant Enters: (node, value)
        self.dead_exits: list[int] = []
        self.deferred: list[tuple[int, Any]] = []  # NextIterations over the parallel limit
        self.finished = False


class DataflowProgram:
    """A pruned graph with TF1 control flow, compiled once: ``run(*feeds) -> fetched list``.
    Kernels that run library functions get them from ``function_compiler``."""

    def __init__(
        self,
        graph: Graph,
        feeds: Sequence[TensorRef],
        fetches: Sequence[TensorRef],
        names: set[str],
        function_compiler: FunctionCompiler,
        resources: Any = None,
        device: str = CPU,
    ) -> None:
        load_all_kernels()
        fed = set(feeds)
        self.nodes: list[Node] = [node for node in graph if node.name in names]
        index = {node.name: i for i, node in enumerate(self.nodes)}
        self._index = index
        count = len(self.nodes)

        # Edges among the pruned nodes; an edge from a fed tensor is delivered at the start.
        data_in: list[list[tuple[TensorRef, int]]] = [[] for _ in range(count)]
        control_in: list[list[int]] = [[] for _ in range(count)]
        for i, node in enumerate(self.nodes):
            for slot, ref in enumerate(node.inputs):
                data_in[i].append((ref, slot))
            for name in node.control_inputs:
                if name in index:  # a fed placeholder's control edge is already satisfied
                    control_in[i].append(index[name])

        frame_of = self._assign_frames(graph, fed, data_in, control_in)
        self._frame_of = frame_of
        statics = self._static_frames(frame_of)

        kinds: list[int] = []
        local: list[int] = []
        in_start: list[int] = []
        for i, node in enumerate(self.nodes):
            static = statics[frame_of[i]]
            kind = _KINDS.get(node.op, _FORWARD if graph.forwards_input(node) else _KERNEL)
            kinds.append(kind)
            local.append(static.size)
            static.size += 1
            in_start.append(static.total_inputs)
            static.total_inputs += len(node.inputs)
            if kind == _MERGE:
                # Bit 0: no live data input yet; each control input counts 2 (TensorFlow's
                # encoding: ready at 0, or at 1 once every data input is dead).
                static.pending.append(1 + 2 * len(control_in[i]))
            else:
                static.pending.append(len(node.inputs) + len(control_in[i]))
        self._kinds = kinds
        self._in_start = in_start
        self._num_inputs = [len(node.inputs) for node in self.nodes]
        self._statics = statics

        def edge_target(dst: int) -> int:
            op = self.nodes[dst].op
            if kinds[dst] == _MERGE:
                return _TO_MERGE
            return _TO_TRIGGER if op == "ControlTrigger" else _TO_NODE

        data_out: list[list[tuple[int, int, int, int, int]]] = [[] for _ in range(count)]
        feed_out: list[list[tuple[int, int, int, int, int]]] = [[] for _ in feeds]
        feed_slot = {ref: k for k, ref in enumerate(feeds)}
        for dst in range(count):
            for ref, slot in data_in[dst]:
                edge = (ref.port, dst, local[dst], in_start[dst] + slot, edge_target(dst))
                if ref in fed:
                    feed_out[feed_slot[ref]].append((0, *edge[1:]))
                else:
                    data_out[index[ref.node]].append(edge)
        control_out: list[list[tuple[int, int, int]]] = [[] for _ in range(count)]
        for dst in range(count):
            for src in control_in[dst]:
                control_out[src].append((dst, local[dst], edge_target(dst)))
        self._data_out = [tuple(edges) for edges in data_out]
        self._control_out = [tuple(edges) for edges in control_out]
        self._feed_out = [tuple(edges) for edges in feed_out]
        self._roots = [
            i for i in range(count)
            if frame_of[i] == _ROOT and statics[_ROOT].pending[local[i]] == 0
        ]

        # Enter nodes: the child frame they lead into, and whether they carry an invariant.
        self._enter_frame: dict[int, _StaticFrame] = {}
        self._enter_constant: dict[int, bool] = {}
        for i, node in enumerate(self.nodes):
            if kinds[i] == _ENTER:
                self._enter_frame[i] = statics[node.attrs["frame_name"]]
                self._enter_constant[i] = bool(node.attrs.get("is_constant", False))

        self._fetch_of = self._fetch_targets(fetches, fed)
        self._num_fetches = len(fetches)
        self._fetched_feeds = [
            (k, feed_slot[ref]) for k, ref in enumerate(fetches) if ref in fed
        ]
        self._fetches = list(fetches)
        self._fns, self._keep, self._num_outputs = self._build_kernels(
            graph, fed, function_compiler, resources, device
        )
        self.runs_functions = function_compiler.compiled_any

    # ----- compile time -------------------------------------------------------------------

    def _assign_frames(
        self,
        graph: Graph,
        fed: set[TensorRef],
        data_in: list[list[tuple[TensorRef, int]]],
        control_in: list[list[int]],
    ) -> list[str]:
        """Each node's frame name, breadth first from the roots (TensorFlow's rule)."""
        count = len(self.nodes)
        index = self._index
        outs: list[list[int]] = [[] for _ in range(count)]
        in_degree = [0] * count
        fed_consumers: list[int] = []
        for dst in range(count):
            for ref, _slot in data_in[dst]:
                if ref in fed:
                    fed_consumers.append(dst)
                else:
                    outs[index[ref.node]].append(dst)
                    in_degree[dst] += 1
            for src in control_in[dst]:
                outs[src].append(dst)
                in_degree[dst] += 1
        frame: list[str | None] = [None] * count
        enter_of: list[int | None] = [None] * count  # the Enter whose frame a node runs in
        queue: deque[int] = deque()
        for i in [*(i for i in range(count) if in_degree[i] == 0), *fed_consumers]:
            if frame[i] is None:
                frame[i] = _ROOT
                queue.append(i)
        while queue:
            i = queue.popleft()
            node = self.nodes[i]
            out_enter: int | None
            if node.op in ENTER_OPS:
                out_frame, out_enter = node.attrs["frame_name"], i
            elif node.op in EXIT_OPS:
                enter = enter_of[i]
                if enter is None:
                    raise InvalidArgumentError(
                        f"Invalid Exit op '{node.name}': cannot find a corresponding Enter op"
                    )
                out_frame, out_enter = frame[enter], enter_of[enter]
            else:
                out_frame, out_enter = frame[i], enter_of[i]
            for dst in outs[i]:
                if frame[dst] is None:
                    frame[dst] = out_frame
                    enter_of[dst] = out_enter
                    queue.append(dst)
                elif frame[dst] != out_frame:
                    raise InvalidArgumentError(
                        f"Node '{self.nodes[dst].name}' has inputs from different frames: "
                        f"'{node.name}' is in frame '{out_frame}', another input in "
                        f"'{frame[dst]}'"
                    )
        unreached = [self.nodes[i].name for i in range(count) if frame[i] is None]
        if unreached:
            raise InvalidArgumentError(
                f"Nodes {unreached[:5]} can never run: they are on a cycle that no Enter leads into"
            )
        self._enter_of = enter_of
        return [name for name in frame if name is not None]  # every node has one by now

    def _static_frames(self, frame_of: list[str]) -> dict[str, _StaticFrame]:
        statics: dict[str, _StaticFrame] = {_ROOT: _StaticFrame(_ROOT)}
        for i, node in enumerate(self.nodes):
            if node.op not in ENTER_OPS:
                continue
            name = node.attrs["frame_name"]
            static = statics.get(name)
            if static is None:
                parallel = int(node.attrs.get("parallel_iterations", 10))
                if parallel <= 0:
                    raise InvalidArgumentError(
                        f"Enter node '{node.name}': parallel_iterations must be positive, "
                        f"got {parallel}"
                    )
                static = _StaticFrame(name, parallel_iterations=parallel)
                statics[name] = static
            static.enter_count += 1
        for k, static in enumerate(statics.values()):
            static.index = k
        return statics

    def _fetch_targets(
        self, fetches: Sequence[TensorRef], fed: set[TensorRef]
    ) -> list[tuple[tuple[int, int], ...] | None]:
        """Per node, the (port, fetch index) pairs it produces (in the root frame)."""
        targets: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
        for k, ref in enumerate(fetches):
            if ref in fed:
                continue
            i = self._index[ref.node]
            node = self.nodes[i]
            if node.op in EXIT_OPS:
                enter = self._enter_of[i]
                out_frame = self._frame_of[enter] if enter is not None else None
            elif node.op in ENTER_OPS:
                out_frame = node.attrs["frame_name"]
            else:
                out_frame = self._frame_of[i]
            if out_frame != _ROOT:
                raise InvalidArgumentError(
                    f"Cannot fetch tensor '{ref}': it is computed inside the loop frame "
                    f"'{out_frame}'"
                )
            targets[i].append((ref.port, k))
        return [tuple(t) if t else None for t in targets]

    def _build_kernels(
        self,
        graph: Graph,
        fed: set[TensorRef],
        function_compiler: FunctionCompiler,
        resources: Any,
        device: str,
    ) -> tuple[list[Any], list[tuple[int, ...] | None], list[int]]:
        fns: list[Any] = []
        keep: list[tuple[int, ...] | None] = []
        num_outputs: list[int] = []
        for i, node in enumerate(self.nodes):
            outputs = graph.num_outputs(node)
            num_outputs.append(outputs)
            if self._kinds[i] != _KERNEL:
                fns.append(None)
                keep.append(None)
                continue
            factory = KERNELS.lookup(node.op, device)
            if factory is None:
                raise errors.NotFoundError(
                    f"No {device} kernel registered for op '{node.op}' (node '{node.name}')",
                    node=node.name,
                    op=node.op,
                )
            constants = {}
            for slot, ref in enumerate(node.inputs):
                producer = graph.nodes.get(ref.node)
                if (
                    producer is not None
                    and producer.op == "Const"
                    and not producer.inputs
                    and ref.port == 0
                    and ref not in fed
                ):
                    constants[slot] = producer.attrs["value"]
            ctx = NodeContext(
                node.name, node.op, node.attrs, outputs, device, resources,
                constant_inputs=constants,
                functions=graph.functions,
                function_compiler=function_compiler,
            )
            fns.append(build_kernel(factory, ctx))
            baked = set(ctx.baked_inputs)
            keep.append(
                tuple(s for s in range(len(node.inputs)) if s not in baked) if baked else None
            )
        return fns, keep, num_outputs

    # ----- run time -----------------------------------------------------------------------

    def run(self, *feeds: Any) -> list[Any]:
        # As a function body, the program belongs to the run in progress on this thread.
        return _Run(self, current()).execute(feeds)

    def run_cancellable(self, cancellation: Cancellation, *feeds: Any) -> list[Any]:
        return _Run(self, cancellation).execute(feeds)

    def describe(self) -> str:
        frames = [name for name in self._statics if name != _ROOT]
        return (
            f"dataflow executor over {len(self.nodes)} nodes; loop frames: "
            f"{', '.join(frames) if frames else 'none'}"
        )


class _Run:
    """The state of one call: frames, iterations and the ready queue."""

    def __init__(self, program: DataflowProgram, cancellation: Cancellation | None) -> None:
        self.p = program
        self.cancellation = cancellation
        self.ready: list[tuple[int, _Frame, _Iteration, bool]] = []
        self.root = _Frame(program._statics[_ROOT], None, None)
        self.results: list[Any] = [None] * program._num_fetches

    def execute(self, feeds: Sequence[Any]) -> list[Any]:
        p = self.p
        root = self.root
        root_iter = root.iterations[0]
        for k, value in enumerate(feeds):
            self._activate_edges(p._feed_out[k], (), False, False, root, root_iter, (value,))
        for k, f in p._fetched_feeds:
            self.results[k] = feeds[f]
        ready = self.ready
        for i in reversed(p._roots):
            ready.append((i, root, root_iter, False))
        root_iter.ops += len(p._roots)

        kinds, fns, keep = p._kinds, p._fns, p._keep
        in_start, num_inputs, num_outputs = p._in_start, p._num_inputs, p._num_outputs
        fetch_of = p._fetch_of
        results = self.results
        activate = self._activate
        activate_edges = self._activate_edges
        data_out, control_out = p._data_out, p._control_out
        cancellation = self.cancellation
        while ready:
            if cancellation is not None and cancellation.error is not None:
                cancellation.check()
            i, frame, it, dead = ready.pop()
            kind = kinds[i]
            outputs: Any = None
            if not dead:
                vals = it.vals
                start = in_start[i]
                n = num_inputs[i]
                if kind == _KERNEL:
                    args = vals[start:start + n]
                    vals[start:start + n] = _BLANKS[n] if n < 64 else [None] * n
                    kept = keep[i]
                    try:
                        if kept is None:
                            result = fns[i](*args)
                        else:
                            result = fns[i](*[args[s] for s in kept])
                    except Exception as err:
                        raise _node_error(err, p.nodes[i]) from err
                    outputs = (result,) if num_outputs[i] == 1 else result
                elif kind == _MERGE:
                    outputs = self._merge(i, vals, start, n)
                elif kind == _NOTHING:
                    outputs = ()
                else:  # identities and the frame ops forward their inputs
                    outputs = vals[start:start + n]
                    vals[start:start + n] = _BLANKS[n] if n < 64 else [None] * n
                fetched = fetch_of[i]
                if fetched is not None:
                    for port, k in fetched:
                        results[k] = outputs[port]
            if kind <= _MERGE:
                activate_edges(data_out[i], control_out[i], dead, False, frame, it, outputs)
            elif kind == _ENTER:
                self._enter(i, dead, frame, it, outputs)
            elif kind == _EXIT:
                if dead:
                    if it.num == frame.count:
                        frame.dead_exits.append(i)
                else:
                    parent, parent_iter = frame.parent, frame.parent_iter
                    if parent is None or parent_iter is None:  # _assign_frames refuses this
                        raise errors.InternalError(f"Exit node '{p.nodes[i].name}' is outside a loop")
                    activate(i, False, parent, parent_iter, outputs)
            elif not dead:  # NextIteration; a dead one ends its loop's deadness here
                self._next_iteration(i, frame, it, outputs)
            it.ops -= 1
            if it.ops == 0 and it.frames == 0:
                self._settle(frame, it)

        for k, value in enumerate(results):
            if value is None or value is DEAD:
                ref = p._fetches[k]
                raise InvalidArgumentError(
                    f"Retval[{k}] does not have value: fetched tensor '{ref}' was not computed "
                    "(it is on the untaken side of a conditional, or a loop never produced it)"
                )
        return results

    def _merge(self, i: int, vals: list[Any], start: int, n: int) -> tuple[Any, np.ndarray]:
        for slot in range(start, start + n):
            value = vals[slot]
            if value is not None:
                vals[slot] = None
                return value, np.array(slot - start, dtype=np.int32)
        raise errors.InternalError(f"Merge node '{self.p.nodes[i].name}' ran without a live input")

    def _activate(
        self, i: int, dead: bool, frame: _Frame, it: _Iteration, outputs: Any
    ) -> None:
        p = self.p
        self._activate_edges(
            p._data_out[i], p._control_out[i], dead, p._kinds[i] == _ENTER, frame, it, outputs
        )

    def _activate_edges(
        self,
        data_edges: tuple[tuple[int, int, int, int, int], ...],
        control_edges: tuple[tuple[int, int, int], ...],
        dead: bool,
        from_enter: bool,
        frame: _Frame,
        it: _Iteration,
        outputs: Any,
    ) -> None:
        vals, pending, dead_counts = it.vals, it.pending, it.dead
        ready = self.ready
        num_inputs = self.p._num_inputs
        for port, dst, loc, slot, target in data_edges:
            value = DEAD if dead else outputs[port]
            if target == _TO_MERGE:
                count = pending[loc]
                if value is not DEAD:
                    if count & 1:  # the first live input: the one Merge forwards
                        vals[slot] = value
                        pending[loc] = count - 1
                        if count == 1:
                            ready.append((dst, frame, it, False))
                            it.ops += 1
                else:
                    dead_counts[loc] += 1
                    if count == 1 and (from_enter or dead_counts[loc] == num_inputs[dst]):
                        ready.append((dst, frame, it, True))
                        it.ops += 1
            else:
                vals[slot] = value
                count = pending[loc] - 1
                pending[loc] = count
                if value is DEAD:
                    dead_counts[loc] += 1
                if count == 0:
                    ready.append((dst, frame, it, dead_counts[loc] > 0 and target == _TO_NODE))
                    it.ops += 1
        for dst, loc, target in control_edges:
            if target == _TO_MERGE:
                count = pending[loc] - 2
                pending[loc] = count
                if count == 0:
                    ready.append((dst, frame, it, False))
                    it.ops += 1
                elif count == 1 and dead_counts[loc] == num_inputs[dst]:
                    ready.append((dst, frame, it, True))
                    it.ops += 1
            else:
                count = pending[loc] - 1
                pending[loc] = count
                if dead:
                    dead_counts[loc] += 1
                if count == 0:
                    ready.append((dst, frame, it, dead_counts[loc] > 0 and target == _TO_NODE))
                    it.ops += 1

    def _enter(self, i: int, dead: bool, frame: _Frame, it: _Iteration, outputs: Any) -> None:
        p = self.p
        static = p._enter_frame[i]
        child = it.children.get(static.index)
        if child is None:
            child = _Frame(static, frame, it)
            it.children[static.index] = child
            it.frames += 1
        value = DEAD if dead else outputs[0]
        if p._enter_constant[i]:
            # A loop invariant: every iteration started so far, and every later one, gets it.
            child.invariants.append((i, value))
            for child_iter in list(child.iterations.values()):
                self._activate(i, value is DEAD, child, child_iter, (value,))
        else:
            self._activate(i, dead, child, child.iterations[0], (value,))
        child.pending_inputs -= 1
        if child.pending_inputs == 0:
            first = child.iterations.get(0)
            if first is not None and first.ops == 0 and first.frames == 0:
                self._settle(child, first)

    def _next_iteration(self, i: int, frame: _Frame, it: _Iteration, outputs: Any) -> None:
        if it.num == frame.count:
            if frame.outstanding == frame.static.parallel_iterations:
                frame.deferred.append((i, outputs[0]))  # starts when an iteration finishes
                return
            target = self._start_iteration(frame)
        else:
            target = frame.iterations[it.num + 1]
        self._activate(i, False, frame, target, outputs)

    def _start_iteration(self, frame: _Frame) -> _Iteration:
        frame.count += 1
        it = _Iteration(frame.count, frame.static)
        frame.iterations[frame.count] = it
        frame.outstanding += 1
        frame.dead_exits.clear()
        deferred, frame.deferred = frame.deferred, []
        for i, value in deferred:
            self._activate(i, value is DEAD, frame, it, (value,))
        for i, value in frame.invariants:
            self._activate(i, value is DEAD, frame, it, (value,))
        return it

    def _iteration_done(self, frame: _Frame, it: _Iteration) -> bool:
        if it.ops or it.frames:
            return False
        if it.num == 0:
            return frame.pending_inputs == 0
        return (it.num - 1) not in frame.iterations

    def _settle(self, frame: _Frame, it: _Iteration) -> None:
        """Drop the iterations that are done, from ``it`` on; then the frame, if it is done."""
        if frame.finished or frame.iterations.get(it.num) is not it:
            return
        num = it.num
        while num <= frame.count:
            current = frame.iterations[num]
            if not self._iteration_done(frame, current):
                break
            del frame.iterations[num]
            frame.outstanding -= 1
            num += 1
            if frame.deferred:
                self._start_iteration(frame)
        if frame.parent is not None and frame.pending_inputs == 0 and frame.outstanding == 0:
            self._finish_frame(frame)

    def _finish_frame(self, frame: _Frame) -> None:
        frame.finished = True
        parent, parent_iter = frame.parent, frame.parent_iter
        assert parent is not None and parent_iter is not None
        for i in frame.dead_exits:
            self._activate(i, True, parent, parent_iter, None)
        del parent_iter.children[frame.static.index]
        parent_iter.frames -= 1
        if parent_iter.ops == 0 and parent_iter.frames == 0:
            self._settle(parent, parent_iter)


def _node_error(err: Exception, node: Node) -> OpError:
    where = f"\n\t [[{{{{node {node.name}}}}} = {node.op}]]"
    if isinstance(err, OpError):
        if err.node is not None:
            return err
        return type(err)(f"{err.message}{where}", node=node.name, op=node.op)
    kind: type[OpError]
    if isinstance(err, (ValueError, IndexError, TypeError, ArithmeticError)):
        kind = errors.InvalidArgumentError
    elif isinstance(err, MemoryError):
        kind = errors.ResourceExhaustedError
    else:
        kind = errors.InternalError
    return kind(
        f"{node.op} node '{node.name}' failed: {type(err).__name__}: {err}{where}",
        node=node.name,
        op=node.op,
    )


class DataflowPlan(Plan):
    """A ``Plan`` whose call runs the dataflow executor (same feed checks and interface)."""

    def __init__(self, program: DataflowProgram, feeds: Sequence[TensorRef], graph: Graph) -> None:
        checks = tuple(feed_check(graph, ref) for ref in feeds)
        super().__init__(
            program.run,
            program.run_cancellable,
            {},  # no generated code: the executor names the node a failure came from
            checks,
            program.describe(),
            program.runs_functions,
        )
        self.program = program

    def _annotate(self, err: Exception, tb: Any) -> OpError:
        if isinstance(err, OpError):
            return err  # the executor already named the node
        return super()._annotate(err, tb)

    def annotate(self, err: Exception) -> OpError | None:
        return err if isinstance(err, OpError) and err.node is not None else None


def compile_dataflow_plan(
    graph: Graph,
    feeds: Sequence[TensorRef],
    fetches: Sequence[TensorRef],
    needed: set[str],
    function_compiler: FunctionCompiler,
    resources: Any = None,
    device: str = CPU,
) -> DataflowPlan:
    """The plan for a pruned graph (``needed``) that holds TF1 control flow."""
    program = DataflowProgram(graph, feeds, fetches, needed, function_compiler, resources, device)
    return DataflowPlan(program, feeds, graph)


__all__ = ["DataflowPlan", "DataflowProgram", "compile_dataflow_plan"]
