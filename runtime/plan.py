"""Static execution plans: a pruned, acyclic subgraph compiled to straight-line Python.

``compile_static_plan`` orders the needed nodes topologically, builds each node's kernel once,
and generates one Python function whose body is a sequence of kernel calls over local variables::

    def _plan(f0):
        t0 = k1(f0, c0)
        t1 = k2(t0); del t0
        return [t1]

Kernels and constants are closure cells (no dict lookups per op); a tensor is released after its
last use. Nodes whose op forwards its input (``OpDef.forwards_input``) are aliases (no call),
constants nothing reads produce no code, and a kernel factory may bake constant inputs into its
function (``NodeContext.constant_input``), which the plan then does not pass. When a kernel fails,
the traceback's line number in the generated code names the node.

A second function, generated from the same statements, takes the run's ``Cancellation`` first and
reads its ``error`` before each kernel call; a run given no cancellation calls the first, which
checks nothing. Which kind of plan a call gets (this one, or the dataflow executor for TF1 loops) is
decided by ``runtime.compiler``.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np

from runtime import dtypes, errors
from runtime.cancellation import Cancellation, running
from runtime.errors import InvalidArgumentError, OpError
from runtime.function_plans import FunctionCompiler
from runtime.graph import Graph, Node, TensorRef
from runtime.graph_queries import topological_order
from runtime.kernels import KERNELS, NodeContext, load_all_kernels
from runtime.kernels.registry import CPU, KernelError

_plan_counter = itertools.count()


@dataclass(frozen=True)
class FeedCheck:
    """What a fed tensor must look like (from its Placeholder), checked before each run."""

    ref: TensorRef
    dtype: np.dtype | None
    shape: tuple[int, ...] | None

    def convert(self, index: int, fed: Any, check_shape: bool = True) -> np.ndarray:
        value: np.ndarray
        if not isinstance(fed, np.ndarray):
            value = np.asarray(fed, dtype=self.dtype)
        elif self.dtype is not None and fed.dtype != self.dtype:
            if fed.dtype.kind in "SU" and self.dtype == object:
                value = fed.astype(object)
            else:
                raise InvalidArgumentError(
                    f"Expects arg[{index}] to be {_dtype_name(self.dtype)} but "
                    f"{_dtype_name(fed.dtype)} is provided (feeding '{self.ref}')"
                )
        else:
            value = fed
        shape = self.shape
        if (
            check_shape
            and shape is not None
            and (
                value.ndim != len(shape)
                or any(d not in (-1, a) for d, a in zip(shape, value.shape))
            )
        ):
            raise InvalidArgumentError(
                f"Cannot feed value of shape {list(value.shape)} for tensor '{self.ref}', "
                f"which has shape {list(shape)}"
            )
        return value


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return dtypes.short_name(dtypes.from_numpy(dtype))
    except ValueError:
        return str(dtype)


def _feed_predicates(
    checks: Sequence[FeedCheck],
) -> tuple[Callable[..., bool], Callable[..., bool]]:
    """Generated functions telling whether feeds need no conversion: each an ndarray of exactly
    the expected dtype object and (for the first function) a matching shape. Anything they do
    not vouch for takes ``FeedCheck.convert``'s full path."""
    names = [f"f{i}" for i in range(len(checks))]
    env: dict[str, Any] = {"_nd": np.ndarray}
    typed: list[str] = []
    shaped: list[str] = []
    for i, (name, check) in enumerate(zip(names, checks)):
        terms = [f"type({name}) is _nd"]
        if check.dtype is not None:
            env[f"_d{i}"] = check.dtype
            terms.append(f"{name}.dtype is _d{i}")
        typed += terms
        shaped += terms
        if check.shape is not None:
            shaped.append(f"{name}.ndim == {len(check.shape)}")
            shaped += [f"{name}.shape[{a}] == {d}" for a, d in enumerate(check.shape) if d >= 0]
    params = ", ".join(names)
    source = (
        f"def _ready({params}):\n    return {' and '.join(shaped) or 'True'}\n"
        f"def _ready_any_shape({params}):\n    return {' and '.join(typed) or 'True'}\n"
    )
    exec(compile(source, "<feed-checks>", "exec"), env)  # noqa: S102 - our own generated code
    return env["_ready"], env["_ready_any_shape"]


