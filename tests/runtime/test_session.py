"""Session.run over hand-built graphs: pruning, feeds, fetches, targets, plan caching, errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, NotFoundError
from runtime.graph import Graph, Node, TensorRef
from runtime.session import Session

F32 = DataType.DT_FLOAT


def const(name: str, value: object, dtype: type = np.float32) -> Node:
    array = np.asarray(value, dtype=dtype)
    return Node(name, "Const", attrs={"value": array, "dtype": F32})


def placeholder(name: str, shape: tuple[int, ...] | None = (-1, 2)) -> Node:
    return Node(name, "Placeholder", attrs={"dtype": F32, "shape": shape})


def op(
    name: str, op_type: str, *inputs: str, controls: tuple[str, ...] = (), **attrs: object
) -> Node:
    return Node(name, op_type, [TensorRef.parse(i) for i in inputs], list(controls), dict(attrs))


def graph(*nodes: Node) -> Graph:
    return Graph(nodes)


def test_fetch_computes_from_feeds() -> None:
    g = graph(
        placeholder("x"),
        const("two", 2.0),
        op("y", "Mul", "x", "two"),
        op("z", "AddV2", "y", "two"),
    )
    session = Session(g)
    x = np.array([[1, 2], [3, 4]], dtype=np.float32)
    z, y = session.run(["z:0", "y"], {"x:0": x})
    np.testing.assert_array_equal(y, x * 2)
    np.testing.assert_array_equal(z, x * 2 + 2)
    assert session.run("z", {"x": x}).dtype == np.float32


def test_feeding_an_intermediate_tensor_prunes_its_producers() -> None:
    # 'x' is never fed; feeding 'y' makes it unnecessary.
    g = graph(
        placeholder("x"),
        const("two", 2.0),
        op("y", "Mul", "x", "two"),
        op("z", "AddV2", "y", "two"),
    )
    out = Session(g).run("z", {"y": np.ones((1, 2), np.float32)})
    np.testing.assert_array_equal(out, [[3.0, 3.0]])


def test_unfed_placeholder_is_an_error_naming_it() -> None:
    g = graph(placeholder("x"), const("two", 2.0), op("y", "Mul", "x", "two"))
    with pytest.raises(InvalidArgumentError, match="placeholder tensor 'x'"):
        Session(g).run("y")


def test_feed_dtype_and_shape_are_validated() -> None:
    g = graph(placeholder("x", (-1, 2)), op("y", "Neg", "x"))
    session = Session(g)
    with pytest.raises(InvalidArgumentError, match="Expects arg\\[0\\] to be float but double"):
        session.run("y", {"x": np.ones((1, 2), np.float64)})
    with pytest.raises(InvalidArgumentError, match="Cannot feed value of shape \\[1, 3\\]"):
        session.run("y", {"x": np.ones((1, 3), np.float32)})
    with pytest.raises(InvalidArgumentError, match="shape \\[2\\]"):
        session.run("y", {"x": np.ones((2,), np.float32)})
    # Python lists are converted to the placeholder's dtype.
    np.testing.assert_array_equal(session.run("y", {"x": [[1, 2]]}), [[-1.0, -2.0]])


def test_unknown_tensor_names_are_errors() -> None:
    g = graph(placeholder("x"), op("y", "Neg", "x"))
    session = Session(g)
    with pytest.raises(InvalidArgumentError, match="Tensor nope:0, specified in fetch"):
        session.run("nope:0", {"x": np.ones((1, 2), np.float32)})
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        session.run("y:1", {"x": np.ones((1, 2), np.float32)})
    with pytest.raises(InvalidArgumentError, match="Target node 'nope'"):
        session.run([], {}, ["nope"])


def test_targets_run_for_effect_in_control_order() -> None:
    from runtime.resources import ResourceManager

    handle = Node(
        "v", "VarHandleOp", attrs={"dtype": F32, "shape": (), "shared_name": "v", "container": ""}
    )
    g = graph(
        handle,
        const("one", 1.0),
        const("five", 5.0),
        op("init", "AssignVariableOp", "v", "five"),
        op("bump", "AssignAddVariableOp", "v", "one", controls=("init",)),
        op("read", "ReadVariableOp", "v", dtype=F32),
    )
    resources = ResourceManager()
    session = Session(g, resources)
    session.run([], {}, ["bump"])
    assert session.run("read") == 6.0
    session.run([], {}, ["bump"])  # runs init again, then bump
    assert session.run("read") == 6.0


def test_plans_are_cached_per_call_shape() -> None:
    g = graph(placeholder("x"), op("y", "Neg", "x"), op("z", "Abs", "x"))
    session = Session(g)
    first = session.plan(["x:0"], ["y:0"])
    assert session.plan(["x:0"], ["y:0"]) is first
    assert session.plan(["x:0"], ["z:0"]) is not first
    # The plan calls only the kernel the fetch needs; fetching both calls both.
    assert first.source.count(" = k") == 1
    assert session.plan(["x:0"], ["y:0", "z:0"]).source.count(" = k") == 2


def test_kernel_failure_names_the_node_and_op() -> None:
    g = graph(
        placeholder("x", None),
        const("shape", [7], np.int32),
        op("bad_reshape", "Reshape", "x", "shape"),
    )
    with pytest.raises(InvalidArgumentError) as info:
        Session(g).run("bad_reshape", {"x": np.ones((2, 2), np.float32)})
    assert "bad_reshape" in str(info.value)
    assert info.value.node == "bad_reshape" and info.value.op == "Reshape"


def test_missing_kernel_is_reported_when_the_plan_is_built() -> None:
    g = graph(placeholder("x"), op("y", "NoSuchOp", "x"))
    with pytest.raises((NotFoundError, InvalidArgumentError), match="NoSuchOp"):
        Session(g).run("y", {"x": np.ones((1, 2), np.float32)})


def test_cycle_is_reported() -> None:
    g = graph(op("a", "Neg", "b"), op("b", "Neg", "a"))
    with pytest.raises(InvalidArgumentError, match="cycle"):
        Session(g).run("a")


def test_zero_size_and_rank_zero_tensors_flow_through() -> None:
    g = graph(placeholder("x", None), op("y", "Neg", "x"))
    session = Session(g)
    assert session.run("y", {"x": np.zeros((0, 3), np.float32)}).shape == (0, 3)
    assert session.run("y", {"x": np.float32(2.0)}) == -2.0


def test_control_edge_on_a_fed_placeholder_is_satisfied_by_the_feed() -> None:
    g = graph(placeholder("x"), op("y", "Neg", "x", controls=("x",)))
    out = Session(g).run("y", {"x": np.ones((1, 2), np.float32)})
    np.testing.assert_array_equal(out, [[-1.0, -1.0]])


# --- what the compiled plan does and does not do ------------------------------------------------


def test_identities_are_aliases_not_calls() -> None:
    g = graph(
        placeholder("x"),
        op("a", "Identity", "x"),
        op("n", "Neg", "a"),
        op("b", "StopGradient", "n"),
        op("pair", "IdentityN", "b", "x", T=[F32, F32]),
        op("out", "Abs", "pair:0"),
    )
    session = Session(g)
    x = np.array([[1, -2]], np.float32)
    out, pair1, b, a = session.run(["out", "pair:1", "b", "a"], {"x": x})
    np.testing.assert_array_equal(out, [[1, 2]])
    np.testing.assert_array_equal(b, -x)
    assert pair1 is x and a is x  # forwarded as they are, like TF's copy-free identities
    source = session.plan(["x"], ["out", "pair:1", "b", "a"]).source
    assert source.count(" = k") == 2  # Neg and Abs only


def test_a_fed_identity_output_is_the_fed_value() -> None:
    g = graph(
        placeholder("x"),
        op("pair", "IdentityN", "x", "x", T=[F32, F32]),
        op("first", "Neg", "pair:0"),
        op("second", "Neg", "pair:1"),
    )
    x, fed = np.ones((1, 2), np.float32), np.full((1, 2), 5.0, np.float32)
    first, second = Session(g).run(["first", "second"], {"x": x, "pair:1": fed})
    np.testing.assert_array_equal(first, -x)
    np.testing.assert_array_equal(second, -fed)


def test_constants_nothing_reads_cost_nothing_and_constant_inputs_are_baked() -> None:
    g = graph(
        placeholder("x", (-1, 4)),
        const("unused", 1.0),
        const("shape", [2, -1], np.int32),
        op("r", "Reshape", "x", "shape", controls=("unused",)),
        op("y", "Neg", "r"),
    )
    session = Session(g)
    out = session.run("y", {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    np.testing.assert_array_equal(out, -np.arange(8, dtype=np.float32).reshape(2, 4))
    source = session.plan(["x"], ["y"]).source
    # Neither constant is a cell of the plan: one is never read, the Reshape baked the other.
    assert not re.search(r"\bc\d+", source)
    reshape_line = next(line for line in source.splitlines() if "= k" in line)
    assert reshape_line.strip().endswith("(f0)")


def test_feeds_that_are_not_ready_take_the_checked_path() -> None:
    g = graph(placeholder("x", (-1, 2)), op("y", "Neg", "x"))
    plan = Session(g).plan(["x"], ["y"])
    np.testing.assert_array_equal(plan([[1, 2]])[0], [[-1, -2]])  # a list: converted
    np.testing.assert_array_equal(plan(np.ones((3, 2), np.float32))[0], -np.ones((3, 2)))
    big_endian = np.ones((1, 2), ">f4")
    with pytest.raises(InvalidArgumentError, match="Expects arg"):
        plan(big_endian)
    with pytest.raises(InvalidArgumentError, match="Cannot feed value of shape"):
        plan(np.ones((1, 3), np.float32))
    # Serving does not enforce signature shapes, only dtypes.
    assert plan.run([np.ones((1, 3), np.float32)], check_shapes=False)[0].shape == (1, 3)
    with pytest.raises(InvalidArgumentError, match="plan takes 1 feeds"):
        plan.run([np.ones((1, 2), np.float32)] * 2)


def test_allocator_keeps_freed_memory_unless_the_operator_chose(monkeypatch) -> None:
    import runtime.session as session_module

    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def __init__(self, name: object) -> None:
            self.mallopt = self

        def __call__(self, option: int, value: int) -> int:
            calls.append((option, value))
            return 1

    monkeypatch.setattr(session_module.ctypes, "CDLL", FakeLibc)
    monkeypatch.setattr(session_module.sys, "platform", "linux")
    monkeypatch.setattr(session_module, "_allocator_tuned", False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    Session(graph(placeholder("x")))
    Session(graph(placeholder("x")))  # once per process
    assert calls == [(-3, 64 << 20), (-1, 256 << 20)]

    calls.clear()
    monkeypatch.setattr(session_module, "_allocator_tuned", False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    Session(graph(placeholder("x")))
    assert calls == []
