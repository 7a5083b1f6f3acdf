"""The gRPC client's requests and answers: Python values <-> TensorFlow Serving's messages.

Pure functions, so what goes on the wire can be checked without a server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    input_pb2,
    model_management_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)
from protos.tensorflow_serving.config import model_server_config_pb2
from runtime import tensor_codec
from runtime.errors import Code, OpError
from serving.client import examples as example_codec
from serving.client.errors import InvalidArgumentError, ServingError, error_for
from serving.client.examples import ExampleLike
from serving.client.results import SignatureDefMap, VersionStatus, metadata_dict
from serving.client.tensors import as_array
from serving.config import AllVersions, LatestVersions, ModelConfig, SpecificVersions

ModelServerConfig = model_server_config_pb2.ModelServerConfig
# A model for reload_config: a ModelConfig, or (name, base_path) for the latest version.
ModelEntry = ModelConfig | tuple[str, str | Path]
_SIGNATURE_DEF = "signature_def"
_SIGNATURE_DEF_MAP_TYPE = "tensorflow.serving.SignatureDefMap"
_STATE_NAMES = get_model_status_pb2.ModelVersionStatus.State


def model_spec(
    model: str,
    version: int | None = None,
    label: str | None = None,
    signature_name: str | None = None,
) -> model_pb2.ModelSpec:
    spec = model_pb2.ModelSpec(name=model, signature_name=signature_name or "")
    if version is not None:
        spec.version.value = version
    elif label is not None:
        spec.version_label = label
    return spec


def predict_request(
    spec: model_pb2.ModelSpec,
    inputs: Mapping[str, Any],
    output_filter: Sequence[str] | None = None,
) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest(model_spec=spec)
    for alias, value in inputs.items():
        try:
            request.inputs[alias].CopyFrom(tensor_codec.from_ndarray(as_array(value)))
        except ServingError:
            raise
        except OpError as err:  # the codec's own errors, e.g. an unsupported dtype
            raise error_for(err.code, f"input {alias}: {err.message}") from err
    if output_filter:
        request.output_filter.extend(output_filter)
    return request


def _writable(array: np.ndarray) -> np.ndarray:
    # Arrays decoded from tensor_content are read-only views over the message's bytes.
    return array if array.flags.writeable else array.copy()


def predict_outputs(response: predict_pb2.PredictResponse) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for alias in sorted(response.outputs):
        try:
            out[alias] = _writable(tensor_codec.to_ndarray(response.outputs[alias]))
        except OpError as err:
            raise error_for(err.code, f"output {alias}: {err.message}") from err
    return out


def _input(examples: Sequence[ExampleLike], context: ExampleLike | None) -> input_pb2.Input:
    protos = [example_codec.to_proto(e) for e in example_codec.example_list(examples)]
    message = input_pb2.Input()
    if context is None:
        message.example_list.examples.extend(protos)
    else:
        with_context = message.example_list_with_context
        with_context.examples.extend(protos)
        with_context.context.CopyFrom(example_codec.to_proto(context))
    return message


def classification_request(
    spec: model_pb2.ModelSpec, examples: Sequence[ExampleLike], context: ExampleLike | None
) -> classification_pb2.ClassificationRequest:
    return classification_pb2.ClassificationRequest(
        model_spec=spec, input=_input(examples, context)
    )


def regression_request(
    spec: model_pb2.ModelSpec, examples: Sequence[ExampleLike], context: ExampleLike | None
) -> regression_pb2.RegressionRequest:
    return regression_pb2.RegressionRequest(model_spec=spec, input=_input(examples, context))


def classifications(
    response: classification_pb2.ClassificationResponse,
) -> list[list[tuple[str, float]]]:
    return [
        [(c.label, float(c.score)) for c in result.classes]
        for result in response.result.classifications
    ]


def regressions(response: regression_pb2.RegressionResponse) -> list[float]:
    return [float(r.value) for r in response.result.regressions]


def _code_name(number: int) -> str:
    try:
        return Code(number).name
    except ValueError:
        return str(number)


def version_statuses(response: get_model_status_pb2.GetModelStatusResponse) -> list[VersionStatus]:
    out = []
    for status in response.model_version_status:
        try:
            state = _STATE_NAMES.Name(status.state)
        except ValueError:
            state = str(status.state)
        out.append(
            VersionStatus(
                int(status.version),
                state,
                _code_name(status.status.error_code),
                status.status.error_message,
            )
        )
    return out


def metadata_request(spec: model_pb2.ModelSpec) -> get_model_metadata_pb2.GetModelMetadataRequest:
    return get_model_metadata_pb2.GetModelMetadataRequest(
        model_spec=spec, metadata_field=[_SIGNATURE_DEF]
    )


def metadata(response: get_model_metadata_pb2.GetModelMetadataResponse) -> dict[str, Any]:
    signatures = SignatureDefMap()
    packed = response.metadata.get(_SIGNATURE_DEF)
    # Unpack parses only an Any that holds a SignatureDefMap, and says whether it did.
    if packed is None or not packed.Unpack(signatures):
        found = packed.type_url if packed is not None else "nothing"
        raise error_for(
            Code.INTERNAL,
            f"metadata[{_SIGNATURE_DEF!r}] should hold a {_SIGNATURE_DEF_MAP_TYPE}; found {found}",
        )
    spec = response.model_spec
    version = spec.version.value if spec.HasField("version") else None
    return metadata_dict(spec.name, version, spec.signature_name, signatures)


def _model_config(entry: ModelEntry) -> model_server_config_pb2.ModelConfig:
    if isinstance(entry, tuple):
        entry = ModelConfig(entry[0], Path(entry[1]))
    if not isinstance(entry, ModelConfig):
        raise InvalidArgumentError(
            f"a model to serve is a ModelConfig or (name, base_path); found {entry!r}"
        )
    config = model_server_config_pb2.ModelConfig(
        name=entry.name, base_path=str(entry.base_path), model_platform="tensorflow"
    )
    policy = entry.version_policy
    choice = config.model_version_policy
    if isinstance(policy, AllVersions):
        choice.all.SetInParent()
    elif isinstance(policy, SpecificVersions):
        choice.specific.versions.extend(policy.versions)
    elif isinstance(policy, LatestVersions):
        choice.latest.num_versions = policy.num_versions
    for label, version in entry.version_labels.items():
        config.version_labels[label] = version
    return config


def reload_config_request(
    models: Iterable[ModelEntry] | ModelServerConfig,
) -> model_management_pb2.ReloadConfigRequest:
    request = model_management_pb2.ReloadConfigRequest()
    if isinstance(models, ModelServerConfig):
        request.config.CopyFrom(models)
        return request
    config_list = request.config.model_config_list
    config_list.SetInParent()  # an empty list is a valid config: serve nothing
    for entry in models:
        config_list.config.append(_model_config(entry))
    return request


def check_reload(response: model_management_pb2.ReloadConfigResponse) -> None:
    status = response.status
    if int(status.error_code) != Code.OK:
        raise error_for(status.error_code, status.error_message)
