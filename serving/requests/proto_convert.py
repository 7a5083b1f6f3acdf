"""TensorFlow Serving's API protos <-> the request layer's dataclasses.

Decoding keeps TensorFlow Serving's order of checks: a request tensor is decoded only when the
request layer first reads it (after the model, version and signature resolved), and an empty
example input is handed on as no examples, for the request layer to refuse once the signature
has been checked. So an unknown model is NOT_FOUND even when the tensors are bad too.

Warmup replays these same protos (``PredictionLog``), so it converts through here as well.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from google.protobuf import text_format

from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)
from runtime.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
)
from runtime.tensor_codec import (
    RAW_CONTENT_DTYPES,
    TensorBudget,
    encode_varint,
    from_ndarray,
    to_ndarray,
)
from serving.config import ModelConfig, parse_model_server_config
from serving.requests.classify import Classification, ClassifyRequest, ClassifyResponse
from serving.requests.example_input import serialized_examples
from serving.requests.metadata import (
    SIGNATURE_DEF_FIELD,
    GetModelMetadataRequest,
    GetModelMetadataResponse,
)
from serving.requests.model_spec import ModelSpec
from serving.requests.multi_inference import (
    InferenceTask,
    MultiInferenceRequest,
    MultiInferenceResponse,
)
from serving.requests.predict import PredictRequest, PredictResponse
from serving.requests.regress import RegressRequest, RegressResponse
from serving.requests.status import GetModelStatusRequest, GetModelStatusResponse

if TYPE_CHECKING:
    from runtime.saved_model import Signature

# Beyond this, a Predict's tensors are decoded off the event loop (unless they are raw bytes).
CHEAP_REQUEST_BYTES = 64 << 10

# -- ModelSpec --------------------------------------------------------------------------------


SpecKey = tuple[str, int | None, str | None, str]  # ModelSpec's fields, in order


def spec_key(proto: Any) -> SpecKey:
    """The fields of a ``tensorflow.serving.ModelSpec``; a version of 0 and an empty label are
    values, as the oneof's presence says (not the field's default)."""
    choice = proto.WhichOneof("version_choice")
    return (
        proto.name,
        proto.version.value if choice == "version" else None,
        proto.version_label if choice == "version_label" else None,
        proto.signature_name,
    )


def model_spec(proto: Any) -> ModelSpec:
    return ModelSpec(*spec_key(proto))


def required_spec_key(request: Any) -> SpecKey:
    """A request's model spec fields, for a transport that keeps a ModelSpec per distinct key."""
    if not request.HasField("model_spec"):
        raise InvalidArgumentError("Missing ModelSpec")
    return spec_key(request.model_spec)


def required_model_spec(request: Any) -> ModelSpec:
    return ModelSpec(*required_spec_key(request))


def fill_model_spec(out: Any, spec: ModelSpec) -> None:
    """Name, resolved version and (when set) signature name, as upstream's MakeModelSpec."""
    out.name = spec.name
    if spec.version is not None:
        out.version.SetInParent()  # present even for version 0
        out.version.value = spec.version
    if spec.signature_name:
        out.signature_name = spec.signature_name


# -- tensors and Predict ------------------------------------------------------------------------


class TensorInputs(Mapping[str, np.ndarray]):
    """A request's input tensors by alias, each decoded the first time it is read.

    A tensor TensorFlow cannot parse (content that does not fill the declared shape, an
    unknown or unsupported dtype) is INVALID_ARGUMENT ``tensor parsing error: <alias>``, as
    upstream, followed by what was wrong.
    """

    def __init__(self, protos: Mapping[str, Any], request_bytes: int = 0) -> None:
        self._protos = protos
        self._request_bytes = request_bytes
        self._budget: TensorBudget | None = None
        self._arrays: dict[str, np.ndarray] = {}

    def __getitem__(self, alias: str) -> np.ndarray:
        array = self._arrays.get(alias)
        if array is None:
            if alias not in self._protos:  # indexing a protobuf map would add the entry
                raise KeyError(alias)
            proto = self._protos[alias]
            try:
                array = to_ndarray(proto, max_bytes=self._budget)
            except ResourceExhaustedError:
                raise  # too large: not a parsing error
            except OpError as err:
                raise InvalidArgumentError(
                    f"tensor parsing error: {alias} ({err.message})"
                ) from err
            self._arrays[alias] = array
        return array

    def cheap(self) -> bool:
        """Whether decoding may be done on the event loop: a small request, or every tensor
        decodes as a view of its bytes (``to_ndarray``'s fast way)."""
        return self._request_bytes <= CHEAP_REQUEST_BYTES or all(
            p.tensor_content and p.dtype in RAW_CONTENT_DTYPES for p in self._protos.values()
        )

    def decode(self, signature: Signature, max_bytes: int | None) -> Mapping[str, np.ndarray]:
        """This mapping itself: each tensor decodes when the checks first read it (so a bad
        tensor fails where TensorFlow Serving fails it), within ``max_bytes`` in all."""
        self._budget = TensorBudget.of(max_bytes)
        if not self.cheap():
            self.decode_all()  # here, off the loop
        return self

    def unknown_signature(self, key: str) -> OpError:
        return FailedPreconditionError(f'Serving signature key "{key}" not found.')

    def decode_all(self) -> None:
        """Decode every tensor now (on a worker thread, say). A tensor that cannot be decoded
        is left for its first read to fail, at the point TensorFlow Serving fails it."""
        for alias in self._protos:
            try:
                self[alias]
            except OpError:
                pass

    def get(self, alias: str, default: Any = None) -> Any:
        # Mapping's own get goes through an exception for a missing alias.
        return self[alias] if alias in self._protos else default

    def __contains__(self, alias: object) -> bool:
        return alias in self._protos

    def __iter__(self) -> Iterator[str]:
        return iter(self._protos)

    def __len__(self) -> int:
        return len(self._protos)


