"""TensorProto decoding against TensorFlow's own decoder, and encode/decode round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from protos.tensorflow.core.framework import tensor_pb2, types_pb2
from runtime import dtypes, tensor_codec
from runtime.dtypes import DataType
from runtime.errors import (
    InvalidArgumentError,
    ResourceExhaustedError,
    UnimplementedError,
    from_memory_error,
)
from runtime.tensor_codec import TensorBudget, from_ndarray, make_tensor_proto, to_ndarray
from tests.runtime.checkpoint.recorded import assert_same_tensor, unpack_array

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tensor_protos.npz"


def _load() -> dict[str, np.ndarray]:
    if not FIXTURE.exists():
        pytest.fail(
            f"{FIXTURE} is missing: run `.venv-tf/bin/python fixtures/record_tensor_protos.py`"
        )
    with np.load(FIXTURE, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


RECORDED = _load()
CASES = sorted({key.split("/")[0] for key in RECORDED})


def _proto(case: str) -> tensor_pb2.TensorProto:
    return tensor_pb2.TensorProto.FromString(RECORDED[f"{case}/proto"].tobytes())


def test_fixture_covers_every_representable_dtype() -> None:
    recorded = {int(RECORDED[k]) for k in RECORDED if k.endswith("/dtype")}
    wanted = {
        int(dt)
        for dt in DataType
        if dt not in (DataType.DT_INVALID, DataType.DT_RESOURCE, DataType.DT_VARIANT)
    }
    assert wanted <= recorded, sorted(DataType(d).name for d in wanted - recorded)


@pytest.mark.parametrize("case", CASES)
def test_decodes_like_tensorflow(case: str) -> None:
    proto = _proto(case)
    if f"{case}/error" in RECORDED:
        with pytest.raises((InvalidArgumentError, UnimplementedError)):
            to_ndarray(proto)
        return
    assert_same_tensor(to_ndarray(proto), unpack_array(RECORDED, case))


# make_tensor_proto lets 2 values describe 5 elements; ours refuses anything but 1 or all.
ENCODE_CASES = [c for c in CASES if c.startswith("made_") and c != "made_f32_fewer_values"]


@pytest.mark.parametrize("case", ENCODE_CASES)
def test_encodes_like_make_tensor_proto(case: str) -> None:
    """Our encoder picks the same representation TensorFlow's make_tensor_proto does."""
    theirs = _proto(case)
    value = to_ndarray(theirs)
    shape = [d.size for d in theirs.tensor_shape.dim]
    ours = make_tensor_proto(
        value.reshape(-1)[:1] if _stored_values(theirs) == 1 else value,
        dtype=theirs.dtype,
        shape=shape,
        use_tensor_content=bool(theirs.tensor_content),
    )
    assert ours == theirs


def _stored_values(proto: tensor_pb2.TensorProto) -> int:
    if proto.tensor_content:
        return -1
    for field in (
        "float_val",
        "double_val",
        "int_val",
        "int64_val",
        "uint32_val",
        "uint64_val",
        "bool_val",
        "half_val",
        "string_val",
    ):
        if len(getattr(proto, field)):
            return len(getattr(proto, field))
    if proto.float8_val:
        return len(proto.float8_val)
    for field in ("scomplex_val", "dcomplex_val"):
        if len(getattr(proto, field)):
            return len(getattr(proto, field)) // 2
    return 0


