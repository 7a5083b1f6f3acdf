"""array_ops kernels against TensorFlow's recorded results, plus the ops tf.raw_ops cannot run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, OpError
from runtime.kernels.registry import instantiate
from runtime.optimize import internal_ops  # noqa: F401 - defines the rewrites' internal ops
from tests.runtime.kernels.cases_array_ops import CASES
from tests.runtime.kernels.check import check_case, kernel_attrs, load_recording

RECORDING = load_recording("array_ops")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_tensorflow(case) -> None:
    check_case(case, RECORDING)


@pytest.mark.parametrize(
    "case", [c for c in CASES if f"{c.name}/error" in RECORDING], ids=lambda c: c.name
)
def test_rejections_are_op_errors(case) -> None:
    # check_case accepts any exception; TensorFlow's rejections must be status errors here.
    attrs = kernel_attrs(case)
    with pytest.raises(OpError):
        instantiate(case.op, attrs, num_outputs=2)(*case.flat_inputs())


# --- ops tf.raw_ops cannot run eagerly --------------------------------------------------------


def test_const_returns_its_value() -> None:
    value = np.array([[1.5, 2.0]], np.float32)
    out = instantiate("Const", {"value": value, "dtype": DataType.DT_FLOAT})()
    np.testing.assert_array_equal(out, value)
    assert out.dtype == np.float32
    strings = np.array([b"a", b""], dtype=object)
    assert instantiate("Const", {"value": strings, "dtype": DataType.DT_STRING})().tolist() == [
        b"a",
        b"",
    ]


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (None, "You must feed a value for placeholder tensor 'x' with dtype float"),
        (
            (-1, 3),
            "You must feed a value for placeholder tensor 'x' with dtype float and shape [?,3]",
        ),
        ((), "You must feed a value for placeholder tensor 'x' with dtype float and shape []"),
    ],
)
def test_unfed_placeholder_is_an_error(shape, message) -> None:
    attrs = {"dtype": DataType.DT_FLOAT, "shape": shape}
    fn = instantiate("Placeholder", attrs, name="x")
    with pytest.raises(InvalidArgumentError) as err:
        fn()
    assert str(err.value) == message


def test_no_op_returns_nothing() -> None:
    assert instantiate("NoOp")() is None


def test_definitions_carry_tensorflow_defaults() -> None:
    from runtime.ops import OP_REGISTRY, load_all_op_definitions

    load_all_op_definitions()
    assert OP_REGISTRY.get("SplitV").attr_defaults["Tlen"] == DataType.DT_INT64
    assert OP_REGISTRY.get("OneHot").attr_defaults == {"axis": -1, "TI": DataType.DT_INT64}
    assert OP_REGISTRY.get("Unpack").num_outputs({"num": 3}) == 3
    assert OP_REGISTRY.get("Unique").output_ranges({}) == {"y": (0, 1), "idx": (1, 2)}
    assert OP_REGISTRY.get("CheckNumerics").stateful


def test_strided_slice_cache_keys_on_rank_and_spec() -> None:
    fn = instantiate("StridedSlice", {"shrink_axis_mask": 1})
    spec = [np.array([1], np.int32), np.array([2], np.int32), np.array([1], np.int32)]
    np.testing.assert_array_equal(fn(np.arange(4), *spec), np.array(1))
    np.testing.assert_array_equal(fn(np.arange(6).reshape(3, 2), *spec), [2, 3])
    spec[0] = np.array([-1], np.int32)
    np.testing.assert_array_equal(fn(np.arange(6).reshape(3, 2), *spec), [4, 5])


# --- StridedSlice against numpy's own indexing of the equivalent Python key ---------------------

_BOUND = st.integers(-7, 7)
_ITEM = st.one_of(
    st.integers(-6, 5),
    st.builds(
        slice,
        st.none() | _BOUND,
        st.none() | _BOUND,
        st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3]),
    ),
    st.none(),
    st.just(Ellipsis),
)


def _tf_spec(key: tuple) -> tuple[list[np.ndarray], dict[str, int]]:
    """The StridedSlice inputs and masks TensorFlow's ``tensor[key]`` builds."""
    begin, end, strides = [], [], []
    masks = dict.fromkeys(
        ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"), 0
    )
    for i, item in enumerate(key):
        bit = 1 << i
        b, e, s = 0, 0, 1
        if item is Ellipsis:
            masks["ellipsis_mask"] |= bit
        elif item is None:
            masks["new_axis_mask"] |= bit
        elif isinstance(item, int):
            b, e = item, item + 1
            masks["shrink_axis_mask"] |= bit
        else:
            s = 1 if item.step is None else item.step
            if item.start is None:
                masks["begin_mask"] |= bit
            else:
                b = item.start
            if item.stop is None:
                masks["end_mask"] |= bit
            else:
                e = item.stop
        begin.append(b)
        end.append(e)
        strides.append(s)
    return [np.array(v, np.int64).reshape(-1) for v in (begin, end, strides)], masks


