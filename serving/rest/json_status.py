"""Model status and metadata bodies, as TensorFlow Serving's protobuf JSON printer writes them.

Both go through protobuf's C++ printer with whitespace on (1-space indent, a trailing newline)
and defaults printed: int64 as strings, enums by name. Status uses the messages' JSON names
(declared snake_case), metadata the proto field names. The metadata body is stitched together
from two printed messages, giving its odd ``}\\n,\\n"metadata"`` seams; we reproduce them.

The printer lists a message's plain fields in declaration order and then the field set in each
``oneof`` (``TensorInfo.name`` after ``dtype``/``tensor_shape``, ``ModelSpec.version`` after
``signature_name``), which is what ``proto_to_dict`` does for any message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from serving.requests.metadata import GetModelMetadataResponse
from serving.requests.status import GetModelStatusResponse

if TYPE_CHECKING:
    from google._upb._message import FieldDescriptor as UpbFieldDescriptor

# A message's descriptor is the pure-Python or the upb one, depending on protobuf's backend;
# both have the attributes read here.
Field: TypeAlias = "FieldDescriptor | UpbFieldDescriptor"

_INT64_TYPES = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def _scalar(field: Field, value: Any) -> Any:
    if field.type in _INT64_TYPES:
        return str(value)
    if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return proto_to_dict(value)
    return value


def _field_value(message: Message, field: Field) -> Any:
    value = getattr(message, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {str(k): _scalar(value_field, value[k]) for k in sorted(value)}
    if field.is_repeated:
        return [_scalar(field, v) for v in value]
    return _scalar(field, value)


def proto_to_dict(message: Message) -> dict[str, Any]:
    """A message as the printer's JSON object (proto field names, defaults included)."""
    out: dict[str, Any] = {}
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        if field.containing_oneof is not None:
            continue  # printed after the plain fields
        if field.has_presence and not message.HasField(field.name):
            continue
        out[field.name] = _field_value(message, field)
    for oneof in descriptor.oneofs:
        chosen = message.WhichOneof(oneof.name)
        if chosen is not None:
            out[chosen] = _field_value(message, descriptor.fields_by_name[chosen])
    return out


def _versions(response: GetModelStatusResponse) -> list[dict[str, Any]]:
    return [
        {
            "version": str(status.version),
            "state": status.state.name,
            "status": {"error_code": status.error_code.name, "error_message": status.error_message},
        }
        for status in response.model_version_status
    ]


def status_json(response: GetModelStatusResponse) -> bytes:
    return _dumps({"model_version_status": _versions(response)}).encode("utf-8", "surrogateescape")


def models_json(models: Sequence[tuple[str, GetModelStatusResponse]]) -> bytes:
    """``GET /v1/models`` (not in TensorFlow Serving): per model, its name and what its status
    request would answer, printed the same way."""
    listed = [
        {"name": name, "model_version_status": _versions(response)} for name, response in models
    ]
    return _dumps({"models": listed}).encode("utf-8", "surrogateescape")


def probe_json(status: str, not_ready: Sequence[str] = ()) -> bytes:
    """The /healthz and /readyz bodies: ``{"status": ...}``, plus the models not ready yet."""
    body: dict[str, Any] = {"status": status}
    if not_ready:
        body["models_not_ready"] = list(not_ready)
    return _dumps(body).encode("utf-8", "surrogateescape")


def metadata_json(response: GetModelMetadataResponse) -> bytes:
    spec = response.model_spec
    model_spec = {"name": spec.name, "signature_name": spec.signature_name}
    if spec.version is not None:
        model_spec["version"] = str(spec.version)
    signature_defs = _signature_def_map(response.signature_def)
    text = (
        "{\n"
        + '"model_spec":'
        + _dumps(model_spec)
        + ",\n"
        + '"metadata": {'
        + '"signature_def": '
        + _dumps({"signature_def": signature_defs})
        + "}\n"
        + "}\n"
    )
    return text.encode("utf-8", "surrogateescape")


def _signature_def_map(signature_defs: Mapping[str, Message]) -> dict[str, Any]:
    return {key: proto_to_dict(signature_defs[key]) for key in sorted(signature_defs)}
