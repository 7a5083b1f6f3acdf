"""The real daemon's logs: JSON lines with their fields, lifecycle lines with durations, and
no request payload or credential at any level."""

from __future__ import annotations

import json
import re

import grpc
import numpy as np

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO

MODEL = ["--model_name=hp", f"--model_base_path={HALF_PLUS_TWO}"]
RFC3339_MS_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SECRET = "s3cr3t-7f1e9c0a-payload"
TOKEN = "t0k3n-5b2d8e44-credential"


def test_json_lines_with_fields_and_lifecycle_durations() -> None:
    server = ServerProcess(["--log_format=json", *MODEL], ["hp"])
    try:
        assert server.client.post("/v1/models/hp:predict", json={"instances": [1.0]}).json() == {
            "predictions": [2.5]
        }
    finally:
        assert server.stop() == 0, server.output()
    lines = [json.loads(line) for line in server.output().splitlines() if line.strip()]
    for fields in lines:
        assert {"time", "level", "logger", "message"} <= fields.keys(), fields
        assert RFC3339_MS_UTC.fullmatch(fields["time"]), fields
    lifecycle = [f for f in lines if f["logger"] == "graphserve.lifecycle"]
    assert all((f["model"], f["version"]) == ("hp", 123) for f in lifecycle), lifecycle
    messages = [f["message"] for f in lifecycle]
    expected = [
        r"Servable \{name: hp version: 123\} START",
        r"Servable \{name: hp version: 123\} LOADING after \d+\.\d\d s START",
        r"Servable \{name: hp version: 123\} AVAILABLE after \d+\.\d\d s LOADING",
        r"Servable \{name: hp version: 123\} UNLOADING after \d+\.\d\d s AVAILABLE",
        r"Servable \{name: hp version: 123\} END after \d+\.\d\d s UNLOADING",
    ]
    assert len(messages) == len(expected), messages
    for pattern, message in zip(expected, messages, strict=True):
        assert re.fullmatch(pattern, message), messages
    # TensorFlow Serving's own lines stay.
    assert any(f["message"] == "Successfully loaded servable version {name: hp version: 123}"
               for f in lines)


def test_text_format_is_the_default() -> None:
    server = ServerProcess(MODEL, ["hp"])
    assert server.stop() == 0, server.output()
    assert re.search(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO graphserve.lifecycle: "
        r"Servable \{name: hp version: 123\} AVAILABLE after \d+\.\d\d s LOADING$",
        server.output(), re.MULTILINE,
    ), server.output()


def test_no_payload_or_credential_is_logged_at_debug() -> None:
    server = ServerProcess(["--log_level=debug", *MODEL], ["hp"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        ok = server.client.post(
            "/v1/models/hp:predict", json={"instances": [1.0]}, headers=auth
        )
        assert ok.status_code == 200, ok.text
        # A string where a float belongs, a malformed body, a bad signature: all answered with
        # errors, none logged with what the client sent.
        for body in (
            {"instances": [SECRET]},
            {"inputs": {"x": [SECRET]}},
            {"instances": [1.0], "signature_name": SECRET},
        ):
            failed = server.client.post("/v1/models/hp:predict", json=body, headers=auth)
            assert failed.status_code == 400, failed.text
        malformed = server.client.post(
            "/v1/models/hp:predict", content=f'{{"instances": ["{SECRET}"', headers=auth
        )
        assert malformed.status_code == 400, malformed.text
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "hp"
        request.inputs["x"].CopyFrom(make_tensor_proto(np.array([SECRET.encode()])))
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            try:
                stub.Predict(request, timeout=60, metadata=[("authorization", TOKEN)])
                raise AssertionError("a string tensor for a float input must fail")
            except grpc.RpcError as err:
                assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err
    finally:
        assert server.stop() == 0, server.output()
    output = server.output()
    assert "DEBUG" in output  # the level took effect
    assert SECRET not in output
    assert TOKEN not in output
