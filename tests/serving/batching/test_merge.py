"""Merge / pad / split of batched runs, against running every task alone."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import FailedPreconditionError, InternalError, InvalidArgumentError
from serving.batching.merge import (
    concat_outputs,
    merge_inputs,
    round_up_to_allowed,
    split_inputs,
    split_outputs,
    task_size,
)

Tensors = Mapping[str, np.ndarray]
FAST = settings(max_examples=60, deadline=None)


def model(inputs: Tensors) -> dict[str, np.ndarray]:
    """A row-wise model: output row i depends on input row i only, like any batchable graph."""
    x, k, s = inputs["x"], inputs["k"], inputs["s"]
    per_row = (x.shape[0],) + (1,) * (x.ndim - 1)
    return {
        "scaled": x * 2 + k.reshape(per_row).astype(x.dtype),
        "total": x.sum(axis=tuple(range(1, x.ndim))),
        "tagged": s + b"|",
        "k": k,
    }


def pad_alone(array: np.ndarray, inner: tuple[int, ...]) -> np.ndarray:
    """Reference for variable-length padding: each dim 1..n padded at its end with the tensor's
    own first element. numpy's pad works on element indices (index 0 is the first element), so
    strings keep every byte."""
    widths = [(0, 0)] + [
        (0, want - have) for have, want in zip(array.shape[1:], inner, strict=True)
    ]
    indices = np.arange(array.size).reshape(array.shape)
    return array.reshape(-1)[np.pad(indices, widths, constant_values=0)]


def random_tensors(
    rng: np.random.Generator,
    rows: int,
    x_inner: tuple[int, ...],
    s_inner: tuple[int, ...],
    dtype: type,
) -> dict[str, np.ndarray]:
    x = rng.integers(-50, 50, size=(rows, *x_inner)).astype(dtype)
    words = np.array([b"", b"a", b"bc", b"\xff\x00", b"long string"], dtype=object)
    s = words[rng.integers(0, len(words), size=(rows, *s_inner))]
    k = rng.integers(0, 9, size=rows).astype(np.int64)
    return {"x": x, "k": k, "s": s}


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[dict[str, np.ndarray]], tuple[int, ...], bool]:
    pad = draw(st.booleans())
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
    x_rank = draw(st.integers(1, 3))  # non-batch dims of x
    s_rank = draw(st.integers(0, 2))
    dims = st.integers(1, 3)
    x_shared = tuple(draw(dims) for _ in range(x_rank))
    s_shared = tuple(draw(dims) for _ in range(s_rank))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    tasks = []
    for rows in sizes:
        x_inner = tuple(draw(dims) for _ in range(x_rank)) if pad else x_shared
        s_inner = tuple(draw(dims) for _ in range(s_rank)) if pad else s_shared
        tasks.append(random_tensors(rng, rows, x_inner, s_inner, dtype))
    allowed = tuple(sorted(draw(st.sets(st.integers(1, 24), max_size=4))))
    return tasks, allowed, pad


def assert_same(actual: Tensors, expected: Tensors) -> None:
    assert actual.keys() == expected.keys()
    for name in expected:
        assert actual[name].dtype == expected[name].dtype, name
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


@FAST
@given(batches())
def test_split_run_merge_is_each_task_alone(
    batch: tuple[list[dict[str, np.ndarray]], tuple[int, ...], bool],
) -> None:
    tasks, allowed, pad = batch
    sizes = [task_size(task) for task in tasks]
    rows = sum(sizes)
    batch_size = round_up_to_allowed(rows, allowed)
    merged = merge_inputs(tasks, batch_size, pad)
    assert {name: array.shape[0] for name, array in merged.items()} == dict.fromkeys(
        merged, batch_size
    )
    pieces = split_outputs(model(merged), sizes, batch_size)
    assert len(pieces) == len(tasks)
    for task, piece in zip(tasks, pieces, strict=True):
        if pad:
            # Alone, a task sees its tensors padded to the batch's dims, as upstream runs it.
            task = {name: pad_alone(array, merged[name].shape[1:]) for name, array in task.items()}
        assert_same(piece, model(task))


@FAST
@given(batches())
def test_padding_rows_copy_the_last_tasks_first_row(
    batch: tuple[list[dict[str, np.ndarray]], tuple[int, ...], bool],
) -> None:
    tasks, allowed, pad = batch
    rows = sum(task_size(task) for task in tasks)
    last = task_size(tasks[-1])
    batch_size = max(round_up_to_allowed(rows, allowed), rows + 2)
    merged = merge_inputs(tasks, batch_size, pad)
    if last == 0:
        return
    for name, array in merged.items():
        first_row_of_last = array[rows - last : rows - last + 1]
        assert (array[rows:] == first_row_of_last).all(), name
        alone = tasks[-1][name][:1]
        assert (first_row_of_last[tuple(slice(0, n) for n in alone.shape)] == alone).all(), name


@FAST
@given(batches(), st.data())
def test_split_task_runs_like_the_whole(
    batch: tuple[list[dict[str, np.ndarray]], tuple[int, ...], bool], data: st.DataObject
) -> None:
    task = batch[0][0]
    rows = task_size(task)
    cuts = sorted(data.draw(st.lists(st.integers(0, rows), max_size=3)))
    sizes = [stop - start for start, stop in zip([0, *cuts], [*cuts, rows], strict=True)]
    pieces = split_inputs(task, sizes)
    assert [task_size(piece) for piece in pieces] == sizes
    for piece in pieces:
        for name, array in piece.items():
            assert array.base is task[name] or array is task[name]  # views, not copies
    assert_same(concat_outputs([model(piece) for piece in pieces]), model(task))


@pytest.mark.parametrize(
    ("size", "allowed", "expected"),
    [(5, (), 5), (5, (4, 8, 16), 8), (8, (4, 8, 16), 8), (1, (4, 8, 16), 4), (17, (4, 8, 16), 17)],
)
def test_round_up_to_allowed(size: int, allowed: tuple[int, ...], expected: int) -> None:
    assert round_up_to_allowed(size, allowed) == expected


def test_one_task_without_padding_is_not_copied() -> None:
    task = {"x": np.arange(6.0).reshape(3, 2), "s": np.array([b"a", b"b", b"c"], dtype=object)}
    merged = merge_inputs([task], 3, pad_variable_length=True)
    assert all(merged[name] is task[name] for name in task)
    outputs = {"y": np.arange(3)}
    (piece,) = split_outputs(outputs, [3], 3)
    assert piece["y"] is outputs["y"]
    (whole,) = split_inputs(task, [3])
    assert whole["x"] is task["x"]
    assert concat_outputs([outputs])["y"] is outputs["y"]


def test_split_outputs_are_views() -> None:
    outputs = {"y": np.arange(10).reshape(5, 2)}
    first, second = split_outputs(outputs, [2, 1], 5)
    np.testing.assert_array_equal(first["y"], [[0, 1], [2, 3]])
    np.testing.assert_array_equal(second["y"], [[4, 5]])
    assert np.shares_memory(first["y"], outputs["y"])


def test_variable_length_strings_pad_with_their_first_element() -> None:
    short = {"s": np.array([[b"p", b"q"]], dtype=object)}
    long = {"s": np.array([[b"a", b"b", b"c"], [b"d", b"e", b"f"]], dtype=object)}
    merged = merge_inputs([short, long], 4, pad_variable_length=True)["s"]
    assert merged.dtype == object
    assert merged.tolist() == [
        [b"p", b"q", b"p"],
        [b"a", b"b", b"c"],
        [b"d", b"e", b"f"],
        [b"a", b"b", b"c"],
    ]


def test_numeric_padding_in_every_dim() -> None:
    a = {"x": np.array([[[7, 1]]], dtype=np.int32)}  # 1x1x2
    b = {"x": np.zeros((1, 2, 1), dtype=np.int32)}  # 1x2x1
    merged = merge_inputs([a, b], 2, pad_variable_length=True)["x"]
    assert merged.shape == (2, 2, 2)
    np.testing.assert_array_equal(merged[0], [[7, 1], [7, 7]])
    np.testing.assert_array_equal(merged[1], [[0, 0], [0, 0]])


def test_string_kinds_merge_into_objects() -> None:
    a = {"s": np.array([b"ab"], dtype="S2")}
    b = {"s": np.array([b"xyz"], dtype=object)}
    merged = merge_inputs([a, b], 2, pad_variable_length=False)["s"]
    assert merged.dtype == object
    assert merged.tolist() == [b"ab", b"xyz"]


def test_only_zero_row_tasks_still_fill_the_batch() -> None:
    tasks = [{"x": np.zeros((0, 2), np.float32), "s": np.zeros((0,), dtype=object)}]
    merged = merge_inputs(tasks, 4, pad_variable_length=False)
    np.testing.assert_array_equal(merged["x"], np.zeros((4, 2), np.float32))
    assert merged["s"].tolist() == [b""] * 4
    pieces = split_outputs(merged, [0], 4)
    assert pieces[0]["x"].shape == (0, 2)


# --- errors, with upstream's words -------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "Batching Run() must have at least one input tensor"),
        (
            {"a": np.zeros(2), "b": np.zeros(())},
            "Batching Run() input tensors must have at least one dimension",
        ),
        (
            {"a": np.zeros(2), "b": np.zeros((3, 1))},
            "Batching Run() input tensors must have equal 0th-dimension size",
        ),
    ],
)
def test_task_size_errors(inputs: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        task_size(inputs)
    assert err.value.message == message


def test_task_size() -> None:
    assert task_size({"a": np.zeros((3, 4)), "b": np.zeros(3, dtype=object)}) == 3
    assert task_size({"a": np.zeros((0, 4))}) == 0


MISMATCH = (
    "Tensors with name 'x' from different tasks have different shapes and padding is turned off. "
    "Set pad_variable_length_inputs to true, or ensure that all tensors with the same name have "
    "equal dimensions starting with the first dim."
)


@pytest.mark.parametrize("other", [np.zeros((1, 3)), np.zeros((1, 2, 1)), np.zeros(1)])
def test_shapes_must_match_without_padding(other: np.ndarray) -> None:
    tasks = [{"x": np.zeros((2, 2))}, {"x": other}]
    with pytest.raises(FailedPreconditionError) as err:
        merge_inputs(tasks, 3, pad_variable_length=False)
    assert err.value.message == MISMATCH


def test_padding_errors() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        merge_inputs([{"x": np.zeros((1,) * 7)}], 1, pad_variable_length=True)
    assert err.value.message == "Only tensors with rank from 1 to 6 can be padded."
    # Rank 7 is fine when padding is off.
    assert merge_inputs([{"x": np.zeros((1,) * 7)}], 2, pad_variable_length=False)["x"].shape == (
        2,
        *(1,) * 6,
    )
    with pytest.raises(InvalidArgumentError) as err:
        merge_inputs(
            [{"x": np.zeros((1, 0))}, {"x": np.zeros((1, 2))}], 2, pad_variable_length=True
        )
    assert err.value.message == "Got empty tensor in batch of non-empty tensors."
    with pytest.raises(FailedPreconditionError, match="different ranks"):
        merge_inputs([{"x": np.zeros((1, 2))}, {"x": np.zeros((1, 2, 2))}], 2, True)


def test_dtypes_must_match() -> None:
    tasks = [{"x": np.zeros(1, np.float32)}, {"x": np.zeros(1, np.float64)}]
    with pytest.raises(InternalError) as err:
        merge_inputs(tasks, 2, pad_variable_length=False)
    assert err.value.message == (
        "Tensor concat operation failed: INVALID_ARGUMENT: Cannot concatenate tensors that have "
        "different data types. Got float and double."
    )
    with pytest.raises(InvalidArgumentError) as err:
        concat_outputs([{"y": np.zeros(1, np.int32)}, {"y": np.zeros(1, np.int64)}])
    assert err.value.message == (
        "Cannot concatenate tensors that have different data types. Got int32 and int64."
    )


def test_tasks_must_share_input_names() -> None:
    with pytest.raises(InternalError, match="does not conform to batch signature"):
        merge_inputs([{"x": np.zeros(1)}, {"y": np.zeros(1)}], 2, pad_variable_length=False)
    with pytest.raises(InternalError):
        merge_inputs([], 1, pad_variable_length=False)
    with pytest.raises(InternalError):
        merge_inputs([{"x": np.zeros(3)}], 2, pad_variable_length=False)


def test_split_outputs_errors() -> None:
    with pytest.raises(FailedPreconditionError) as err:
        split_outputs({"y": np.zeros(())}, [1], 1)
    assert err.value.message == "Batched output tensor has 0 dimensions"
    with pytest.raises(FailedPreconditionError) as err:
        split_outputs({"y": np.zeros(3)}, [1, 1], 4)
    assert err.value.message == (
        "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension sizes "
        "of the input tensors"
    )
    with pytest.raises(InternalError):
        split_outputs({"y": np.zeros(3)}, [2, 2], 3)


def test_split_inputs_and_concat_errors() -> None:
    with pytest.raises(InternalError, match="do not add up"):
        split_inputs({"x": np.zeros(4)}, [1, 2])
    with pytest.raises(
        FailedPreconditionError, match="'y'.*different shapes: \\[1,2\\] and \\[1,3\\]"
    ):
        concat_outputs([{"y": np.zeros((1, 2))}, {"y": np.zeros((1, 3))}])
    with pytest.raises(InvalidArgumentError, match="zero-dimensional"):
        concat_outputs([{"y": np.zeros(())}, {"y": np.zeros(())}])
