"""Calls graphserve through the official TensorFlow Serving client (``tensorflow-serving-api``
stubs, ``tf.make_tensor_proto`` / ``tf.make_ndarray``), for the interop tests.

Runs in TensorFlow's own environment, never imported by the tests (TensorFlow's protos and
ours share names): ``.venv-tf/bin/python tf_client.py PLAN.json``. The plan names the server,
an .npz of input arrays and an .npz to write output arrays to, and lists calls; each call's
result is printed as one JSON list on stdout, in order. A result always has ``id``, ``code``
(the gRPC status name) and ``details``; on success, what the RPC answered.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from tensorflow_serving.config import model_server_config_pb2

STATE_NAMES = {10: "START", 20: "LOADING", 30: "AVAILABLE", 40: "UNLOADING", 50: "END"}


def fill_spec(out: Any, spec: dict[str, Any]) -> None:
    out.name = spec.get("name", "")
    if "version" in spec:
        out.version.value = spec["version"]
    if "version_label" in spec:
        out.version_label = spec["version_label"]
    out.signature_name = spec.get("signature_name", "")


def spec_json(spec: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "version": spec.version.value if spec.HasField("version") else None,
        "signature_name": spec.signature_name,
    }


def fill_examples(out: Any, serialized: np.ndarray, context: np.ndarray | None) -> None:
    if context is not None:
        target = out.example_list_with_context
        target.context.CopyFrom(tf.train.Example.FromString(context.item()))
    else:
        target = out.example_list
    for data in serialized.tolist():
        target.examples.add().CopyFrom(tf.train.Example.FromString(data))


def classes_json(result: Any) -> list[list[list[Any]]]:
    return [[[c.label, c.score] for c in row.classes] for row in result.classifications]


def tensor_info_json(info: Any) -> dict[str, Any]:
    return {
        "name": info.name,
        "dtype": types_pb2.DataType.Name(info.dtype),
        "shape": None
        if info.tensor_shape.unknown_rank
        else [d.size for d in info.tensor_shape.dim],
    }


class Runner:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.channel = grpc.insecure_channel(
            plan["address"],
            options=[("grpc.max_receive_message_length", -1)],
        )
        self.predictions = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(self.channel)
        with np.load(plan["arrays"], allow_pickle=False) as data:
            self.arrays = {key: data[key] for key in data.files}
        self.outputs: dict[str, np.ndarray] = {}

    def call(self, step: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {"id": step["id"], "code": "OK", "details": ""}
        try:
            result.update(getattr(self, step["rpc"])(step))
        except grpc.RpcError as err:
            result["code"] = err.code().name
            result["details"] = err.details()
        return result

    def _timeout(self, step: dict[str, Any]) -> float:
        return float(step.get("timeout", 60.0))

    def Predict(self, step: dict[str, Any]) -> dict[str, Any]:
        request = predict_pb2.PredictRequest()
        fill_spec(request.model_spec, step["spec"])
        for alias, key in step["inputs"].items():
            request.inputs[alias].CopyFrom(tf.make_tensor_proto(self.arrays[key]))
        request.output_filter.extend(step.get("output_filter", []))
        response = self.predictions.Predict(request, timeout=self._timeout(step))
        outputs = {}
        for alias, proto in response.outputs.items():
            array = tf.make_ndarray(proto)
            if array.dtype == object:
                array = array.astype(bytes)
            key = f"{step['id']}/{alias}"
            self.outputs[key] = array
            outputs[alias] = {
                "key": key,
                "dtype": types_pb2.DataType.Name(proto.dtype),
                "in_tensor_content": bool(proto.tensor_content),
            }
        return {"spec": spec_json(response.model_spec), "outputs": outputs}

    def _examples_request(self, request: Any, step: dict[str, Any]) -> None:
        fill_spec(request.model_spec, step["spec"])
        context = self.arrays[step["context"]] if "context" in step else None
        if "examples" in step:
            fill_examples(request.input, self.arrays[step["examples"]], context)

    def Classify(self, step: dict[str, Any]) -> dict[str, Any]:
        request = classification_pb2.ClassificationRequest()
        self._examples_request(request, step)
        response = self.predictions.Classify(request, timeout=self._timeout(step))
        return {"spec": spec_json(response.model_spec), "classes": classes_json(response.result)}

    def Regress(self, step: dict[str, Any]) -> dict[str, Any]:
        request = regression_pb2.RegressionRequest()
        self._examples_request(request, step)
        response = self.predictions.Regress(request, timeout=self._timeout(step))
        values = [r.value for r in response.result.regressions]
        return {"spec": spec_json(response.model_spec), "values": values}

    def MultiInference(self, step: dict[str, Any]) -> dict[str, Any]:
        request = inference_pb2.MultiInferenceRequest()
        for task in step["tasks"]:
            entry = request.tasks.add(method_name=task["method_name"])
            fill_spec(entry.model_spec, task["spec"])
        fill_examples(request.input, self.arrays[step["examples"]], None)
        response = self.predictions.MultiInference(request, timeout=self._timeout(step))
        results = []
        for entry in response.results:
            kind = entry.WhichOneof("result")
            item: dict[str, Any] = {"spec": spec_json(entry.model_spec), "kind": kind}
            if kind == "classification_result":
                item["classes"] = classes_json(entry.classification_result)
            else:
                item["values"] = [r.value for r in entry.regression_result.regressions]
            results.append(item)
        return {"results": results}

    def GetModelMetadata(self, step: dict[str, Any]) -> dict[str, Any]:
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        fill_spec(request.model_spec, step["spec"])
        request.metadata_field.extend(step.get("fields", ["signature_def"]))
        response = self.predictions.GetModelMetadata(request, timeout=self._timeout(step))
        packed = response.metadata["signature_def"]
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        unpacked = packed.Unpack(signature_map)
        signatures = {
            key: {
                "method_name": sig.method_name,
                "inputs": {a: tensor_info_json(i) for a, i in sig.inputs.items()},
                "outputs": {a: tensor_info_json(i) for a, i in sig.outputs.items()},
            }
            for key, sig in signature_map.signature_def.items()
        }
        return {
            "spec": spec_json(response.model_spec),
            "metadata_keys": sorted(response.metadata),
            "type_url": packed.type_url,
            "unpacked": unpacked,
            "signatures": signatures,
        }

    def GetModelStatus(self, step: dict[str, Any]) -> dict[str, Any]:
        request = get_model_status_pb2.GetModelStatusRequest()
        fill_spec(request.model_spec, step["spec"])
        response = self.models.GetModelStatus(request, timeout=self._timeout(step))
        return {
            "versions": [
                {
                    "version": v.version,
                    "state": STATE_NAMES.get(v.state, str(v.state)),
                    "error_code": v.status.error_code,
                    "error_message": v.status.error_message,
                }
                for v in response.model_version_status
            ]
        }

    def HandleReloadConfigRequest(self, step: dict[str, Any]) -> dict[str, Any]:
        request = model_management_pb2.ReloadConfigRequest()
        config = model_server_config_pb2.ModelServerConfig()
        text_format.Parse(step["config"], config)
        request.config.CopyFrom(config)
        request.metric_names.extend(step.get("metric_names", []))
        response = self.models.HandleReloadConfigRequest(request, timeout=self._timeout(step))
        return {
            "status_set": response.HasField("status"),
            "status_code": response.status.error_code,
            "metrics": [[m.name, m.int64_value_increase] for m in response.metric],
        }


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    runner = Runner(plan)
    results = [runner.call(step) for step in plan["calls"]]
    np.savez(plan["out_arrays"], **runner.outputs)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