def feed_check(graph: Graph, ref: TensorRef) -> FeedCheck:
    node = graph.node(ref.node)
    if graph.is_placeholder(node) and ref.port == 0:
        dtype = node.attrs.get("dtype")
        shape = node.attrs.get("shape")
        return FeedCheck(ref, dtypes.to_numpy(dtype) if dtype is not None else None, shape)
    return FeedCheck(ref, None, None)


class Plan:
    """A compiled call: ``plan(*feed_values) -> list of fetched arrays``. Thread-safe.

    ``fn(*feeds)`` runs the call; ``cancellable_fn(cancellation, *feeds)`` runs it reading
    ``cancellation.error`` between kernels. ``code_lines`` maps the file name of generated code
    to the node each of its lines runs, to name the node a failure came from. A plan whose
    kernels run library functions (``runs_functions``) makes the run's cancellation the thread's
    current one while it runs, for the loops inside those functions.
    """

    def __init__(
        self,
        fn: Callable[..., list[Any]],
        cancellable_fn: Callable[..., list[Any]],
        code_lines: Mapping[str, Mapping[int, Node]],
        feed_checks: tuple[FeedCheck, ...],
        source: str,
        runs_functions: bool = False,
    ) -> None:
        self._fn = fn
        self._cancellable_fn = cancellable_fn
        self._code_lines = dict(code_lines)
        self.feed_checks = feed_checks
        self.source = source
        self.runs_functions = runs_functions
        self._ready, self._ready_any_shape = _feed_predicates(feed_checks)

    def __call__(self, *feeds: Any) -> list[Any]:
        return self.run(feeds)

    def run(
        self,
        feeds: Sequence[Any],
        check_shapes: bool = True,
        cancellation: Cancellation | None = None,
    ) -> list[Any]:
        """Convert and check the feeds (dtype always; shape unless told not to), then run.

        With a ``cancellation``, the run stops before the next kernel once it is cancelled and
        raises the cancellation's error."""
        # Fast path: every feed already an ndarray of the placeholder's dtype (and shape).
        if len(feeds) == len(self.feed_checks) and (
            self._ready(*feeds) if check_shapes else self._ready_any_shape(*feeds)
        ):
            if cancellation is not None:
                return self._run_cancellable(cancellation, feeds)
            try:
                with np.errstate(all="ignore"):
                    return self._fn(*feeds)
            except Exception as err:
                raise self._annotate(err, sys.exc_info()[2]) from err
        if len(feeds) != len(self.feed_checks):
            raise InvalidArgumentError(
                f"plan takes {len(self.feed_checks)} feeds, {len(feeds)} given"
            )
        values = [
            check.convert(i, v, check_shapes)
            for i, (check, v) in enumerate(zip(self.feed_checks, feeds))
        ]
        if cancellation is not None:
            return self._run_cancellable(cancellation, values)
        return self.run_unchecked(*values)

    def run_unchecked(self, *feeds: Any) -> list[Any]:
        """Run with feeds already converted and checked (the caller vouches for them)."""
        try:
            # TensorFlow's kernels produce inf/NaN silently; so do ours (numpy would warn).
            with np.errstate(all="ignore"):
                return self._fn(*feeds)
        except Exception as err:
            raise self._annotate(err, sys.exc_info()[2]) from err

    def run_checked_cancellable(
        self, cancellation: Cancellation, feeds: Sequence[Any]
    ) -> list[Any]:
        """``run_unchecked`` that stops once ``cancellation`` is cancelled."""
        return self._run_cancellable(cancellation, feeds)

    def _run_cancellable(self, cancellation: Cancellation, feeds: Sequence[Any]) -> list[Any]:
        try:
            with np.errstate(all="ignore"):
                if not self.runs_functions:
                    return self._cancellable_fn(cancellation, *feeds)
                with running(cancellation):
                    return self._cancellable_fn(cancellation, *feeds)
        except Exception as err:
            # A cancelled run raises its cancellation's error as it is, not as whatever a
            # kernel that saw it (a loop) or this plan would make of it.
            cancellation.check()
            raise self._annotate(err, sys.exc_info()[2]) from err

    @property
    def raw(self) -> Callable[..., list[Any]]:
        """The generated function itself: no feed conversion, checks or error annotation (for
        callers that run it many times and annotate errors themselves, e.g. loop bodies)."""
        return self._fn

    def annotate(self, err: Exception) -> OpError | None:
        """``err`` as an OpError naming the node of this plan it was raised in; None if it was
        not raised by this plan's code."""
        tb = err.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in self._code_lines:
                return self._annotate(err, err.__traceback__)
            tb = tb.tb_next
        return None

    def _annotate(self, err: Exception, tb: TracebackType | None) -> OpError:
        node = None
        while tb is not None:
            lines = self._code_lines.get(tb.tb_frame.f_code.co_filename)
            if lines is not None:
                node = lines.get(tb.tb_lineno)
            tb = tb.tb_next
        where = f"\n\t [[{{{{node {node.name}}}}} = {node.op}]]" if node is not None else ""
        if isinstance(err, OpError):
            return type(err)(
                f"{err.message}{where}",
                node=getattr(node, "name", None),
                op=getattr(node, "op", None),
            )
        kind: type[OpError]
        if isinstance(err, (ValueError, IndexError, TypeError, ArithmeticError)):
            kind = errors.InvalidArgumentError
        elif isinstance(err, MemoryError):
            kind = errors.ResourceExhaustedError
        else:
            kind = errors.InternalError
        label = f"{node.op} node '{node.name}'" if node is not None else "plan"
        return kind(
            f"{label} failed: {type(err).__name__}: {err}{where}",
            node=getattr(node, "name", None),
            op=getattr(node, "op", None),
        )