def predict_request(proto: Any) -> PredictRequest:
    return PredictRequest(
        required_model_spec(proto), TensorInputs(proto.inputs), tuple(proto.output_filter)
    )


def tensor_proto(array: np.ndarray, *, tensor_content: bool = False) -> Any:
    """An output tensor as TensorFlow Serving writes it: every value in the dtype's typed field
    (``Tensor::AsProtoField``), or with ``tensor_content`` the raw bytes
    (``AsProtoTensorContent``; strings then use TensorFlow's string-list encoding)."""
    proto = from_ndarray(array, use_tensor_content=tensor_content)
    if tensor_content and proto.string_val:
        values = list(proto.string_val)
        del proto.string_val[:]
        proto.tensor_content = b"".join(encode_varint(len(v)) for v in values) + b"".join(values)
    return proto


def predict_response(response: PredictResponse, *, tensor_content: bool = False) -> Any:
    out = predict_pb2.PredictResponse()
    fill_model_spec(out.model_spec, response.model_spec)
    for alias, array in response.outputs.items():
        out.outputs[alias].CopyFrom(tensor_proto(array, tensor_content=tensor_content))
    return out


# -- tf.Example inputs: Classify, Regress, MultiInference ---------------------------------------


def examples(input_proto: Any) -> list[bytes]:
    """The serialized examples of a ``tensorflow.serving.Input``; none when it has none (the
    request layer refuses that with upstream's ``Input is empty.`` at upstream's point)."""
    try:
        return serialized_examples(input_proto)
    except InvalidArgumentError:
        return []


def classify_request(proto: Any) -> ClassifyRequest:
    return ClassifyRequest(required_model_spec(proto), examples(proto.input))


def regress_request(proto: Any) -> RegressRequest:
    return RegressRequest(required_model_spec(proto), examples(proto.input))


def _label(label: bytes) -> str:
    # The proto field is a string; TensorFlow Serving copies the bytes unchecked, protobuf here
    # insists on UTF-8, so an undecodable byte becomes U+FFFD rather than failing the request.
    return label.decode("utf-8", errors="replace")


def fill_classification_result(out: Any, classifications: Sequence[Classification]) -> None:
    for row in classifications:
        classes = out.classifications.add().classes
        for label, score in row:
            classes.add(label=_label(label), score=score)


def fill_regression_result(out: Any, regressions: Sequence[float]) -> None:
    for value in regressions:
        out.regressions.add(value=value)


def classify_response(response: ClassifyResponse) -> Any:
    out = classification_pb2.ClassificationResponse()
    fill_model_spec(out.model_spec, response.model_spec)
    fill_classification_result(out.result, response.classifications)
    return out


def regress_response(response: RegressResponse) -> Any:
    out = regression_pb2.RegressionResponse()
    fill_model_spec(out.model_spec, response.model_spec)
    fill_regression_result(out.result, response.regressions)
    return out


def multi_inference_request(proto: Any) -> MultiInferenceRequest:
    tasks = [InferenceTask(model_spec(t.model_spec), t.method_name) for t in proto.tasks]
    return MultiInferenceRequest(tasks, examples(proto.input))


def multi_inference_response(response: MultiInferenceResponse) -> Any:
    out = inference_pb2.MultiInferenceResponse()
    for result in response.results:
        entry = out.results.add()
        fill_model_spec(entry.model_spec, result.model_spec)
        if isinstance(result, ClassifyResponse):
            fill_classification_result(entry.classification_result, result.classifications)
        else:
            fill_regression_result(entry.regression_result, result.regressions)
    return out


# -- GetModelMetadata, GetModelStatus, ReloadConfig -------------------------------------------


def metadata_request(proto: Any) -> GetModelMetadataRequest:
    spec = model_spec(proto.model_spec) if proto.HasField("model_spec") else None
    return GetModelMetadataRequest(spec, tuple(proto.metadata_field))


def metadata_response(response: GetModelMetadataResponse) -> Any:
    """``metadata["signature_def"]`` is an Any packing a ``SignatureDefMap``."""
    out = get_model_metadata_pb2.GetModelMetadataResponse()
    fill_model_spec(out.model_spec, response.model_spec)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for key, signature_def in response.signature_def.items():
        signature_map.signature_def[key].CopyFrom(signature_def)
    out.metadata[SIGNATURE_DEF_FIELD].Pack(signature_map)
    return out


def status_request(proto: Any) -> GetModelStatusRequest:
    spec = model_spec(proto.model_spec) if proto.HasField("model_spec") else None
    return GetModelStatusRequest(spec)


def status_response(response: GetModelStatusResponse) -> Any:
    out = get_model_status_pb2.GetModelStatusResponse()
    for status in response.model_version_status:
        entry = out.model_version_status.add(version=status.version, state=int(status.state))
        # The generated stub types this field as tensorflow.error.Code; the numbers are ours.
        entry.status.error_code = status.error_code.value  # type: ignore[assignment]
        if status.error_message:
            entry.status.error_message = status.error_message
    return out


def model_configs(config: Any, base_dir: Path) -> list[ModelConfig]:
    """The models of a ``ModelServerConfig`` message, checked exactly as a config file is (the
    text round trip reuses that one parser and its messages)."""
    return parse_model_server_config(text_format.MessageToString(config), base_dir)
