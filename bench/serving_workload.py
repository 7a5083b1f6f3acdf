"""What the serving benchmark sends and what it expects back: one batch-1 request per model, as
REST JSON and as a framed gRPC ``PredictRequest`` (TensorFlow Serving's APIs), and as v2 JSON
and a framed ``ModelInferRequest`` with raw input contents (the Open Inference Protocol), and
the checks that a server answers it right (within ``TOLERANCE`` of TensorFlow's recorded
output) before any of its numbers are kept."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from bench.serving_load import GRPC_PATH, V2_GRPC_PATH, grpc_frame
from bench.serving_servers import TryAgain
from bench.tensors import recorded_cases
from protos.inference import grpc_service_pb2
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
    v2_rest_body: bytes
    v2_grpc_request: bytes

    @property
    def rest_path(self) -> str:
        return f"/v1/models/{self.model}:predict"

    @property
    def v2_rest_path(self) -> str:
        return f"/v2/models/{self.model}/infer"

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
                    request.SerializeToString(), _v2_body(inputs), _v2_request(model, inputs))


_V2_DATATYPES = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64",
                 np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64"}


def _v2_body(inputs: dict[str, np.ndarray]) -> bytes:
    """The v2 JSON request: each input's values flat, as v2 clients send them."""
    tensors = [{"name": alias, "shape": list(array.shape),
                "datatype": _V2_DATATYPES[array.dtype], "data": array.reshape(-1).tolist()}
               for alias, array in inputs.items()]
    return json.dumps({"inputs": tensors}).encode()


def _v2_request(model: str, inputs: dict[str, np.ndarray]) -> bytes:
    """The v2 gRPC request as Triton's client sends it: raw little-endian input contents."""
    request = grpc_service_pb2.ModelInferRequest(model_name=model)
    for alias, array in inputs.items():
        tensor = request.inputs.add(name=alias, datatype=_V2_DATATYPES[array.dtype])
        tensor.shape.extend(array.shape)
        request.raw_input_contents.append(np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes())
    return request.SerializeToString()


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


def _post(port: int, path: str, body: bytes) -> bytes:
    """The body of a 200 answer to a JSON POST; raises TryAgain while the model loads
    (404/503), ValueError for any other status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CHECK_TIMEOUT_S)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
    except http.client.HTTPException as err:
        raise TryAgain(str(err)) from err
    finally:
        connection.close()
    if response.status in (404, 503):
        raise TryAgain(f"HTTP {response.status}: {answer[:200]!r}")
    if response.status != 200:
        raise ValueError(f"HTTP {response.status}: {answer[:300]!r}")
    return answer


def check_rest(work: Workload, port: int) -> dict[str, object]:
    """One predict over REST; raises TryAgain while the model loads (404/503)."""
    body = _post(port, work.rest_path, work.rest_body)
    diff = _compare(_rest_outputs(json.loads(body), work.expected), work.expected)
    return {"max_abs_diff": diff, "response": body}


def _v2_rest_outputs(answer: object) -> dict[str, np.ndarray]:
    if not isinstance(answer, dict) or "outputs" not in answer:
        raise ValueError(f"no 'outputs' in {str(answer)[:200]}")
    return {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in answer["outputs"]}


def check_rest_v2(work: Workload, port: int) -> dict[str, object]:
    """One v2 infer over REST; raises TryAgain while the model loads."""
    body = _post(port, work.v2_rest_path, work.v2_rest_body)
    diff = _compare(_v2_rest_outputs(json.loads(body)), work.expected)
    return {"max_abs_diff": diff, "response": body}


def _grpc_call(port: int, path: str, request: bytes) -> bytes:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(path)  # bytes in, bytes out
        try:
            return bytes(call(request, timeout=CHECK_TIMEOUT_S))
        except grpc.RpcError as err:
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                raise TryAgain(f"{err.code().name}: {err.details()}") from err
            raise ValueError(f"{err.code().name}: {err.details()}") from err


def check_grpc_v2(work: Workload, port: int) -> dict[str, object]:
    """One v2 ModelInfer over gRPC (raw contents both ways)."""
    raw = _grpc_call(port, V2_GRPC_PATH, work.v2_grpc_request)
    response = grpc_service_pb2.ModelInferResponse.FromString(raw)
    outputs = {}
    for tensor, content in zip(response.outputs, response.raw_output_contents, strict=True):
        dtype = {v: k for k, v in _V2_DATATYPES.items()}[tensor.datatype].newbyteorder("<")
        outputs[tensor.name] = np.frombuffer(content, dtype).reshape(tuple(tensor.shape))
    return {"max_abs_diff": _compare(outputs, work.expected), "response": raw}


def check_grpc(work: Workload, port: int) -> dict[str, object]:
    """One Predict over gRPC (grpcio, raw bytes); raises TryAgain while the server starts or
    loads the model."""
    raw = _grpc_call(port, GRPC_PATH, work.grpc_request)
    response = predict_pb2.PredictResponse.FromString(raw)
    outputs = {alias: to_ndarray(t) for alias, t in response.outputs.items()}
    return {"max_abs_diff": _compare(outputs, work.expected), "response": raw}


def write_request_files(work: Workload, scratch: Path) -> dict[str, Path]:
    files = {"rest_body": scratch / f"{work.model}.body.json",
             "grpc_framed": scratch / f"{work.model}.request.grpc",
             "rest_v2_body": scratch / f"{work.model}.v2.body.json",
             "grpc_v2_framed": scratch / f"{work.model}.v2.request.grpc"}
    files["rest_body"].write_bytes(work.rest_body)
    files["grpc_framed"].write_bytes(grpc_frame(work.grpc_request))
    files["rest_v2_body"].write_bytes(work.v2_rest_body)
    files["grpc_v2_framed"].write_bytes(grpc_frame(work.v2_grpc_request))
    return files
