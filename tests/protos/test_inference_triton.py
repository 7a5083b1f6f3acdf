"""Our ``inference/grpc_service.proto`` against Triton's own (as ``tritonclient`` ships it, read
in ``.venv-triton``): every message we define is upstream's, field for field, and our service is
upstream's with the RPCs we do not serve left out."""

from __future__ import annotations

import base64
import subprocess
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from protos.inference import grpc_service_pb2
from tests.protos.conftest import REPO
from tests.protos.test_wire_tensorflow import _fill_json_names, _index, _wire_view

TRITON_PYTHON = REPO / ".venv-triton" / "bin" / "python"
# Prints Triton's FileDescriptorProto (JSON names filled, as CopyToProto leaves them out).
DUMP = """
import base64, sys
from google.protobuf import descriptor_pb2
from tritonclient.grpc import service_pb2
proto = descriptor_pb2.FileDescriptorProto()
service_pb2.DESCRIPTOR.CopyToProto(proto)
def fill(messages, live):
    for message in messages:
        descriptor = live[message.name]
        for field in message.field:
            field.json_name = descriptor.fields_by_name[field.name].json_name
        fill(message.nested_type, descriptor.nested_types_by_name)
fill(proto.message_type, service_pb2.DESCRIPTOR.message_types_by_name)
sys.stdout.write(base64.b64encode(proto.SerializeToString()).decode())
"""


@pytest.fixture(scope="module")
def triton_file() -> descriptor_pb2.FileDescriptorProto:
    if not TRITON_PYTHON.exists():
        pytest.skip("needs Triton's client environment (.venv-triton)")
    run = subprocess.run([str(TRITON_PYTHON), "-c", DUMP], check=False, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-5000:]
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(run.stdout))


def our_file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    grpc_service_pb2.DESCRIPTOR.CopyToProto(proto)
    _fill_json_names(proto.message_type, grpc_service_pb2.DESCRIPTOR.message_types_by_name)
    return proto


def _methods(service: Any) -> list[tuple[str, str, str, bool, bool]]:
    return [(m.name, m.input_type, m.output_type, m.client_streaming, m.server_streaming)
            for m in service.method]


def test_messages_match_triton(triton_file: descriptor_pb2.FileDescriptorProto) -> None:
    ours = our_file()
    assert (ours.package, ours.syntax) == (triton_file.package, triton_file.syntax)
    upstream, mine = _index({"triton": triton_file}), _index({"ours": ours})
    assert set(mine) <= set(upstream)
    differ = [full for full, (syntax, proto) in mine.items()
              if _wire_view(full, syntax, proto) != _wire_view(full, *upstream[full])]
    assert differ == []
    assert len(mine) >= 20  # the core messages, nested ones and map entries included


def test_service_is_tritons_core_rpcs(triton_file: descriptor_pb2.FileDescriptorProto) -> None:
    (ours,) = our_file().service
    (upstream,) = triton_file.service
    assert ours.name == upstream.name == "GRPCInferenceService"
    served = ["ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
              "ModelInfer"]
    assert _methods(ours) == [m for m in _methods(upstream) if m[0] in served]