def _sample(dt: DataType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    np_dtype = dtypes.to_numpy(dt)
    n = int(np.prod(shape))
    if dt == DataType.DT_STRING:
        flat = np.empty(n, dtype=object)
        flat[:] = [rng.bytes(int(rng.integers(0, 300))) + b"\x00" for _ in range(n)]
        return flat.reshape(shape)
    if dt == DataType.DT_BOOL:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dt in (DataType.DT_INT4, DataType.DT_UINT4):
        info = ml_dtypes.iinfo(np_dtype)
        return (
            rng.integers(int(info.min), int(info.max), n, endpoint=True)
            .astype(np_dtype)
            .reshape(shape)
        )
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        return rng.integers(info.min, info.max, n, dtype=np_dtype, endpoint=True).reshape(shape)
    if np_dtype.kind == "c":
        return (
            (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np_dtype).reshape(shape)
        )
    return (rng.standard_normal(n) * 100).astype(np_dtype).reshape(shape)


ROUND_TRIP_DTYPES = [
    dt
    for dt in DataType
    if dt not in (DataType.DT_INVALID, DataType.DT_RESOURCE, DataType.DT_VARIANT)
]
SHAPES = [(), (1,), (7,), (2, 3), (0,), (3, 0, 2), (2, 1, 1, 4)]


@pytest.mark.parametrize("use_tensor_content", [True, False])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dt", ROUND_TRIP_DTYPES, ids=lambda dt: dt.name)
def test_round_trip(dt: DataType, shape: tuple[int, ...], use_tensor_content: bool) -> None:
    value = _sample(dt, shape, np.random.default_rng(int(dt) * 31 + len(shape)))
    proto = from_ndarray(value, dt, use_tensor_content=use_tensor_content)
    wire = tensor_pb2.TensorProto.FromString(proto.SerializeToString())
    assert wire.dtype == int(dt)
    assert [d.size for d in wire.tensor_shape.dim] == list(shape)
    assert_same_tensor(to_ndarray(wire), value)


def test_tensor_content_decodes_to_a_read_only_view() -> None:
    value = np.arange(1 << 20, dtype=np.float32)
    proto = from_ndarray(value)
    assert len(proto.tensor_content) == value.nbytes
    out = to_ndarray(proto)
    assert not out.flags.writeable
    np.testing.assert_array_equal(out, value)


def test_typed_fields_are_used_when_asked() -> None:
    proto = from_ndarray(np.array([1.0, 2.0], np.float16), use_tensor_content=False)
    assert not proto.tensor_content
    assert list(proto.half_val) == [0x3C00, 0x4000]
    proto = from_ndarray(np.array([1 + 2j], np.complex64), use_tensor_content=False)
    assert list(proto.scomplex_val) == [1.0, 2.0]
    proto = from_ndarray(np.array([3, -4], ml_dtypes.int4))
    assert list(proto.int_val) == [3, -4] and not proto.tensor_content


def test_strings_accept_str_and_keep_nul_bytes() -> None:
    proto = make_tensor_proto(["h\u00e9", b"a\x00", b"\x00"])
    assert proto.dtype == types_pb2.DT_STRING
    assert list(proto.string_val) == ["h\u00e9".encode(), b"a\x00", b"\x00"]
    assert to_ndarray(proto).tolist() == ["h\u00e9".encode(), b"a\x00", b"\x00"]


def test_make_tensor_proto_broadcasts_one_value() -> None:
    proto = make_tensor_proto(2.5, dtypes.DataType.DT_FLOAT, [2, 3])
    assert list(proto.float_val) == [2.5]
    np.testing.assert_array_equal(to_ndarray(proto), np.full((2, 3), 2.5, np.float32))
    with pytest.raises(InvalidArgumentError, match="cannot fill shape"):
        make_tensor_proto([1.0, 2.0], DataType.DT_FLOAT, [3])


def test_unrepresentable_dtypes_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="DT_INVALID"):
        to_ndarray(tensor_pb2.TensorProto(dtype=types_pb2.DT_INVALID))
    with pytest.raises(UnimplementedError, match="DT_VARIANT"):
        to_ndarray(tensor_pb2.TensorProto(dtype=types_pb2.DT_VARIANT))
    with pytest.raises(UnimplementedError, match="DT_RESOURCE"):
        from_ndarray(np.zeros(2), DataType.DT_RESOURCE)
    with pytest.raises(InvalidArgumentError):
        from_ndarray([1, "a"], DataType.DT_INT32)


