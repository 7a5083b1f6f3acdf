"""The standard health service follows readiness; reflection describes every service."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from serving.config import ModelConfig
from serving.core.server_core import CoreOptions, ServerCore
from tests.serving.grpc.support import Client, rpc_error, serving
from tests.serving.support import HALF_PLUS_TWO

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
PREDICTION = "tensorflow.serving.PredictionService"
MODEL = "tensorflow.serving.ModelService"
INFERENCE = "inference.GRPCInferenceService"


def check(client: Client, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(client.channel)
    status: int = stub.Check(health_pb2.HealthCheckRequest(service=service)).status
    return status


def test_ready_server_is_serving(client: Client) -> None:
    for service in ("", PREDICTION, MODEL, INFERENCE, "PredictionService", "ModelService"):
        assert check(client, service) == SERVING, service
    err = rpc_error(check, client, "no.such.Service")
    assert err.code() == grpc.StatusCode.NOT_FOUND


@pytest.fixture()
def pending(tmp_path: Path) -> Iterator[tuple[ServerCore, Path]]:
    """A core with half_plus_two loaded and a second model with no version yet."""
    base = tmp_path / "pending"
    base.mkdir()
    options = CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0)
    with ServerCore(options) as core:
        core.reload_config([ModelConfig("half_plus_two", HALF_PLUS_TWO),
                            ModelConfig("pending", base)])
        assert core.monitor.wait_until_available("half_plus_two", timeout=120)
        yield core, base


def test_health_follows_readiness(pending: tuple[ServerCore, Path]) -> None:
    core, base = pending
    with serving(core) as client:
        assert check(client, "") == NOT_SERVING
        assert check(client, PREDICTION) == NOT_SERVING
        assert check(client, INFERENCE) == NOT_SERVING
        assert check(client, MODEL) == SERVING  # answers without any model
        watch = health_pb2_grpc.HealthStub(client.channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=120)
        assert next(watch).status == NOT_SERVING
        shutil.copytree(HALF_PLUS_TWO / "00000123", base / "1")
        core.source.scan()
        assert next(watch).status == SERVING  # pushed when the version became AVAILABLE
        watch.cancel()
        assert check(client, PREDICTION) == SERVING


def test_reflection_lists_and_describes_the_services(client: Client) -> None:
    database = ProtoReflectionDescriptorDatabase(client.channel)
    assert set(database.get_services()) == {
        PREDICTION, MODEL, INFERENCE, "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection"}
    pool = descriptor_pool.DescriptorPool(database)
    prediction = pool.FindServiceByName(PREDICTION)
    assert [m.name for m in prediction.methods] == [
        "Classify", "Regress", "Predict", "MultiInference", "GetModelMetadata"]
    assert prediction.methods_by_name["Predict"].input_type.full_name == \
        "tensorflow.serving.PredictRequest"
    inputs = pool.FindMessageTypeByName("tensorflow.serving.PredictRequest").fields_by_name
    assert inputs["inputs"].message_type.fields_by_name["value"].message_type.full_name == \
        "tensorflow.TensorProto"
    model = pool.FindServiceByName(MODEL)
    assert [m.name for m in model.methods] == ["GetModelStatus", "HandleReloadConfigRequest"]
    inference = pool.FindServiceByName(INFERENCE)
    assert [m.name for m in inference.methods] == [
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer"]
    assert inference.methods_by_name["ModelInfer"].input_type.full_name == \
        "inference.ModelInferRequest"