@settings(max_examples=300, deadline=None)
@given(
    shape=st.lists(st.integers(0, 4), max_size=4),
    key=st.lists(_ITEM, max_size=5).filter(lambda k: k.count(Ellipsis) <= 1),
)
def test_strided_slice_matches_python_indexing(shape: list[int], key: list) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    spec, masks = _tf_spec(tuple(key))
    fn = instantiate("StridedSlice", masks)
    try:
        expected = x[tuple(key)]
    except IndexError:
        with pytest.raises(InvalidArgumentError):
            fn(x, *spec)
        return
    out = fn(x, *spec)
    assert isinstance(out, np.ndarray)
    assert out.shape == np.shape(expected)
    np.testing.assert_array_equal(out, expected)


# --- internal ops the graph rewrites emit ---------------------------------------------------


@pytest.mark.parametrize("baked_axis", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_wrap_negative_counts_negative_ids_from_the_end(baked_axis, index_dtype) -> None:
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    axis = np.array(0, np.int32)
    kernel = instantiate("_GatherWrapNegative", {"batch_dims": 0},
                         constant_inputs={2: axis} if baked_axis else None)
    ids = np.array([[0, -1], [4, -5]], index_dtype)
    wrapped = np.where(ids < 0, ids + 5, ids)
    expected = instantiate("GatherV2", {"batch_dims": 0})(table, wrapped, axis)
    np.testing.assert_array_equal(kernel(table, ids, axis), expected)
    for bad, shown in ((5, 5), (-6, -1)):  # reported after wrapping, as GatherV2 sees it
        with pytest.raises(InvalidArgumentError, match=rf"= {shown} is not in \[0, 5\)"):
            kernel(table, np.array([1, bad], index_dtype), axis)
    columns = kernel(table, np.array([-1, 0], index_dtype), np.array(1, np.int32))
    if not baked_axis:
        np.testing.assert_array_equal(columns, table[:, [3, 0]])


@pytest.mark.parametrize("template, shape, expected", [
    (((1, (0,)), (4, ())), (3, 2, 2), (3, 4)),
    (((1, (0,)), (-1, ())), (3, 2, 5), (3, 10)),
    (((1, (0, 1)), (1, (2,))), (2, 3, 4), (6, 4)),
    (((2, (0,)), (-1, ())), (4, 6), (8, 3)),
    (((1, (0,)), (-1, ())), (0, 2, 5), (0, 10)),  # TensorFlow infers -1 next to a zero
])
def test_reshape_by_template(template, shape, expected) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out = instantiate("_ReshapeByTemplate", {"template": template})(x)
    assert out.shape == expected
    np.testing.assert_array_equal(out.reshape(-1), x.reshape(-1))


def test_reshape_by_template_keeps_reshape_errors() -> None:
    kernel = instantiate("_ReshapeByTemplate", {"template": ((1, (0,)), (4, ()))})
    with pytest.raises(InvalidArgumentError, match="requested shape has 12"):
        kernel(np.zeros((3, 5), np.float32))


# --- _RepeatAxes: np.repeat along several axes --------------------------------------------------


def _repeat_reference(x, repeats):
    for axis, r in enumerate(repeats):
        x = np.repeat(x, r, axis=axis)
    return x


@pytest.mark.parametrize("shape, repeats", [
    ((256, 15, 15, 3), (1, 2, 2, 1)),  # nearest upsampling at a large batch: built in slices
    ((64, 20, 20, 3), (1, 3, 2, 1)),
    ((40, 33, 17, 5), (2, 1, 3, 2)),  # the first axis repeated too
    ((70, 30, 30, 16), (1, 2, 2, 1)),  # wide channels: one broadcast copy per axis
    ((3, 5, 7, 2), (1, 2, 3, 1)),  # small: np.repeat
    ((200, 9, 9, 1), (1, 1, 4, 1)),
    ((300, 12, 12, 2), (1, 0, 2, 1)),  # a zero count empties the axis
    ((0, 4, 4, 3), (1, 2, 2, 1)),
    ((5000, 3), (1, 2)),
    ((), ()),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
def test_repeat_axes_matches_np_repeat(shape, repeats, dtype) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).astype(dtype)
    kernel = instantiate("_RepeatAxes", {"repeats": repeats})
    want = _repeat_reference(x, repeats)
    got = kernel(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if x.ndim == 4:  # a strided view (a crop, a transpose) repeats the same
        view = x[:, ::-1]
        np.testing.assert_array_equal(kernel(view), _repeat_reference(view, repeats))


def test_repeat_axes_checks_rank_and_counts() -> None:
    with pytest.raises(InvalidArgumentError, match="rank 3"):
        instantiate("_RepeatAxes", {"repeats": (1, 2, 2, 1)})(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(OpError, match=">= 0"):
        instantiate("_RepeatAxes", {"repeats": (1, -1)})