@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64, np.int64, np.uint16, np.complex64]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    st.booleans(),
)
def test_round_trip_property(value: np.ndarray, use_tensor_content: bool) -> None:
    proto = tensor_pb2.TensorProto.FromString(
        from_ndarray(value, use_tensor_content=use_tensor_content).SerializeToString()
    )
    assert_same_tensor(to_ndarray(proto), value)


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_string_round_trip_property(items: list[bytes]) -> None:
    value = np.empty(len(items), dtype=object)
    value[:] = items
    assert_same_tensor(to_ndarray(from_ndarray(value)), value)


# -- limits: dimensions, element counts and bytes are checked before anything is allocated


def _shaped(dt: Any, shape: list[int], **fields: Any) -> tensor_pb2.TensorProto:
    proto = tensor_pb2.TensorProto(dtype=dt, **fields)
    proto.tensor_shape.SetInParent()
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


def test_a_tiny_message_for_a_huge_tensor_is_refused_before_allocating() -> None:
    proto = _shaped(types_pb2.DT_FLOAT, [2**40, 8], float_val=[1.0])
    with pytest.raises(ResourceExhaustedError) as info:
        to_ndarray(proto, max_bytes=2**31 - 1)
    assert info.value.message == (
        "Tensor of shape [1099511627776,8] and type float needs 35184372088832 bytes, more than "
        "the 2147483647 allowed per request"
    )


def test_without_a_limit_what_numpy_cannot_address_is_still_refused() -> None:
    with pytest.raises(ResourceExhaustedError) as info:
        to_ndarray(_shaped(types_pb2.DT_FLOAT, [2**61, 2], float_val=[1.0]))
    assert info.value.message == (
        f"OOM when allocating tensor with shape[{2**61},2] and type float"
    )


def test_a_memory_error_while_decoding_is_resource_exhausted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_memory(*args: Any) -> np.ndarray:
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(tensor_codec, "_from_fields", no_memory)
    with pytest.raises(ResourceExhaustedError) as info:
        to_ndarray(_shaped(types_pb2.DT_FLOAT, [1000, 3], float_val=[1.0]))
    assert info.value.message == "OOM when allocating tensor with shape[1000,3] and type float"


def test_more_than_64_dimensions_is_invalid() -> None:
    message = "Tensor has 65 dimensions, more than the 64 allowed"
    with pytest.raises(InvalidArgumentError, match=f"^{message}$"):
        to_ndarray(_shaped(types_pb2.DT_FLOAT, [1] * 65, float_val=[1.0]))
    # raw bytes that exactly fill the shape take a shortcut; it checks the rank too
    with pytest.raises(InvalidArgumentError, match=f"^{message}$"):
        to_ndarray(_shaped(types_pb2.DT_FLOAT, [1] * 65, tensor_content=b"\0" * 4))
    with pytest.raises(InvalidArgumentError, match="Tensor has 1000 dimensions"):
        to_ndarray(_shaped(types_pb2.DT_STRING, [1] * 1000))


def test_64_dimensions_are_fine() -> None:
    for proto in (
        _shaped(types_pb2.DT_FLOAT, [1] * 64, float_val=[2.5]),
        _shaped(types_pb2.DT_FLOAT, [1] * 64, tensor_content=np.float32(2.5).tobytes()),
    ):
        out = to_ndarray(proto, max_bytes=4)
        assert out.shape == (1,) * 64 and out.reshape(-1).tolist() == [2.5]


def test_an_element_count_past_int64_is_invalid() -> None:
    with pytest.raises(InvalidArgumentError, match="has too many elements"):
        to_ndarray(_shaped(types_pb2.DT_FLOAT, [2**32, 2**32], float_val=[1.0]))
    with pytest.raises(InvalidArgumentError, match="has too many elements"):
        to_ndarray(_shaped(types_pb2.DT_INT8, [2**62] * 64), max_bytes=10)


