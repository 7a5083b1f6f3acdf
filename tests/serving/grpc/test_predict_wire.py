"""The hand-written PredictResponse bytes parse to exactly the message protobuf would build, for
every dtype and shape, with typed fields and with tensor_content; and the fast tensor decoding
equals ``to_ndarray``."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from protos.tensorflow_serving.apis import predict_pb2
from runtime.errors import InvalidArgumentError
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.grpc.predict_wire import PredictResponseWriter
from serving.requests import proto_convert as convert
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import PredictResponse

NUMERIC = [np.float32, np.float64, np.complex64, np.complex128, np.bool_, np.int8, np.int16,
           np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16]
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
SPECS = [ModelSpec("m", 3, None, "serving_default"), ModelSpec("other", 0, None, ""),
         ModelSpec("m", None, None, "sig")]


def arrays(dtype: Any) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(dtype, SHAPES)


def strings() -> st.SearchStrategy[np.ndarray]:
    def as_objects(values: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out.reshape(shape)

    return SHAPES.flatmap(lambda shape: st.lists(
        st.binary(max_size=6), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)),
    ).map(lambda values: as_objects(values, shape)))


BFLOAT16 = arrays(np.float32).map(lambda a: a.astype(ml_dtypes.bfloat16))
OUTPUTS = st.dictionaries(
    st.text(min_size=1, max_size=5),
    st.one_of([arrays(t) for t in NUMERIC] + [BFLOAT16, strings()]),
    min_size=1, max_size=3,
)


def written(response: PredictResponse, tensor_content: bool, writer: Any = None) -> Any:
    writer = writer or PredictResponseWriter(tensor_content)
    return predict_pb2.PredictResponse.FromString(writer.write(response))


@settings(max_examples=300, deadline=None)
@given(OUTPUTS, st.sampled_from(SPECS), st.booleans())
def test_written_bytes_parse_to_the_built_message(
    outputs: dict[str, np.ndarray], spec: ModelSpec, tensor_content: bool
) -> None:
    response = PredictResponse(spec, dict(sorted(outputs.items())))
    expected = convert.predict_response(response, tensor_content=tensor_content)
    writer = PredictResponseWriter(tensor_content)
    # Twice: the second time from the kept framing.
    assert written(response, tensor_content, writer) == expected
    assert written(response, tensor_content, writer) == expected


@pytest.mark.parametrize("tensor_content", [False, True])
@pytest.mark.parametrize("array", [
    np.arange(4, dtype=np.float32).reshape(1, 4),
    np.float64(2.5).reshape(()),
    np.zeros((2, 0, 3), np.float32),
    np.array([[True, False]]),
    np.array([[1, -2]], np.int64),
    np.array([1.5, 2], ml_dtypes.bfloat16),
], ids=["float", "scalar", "empty", "bool", "int64", "bfloat16"])
def test_one_output_is_byte_for_byte_protobufs(array: np.ndarray, tensor_content: bool) -> None:
    response = PredictResponse(SPECS[0], {"y": array})
    expected = convert.predict_response(response, tensor_content=tensor_content)
    assert PredictResponseWriter(tensor_content).write(response) == expected.SerializeToString()


def test_non_contiguous_outputs_are_written_in_row_major_order() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4).T
    response = PredictResponse(SPECS[0], {"y": array})
    out = written(response, False).outputs["y"]
    assert to_ndarray(out).tolist() == array.tolist()


@settings(max_examples=300, deadline=None)
@given(st.one_of([arrays(t) for t in NUMERIC] + [BFLOAT16]))
def test_content_views_decode_as_the_typed_fields_do(array: np.ndarray) -> None:
    """``to_ndarray``'s view of raw ``tensor_content`` equals its decoding of the same tensor
    written to the typed fields, and the array itself, bit for bit (NaNs too)."""
    viewed = to_ndarray(make_tensor_proto(array, use_tensor_content=True))
    fielded = to_ndarray(make_tensor_proto(array, use_tensor_content=False))
    for decoded in (viewed, fielded):
        assert decoded.dtype == array.dtype and decoded.shape == array.shape
        assert decoded.tobytes() == np.ascontiguousarray(array).tobytes()


def test_content_that_does_not_fill_its_shape_is_refused() -> None:
    """Content that does not fill its shape (or a shape that is not one) fails as
    ``to_ndarray`` says, never as a view of the wrong size."""
    proto = make_tensor_proto(np.ones((2, 2), np.float32))
    proto.tensor_shape.dim[0].size = -2  # -2 x 2 elements: the content's size, negated
    proto.tensor_shape.dim[1].size = -2
    with pytest.raises(InvalidArgumentError, match="negative dimension"):
        to_ndarray(proto)
    proto.tensor_shape.dim[0].size = 3
    proto.tensor_shape.dim[1].size = 2
    with pytest.raises(InvalidArgumentError, match="has 16 bytes; expected 24"):
        to_ndarray(proto)
