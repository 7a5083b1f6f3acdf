"""The daemon serves gRPC and REST from one process over one model manager."""

from __future__ import annotations

import grpc
import numpy as np

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO


def test_grpc_and_rest_answer_from_the_same_daemon() -> None:
    server = ServerProcess(["--model_name=half_plus_two", f"--model_base_path={HALF_PLUS_TWO}"],
                           ["half_plus_two"])
    try:
        rest = server.client.post("/v1/models/half_plus_two:predict",
                                  json={"instances": [[1.0], [2.0]]})
        assert rest.json() == {"predictions": [[2.5], [3.0]]}
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "half_plus_two"
        request.inputs["x"].CopyFrom(make_tensor_proto(np.array([[1.0], [2.0]], np.float32)))
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            response = stub.Predict(request, timeout=60)
        assert to_ndarray(response.outputs["y"]).tolist() == [[2.5], [3.0]]
        assert (response.model_spec.version.value, response.model_spec.signature_name) == (
            123, "serving_default")
    finally:
        assert server.stop() == 0, server.output()