def test_an_empty_shape_numpy_cannot_represent_is_invalid() -> None:
    with pytest.raises(InvalidArgumentError, match="cannot be represented"):
        to_ndarray(_shaped(types_pb2.DT_FLOAT, [0, 2**62]))
    # TensorFlow ignores the content of a tensor with no elements
    out = to_ndarray(_shaped(types_pb2.DT_FLOAT, [0, 3], tensor_content=b"\0" * 8), max_bytes=0)
    assert out.shape == (0, 3)


def test_one_budget_is_shared_by_the_tensors_of_a_request() -> None:
    budget = TensorBudget(100)
    first = to_ndarray(from_ndarray(np.zeros(15, np.float32)), max_bytes=budget)
    assert first.shape == (15,) and budget.remaining == 40
    second = _shaped(types_pb2.DT_FLOAT, [3, 5], float_val=[1.0])
    with pytest.raises(ResourceExhaustedError) as info:
        to_ndarray(second, max_bytes=budget)
    assert info.value.message == (
        "Tensor of shape [3,5] and type float needs 60 bytes, more than the 40 left of the 100 "
        "allowed per request"
    )
    assert budget.remaining == 40  # a refused tensor takes nothing
    to_ndarray(_shaped(types_pb2.DT_FLOAT, [2, 5], float_val=[1.0]), max_bytes=budget)
    assert budget.remaining == 0
    # an int is a fresh limit for the one tensor
    assert to_ndarray(second, max_bytes=60).shape == (3, 5)


def test_string_tensors_are_charged_their_bytes_and_a_pointer_per_element() -> None:
    proto = _shaped(types_pb2.DT_STRING, [1000], string_val=[b"abc"])
    with pytest.raises(ResourceExhaustedError, match="needs 8003 bytes"):
        to_ndarray(proto, max_bytes=8002)
    out = to_ndarray(proto, max_bytes=8003)
    assert out.shape == (1000,) and set(out.tolist()) == {b"abc"}
    content = from_ndarray(np.array([b"ab", b"cde"], dtype=object)).SerializeToString()
    packed = tensor_pb2.TensorProto.FromString(content)
    packed.tensor_content = b"\x02\x03abcde"
    packed.ClearField("string_val")
    with pytest.raises(ResourceExhaustedError, match="needs 23 bytes"):
        to_ndarray(packed, max_bytes=22)
    assert to_ndarray(packed, max_bytes=23).tolist() == [b"ab", b"cde"]


def test_string_content_too_short_for_its_shape_is_invalid_before_any_work() -> None:
    proto = _shaped(types_pb2.DT_STRING, [2**40], tensor_content=b"\x00")
    with pytest.raises(InvalidArgumentError, match="could not read 1099511627776 lengths"):
        to_ndarray(proto, max_bytes=1 << 20)


def test_short_value_lists_still_repeat_their_last_value() -> None:
    np.testing.assert_array_equal(
        to_ndarray(_shaped(types_pb2.DT_INT32, [2, 3], int_val=[7, 8]), max_bytes=24),
        [[7, 8, 8], [8, 8, 8]],
    )
    assert to_ndarray(_shaped(types_pb2.DT_STRING, [3], string_val=[b"a", b"b"])).tolist() == [
        b"a", b"b", b"b"
    ]
    assert to_ndarray(_shaped(types_pb2.DT_STRING, [2])).tolist() == [b"", b""]


def test_from_memory_error() -> None:
    err = from_memory_error(MemoryError(), "tensor with shape[2] and type float")
    assert isinstance(err, ResourceExhaustedError)
    assert err.message == "OOM when allocating tensor with shape[2] and type float"
    assert from_memory_error(MemoryError("no room")).message == "OOM when allocating memory: no room"
    assert from_memory_error(MemoryError()).message == "OOM"