def build_kernel(factory: Callable[[NodeContext], Any], ctx: NodeContext) -> Any:
    """The kernel function a factory builds for a node; any failure but an OpError or a
    KernelError becomes an InvalidArgumentError naming the node."""
    try:
        return factory(ctx)
    except (KernelError, OpError):
        raise
    except Exception as err:
        raise InvalidArgumentError(
            f"{ctx.op} node '{ctx.name}': cannot build kernel: {err}", node=ctx.name, op=ctx.op
        ) from err


def compile_static_plan(
    graph: Graph,
    feeds: Sequence[TensorRef],
    fetches: Sequence[TensorRef],
    needed: set[str],
    function_compiler: FunctionCompiler,
    resources: Any = None,
    device: str = CPU,
) -> Plan:
    """The plan running the acyclic subgraph ``needed`` (see ``runtime.graph_queries``); kernels
    that run library functions get them from ``function_compiler``."""
    load_all_kernels()
    fed = set(feeds)
    order = topological_order(graph, needed, fed)

    # Identity-like outputs resolve to the tensor they forward (following chains).
    alias: dict[TensorRef, TensorRef] = {}
    forwarders: set[str] = set()  # nodes that are nothing but aliases: no code
    for node in order:
        if graph.forwards_input(node) and len(node.inputs) == graph.num_outputs(node):
            forwarders.add(node.name)
            for port, ref in enumerate(node.inputs):
                out = TensorRef(node.name, port)
                if out not in fed:  # a fed output is the fed value, not the input
                    alias[out] = alias.get(ref, ref)

    def resolve(ref: TensorRef) -> TensorRef:
        return alias.get(ref, ref)

    symbols: dict[TensorRef, str] = {ref: f"f{i}" for i, ref in enumerate(feeds)}
    cells: dict[str, Any] = {}  # closure name -> kernel or constant
    lines: list[tuple[str, Node | None]] = []

    # Last statement index at which each tensor is read, to release it afterwards.
    last_use: dict[TensorRef, int] = {}
    for index, node in enumerate(order):
        if node.name in forwarders:
            continue
        for ref in node.inputs:
            last_use[resolve(ref)] = index
    fetched = {resolve(ref) for ref in fetches}
    used_ports: dict[str, set[int]] = {}
    for ref in list(last_use) + list(fetched):
        used_ports.setdefault(ref.node, set()).add(ref.port)

    for index, node in enumerate(order):
        if node.op == "NoOp" or node.name in forwarders:  # a NoOp's work is its place in order
            continue
        ports = sorted(used_ports.get(node.name, ()))
        if node.op == "Const" and not node.inputs:
            if ports == [0]:
                name = f"c{index}"
                cells[name] = node.attrs["value"]
                symbols[TensorRef(node.name, 0)] = name
            continue  # a constant nothing reads has nothing to do
        inputs = [resolve(ref) for ref in node.inputs]
        factory = KERNELS.lookup(node.op, device)
        if factory is None:
            raise errors.NotFoundError(
                f"No {device} kernel registered for op '{node.op}' (node '{node.name}')",
                node=node.name,
                op=node.op,
            )
        constants = {
            i: cells[symbols[ref]]
            for i, ref in enumerate(inputs)
            if symbols[ref].startswith("c")
        }
        ctx = NodeContext(
            node.name,
            node.op,
            node.attrs,
            graph.num_outputs(node),
            device,
            resources,
            constant_inputs=constants,
            functions=graph.functions,
            function_compiler=function_compiler,
        )
        cells[f"k{index}"] = build_kernel(factory, ctx)
        baked = set(ctx.baked_inputs)
        args = ", ".join(symbols[ref] for i, ref in enumerate(inputs) if i not in baked)
        call = f"k{index}({args})"
        if not ports:
            statement = call
        elif ctx.num_outputs == 1:
            symbols[TensorRef(node.name, 0)] = f"t{index}"
            statement = f"t{index} = {call}"
        else:
            parts = [f"r{index} = {call}"]
            for port in ports:
                symbols[TensorRef(node.name, port)] = f"t{index}_{port}"
                parts.append(f"t{index}_{port} = r{index}[{port}]")
            parts.append(f"del r{index}")
            statement = "; ".join(parts)
        dead = [
            symbols[ref]
            for ref in dict.fromkeys(inputs)
            if last_use.get(ref) == index
            and ref not in fetched
            and ref not in fed
            and symbols[ref].startswith("t")
        ]
        if dead:
            statement += "; del " + ", ".join(dead)
        lines.append((statement, node))

    params = [symbols[ref] for ref in feeds]
    results = ", ".join(symbols[resolve(ref)] for ref in fetches)
    # Constants that every reader baked in are not needed by the generated code at all.
    referenced = set(re.findall(r"\b[ck]\d+\b", " ".join(st for st, _ in lines) + results))
    cell_names = [name for name in cells if name in referenced]
    cell_values = [cells[name] for name in cell_names]
    number = next(_plan_counter)
    fn, source, line_nodes = _generate(
        f"<plan-{number}>", cell_names, cell_values, params, lines, results, cancellable=False
    )
    cancellable_fn, _, cancellable_lines = _generate(
        f"<plan-{number}-cancellable>", cell_names, cell_values, ["cancellation", *params],
        lines, results, cancellable=True,
    )
    checks = tuple(feed_check(graph, ref) for ref in feeds)
    code_lines = {f"<plan-{number}>": line_nodes, f"<plan-{number}-cancellable>": cancellable_lines}
    return Plan(fn, cancellable_fn, code_lines, checks, source, function_compiler.compiled_any)


def _generate(
    filename: str,
    cell_names: Sequence[str],
    cell_values: Sequence[Any],
    params: Sequence[str],
    lines: Sequence[tuple[str, Node | None]],
    results: str,
    cancellable: bool,
) -> tuple[Callable[..., list[Any]], str, dict[int, Node]]:
    """The plan function for ``lines``, its source, and the node each source line runs. The
    cancellable one reads ``cancellation.error`` before each kernel call."""
    source_lines = [f"def _make({', '.join(cell_names)}):", f"    def _plan({', '.join(params)}):"]
    line_nodes: dict[int, Node] = {}
    for statement, line_node in lines:
        if cancellable:
            source_lines.append("        if cancellation.error is not None: cancellation.check()")
        source_lines.append(f"        {statement}")
        if line_node is not None:
            line_nodes[len(source_lines)] = line_node
    source_lines += [f"        return [{results}]", "    return _plan"]
    source = "\n".join(source_lines) + "\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    fn: Callable[..., list[Any]] = namespace["_make"](*cell_values)
    return fn, source, line_nodes
