"""What the serving benchmark sends and what it expects back: one batch-1 request per model, as
REST JSON and as a framed gRPC ``PredictRequest``, and the checks that a server answers it right
(within ``TOLERANCE`` of TensorFlow's recorded output) before any of its numbers are kept."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from bench.serving_load import GRPC_PATH, grpc_frame
from bench.serving_servers import TryAgain
from bench.tensors import recorded_cases
from protos.tensorflow_serving.apis import predict_pb2
from runtime.tensor_codec import make_tensor_proto, to_ndarray

SIGNATURE = "serving_default"
CASE = "batch1"
TOLERANCE = 1e-5
CHECK_TIMEOUT_S = 30.0


@dataclass
class Workload:
    model: str
    base_path: Path  # the model's base path (holds version 1/)
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    rest_body: bytes
    grpc_request: bytes

    @property
    def rest_path(self) -> str:
        return f"/v1/models/{self.model}:predict"

    def fixed_rest_response(self) -> bytes:
        """A REST answer built from the expected outputs (for the ASGI ceiling when the daemon's
        own answer is not at hand)."""
        if len(self.expected) == 1:
            (array,) = self.expected.values()
            return json.dumps({"predictions": array.tolist()}).encode()
        rows = [{k: v[i].tolist() for k, v in self.expected.items()}
                for i in range(len(next(iter(self.expected.values()))))]
        return json.dumps({"predictions": rows}).encode()

    def fixed_grpc_response(self) -> bytes:
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.model
        response.model_spec.version.value = 1
        response.model_spec.signature_name = SIGNATURE
        for alias, array in self.expected.items():
            response.outputs[alias].CopyFrom(make_tensor_proto(array))
        return response.SerializeToString()


def load_workload(model: str, base_path: Path, expected_npz: Path) -> Workload:
    inputs = recorded_cases(expected_npz, SIGNATURE)[CASE]
    prefix = f"{SIGNATURE}/{CASE}/out/"
    with np.load(expected_npz, allow_pickle=False) as data:
        expected = {k[len(prefix):]: data[k] for k in data.files if k.startswith(prefix)}
    if len(inputs) == 1:
        (array,) = inputs.values()
        # Python floats print float32 values exactly, so the server parses the same numbers.
        body = {"instances": array.tolist()}
    else:
        body = {"inputs": {k: v.tolist() for k, v in inputs.items()}}
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = SIGNATURE
    for alias, array in inputs.items():
        request.inputs[alias].CopyFrom(make_tensor_proto(array))
    return Workload(model, base_path, inputs, expected, json.dumps(body).encode(),
                    request.SerializeToString())


def _compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    if set(got) != set(want):
        raise ValueError(f"outputs {sorted(got)}, expected {sorted(want)}")
    worst = 0.0
    for alias, expected in want.items():
        actual = np.asarray(got[alias], dtype=np.float64)
        if actual.shape != expected.shape:
            raise ValueError(f"{alias}: shape {actual.shape}, expected {expected.shape}")
        diff = float(np.max(np.abs(actual - expected.astype(np.float64)), initial=0.0))
        scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
        if not diff <= TOLERANCE * scale:  # also catches NaN
            raise ValueError(f"{alias}: max |diff| {diff:.3g} from TensorFlow's output")
        worst = max(worst, diff)
    return worst


def _rest_outputs(answer: object, want: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if not isinstance(answer, dict) or "predictions" not in answer:
        raise ValueError(f"no 'predictions' in {str(answer)[:200]}")
    predictions = answer["predictions"]
    if predictions and isinstance(predictions[0], dict):
        return {k: np.asarray([row[k] for row in predictions]) for k in predictions[0]}
    (alias,) = want  # one output: plain rows
    return {alias: np.asarray(predictions)}


def check_rest(work: Workload, port: int) -> dict[str, object]:
    """One predict over REST; raises TryAgain while the model loads (404/503)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CHECK_TIMEOUT_S)
    try:
        connection.request("POST", work.rest_path, body=work.rest_body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    except http.client.HTTPException as err:
        raise TryAgain(str(err)) from err
    finally:
        connection.close()
    if response.status in (404, 503):
        raise TryAgain(f"HTTP {response.status}: {body[:200]!r}")
    if response.status != 200:
        raise ValueError(f"HTTP {response.status}: {body[:300]!r}")
    diff = _compare(_rest_outputs(json.loads(body), work.expected), work.expected)
    return {"max_abs_diff": diff, "response": body}


def check_grpc(work: Workload, port: int) -> dict[str, object]:
    """One Predict over gRPC (grpcio, raw bytes); raises TryAgain while the server starts or
    loads the model."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(GRPC_PATH)  # bytes in, bytes out
        try:
            raw = call(work.grpc_request, timeout=CHECK_TIMEOUT_S)
        except grpc.RpcError as err:
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                raise TryAgain(f"{err.code().name}: {err.details()}") from err
            raise ValueError(f"{err.code().name}: {err.details()}") from err
    response = predict_pb2.PredictResponse.FromString(raw)
    outputs = {alias: to_ndarray(t) for alias, t in response.outputs.items()}
    return {"max_abs_diff": _compare(outputs, work.expected), "response": raw}


def write_request_files(work: Workload, scratch: Path) -> dict[str, Path]:
    files = {"rest_body": scratch / f"{work.model}.body.json",
             "grpc_framed": scratch / f"{work.model}.request.grpc"}
    files["rest_body"].write_bytes(work.rest_body)
    files["grpc_framed"].write_bytes(grpc_frame(work.grpc_request))
    return files
