"""Makes the calls of a plan with Triton's own client (``tritonclient``, http and grpc), in its
environment (``.venv-triton``: its protobuf cannot share graphserve's), and prints the results.

    .venv-triton/bin/python tests/serving/v2/triton_client.py PLAN.json

The plan (JSON)::

    {"http": "127.0.0.1:PORT", "grpc": "127.0.0.1:PORT", "arrays": "in.npz",
     "out_arrays": "out.npz",
     "calls": [{"id": "...", "protocol": "http" | "grpc",
                "op": "infer" | "server_live" | "server_ready" | "model_ready"
                      | "server_metadata" | "model_metadata",
                "model": "m", "version": "",
                "inputs": [{"name": "x", "datatype": "FP32", "key": "NPZ KEY",
                            "binary": true}],
                "outputs": [{"name": "y", "binary": true}],  # optional: all outputs
                "parameters": {"signature_name": "..."},      # optional
                "request_id": "...",                            # optional
                "compression": "gzip" | "deflate"}]}            # optional, http requests

Input arrays are read from ``arrays`` (BYTES inputs as numpy ``S`` arrays). Printed: a JSON
list, one result per call, in order: ``{"id", "ok", "error", "status"}`` and, for infer,
``outputs`` (name -> datatype, shape, and ``key`` of the array in ``out_arrays``, or for
BYTES ``bytes``: the elements, base64) and ``response`` (the response's JSON, or for gRPC the
message as a dict); for the others, ``value`` (a bool, or the metadata as a dict).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf.json_format import MessageToDict
from tritonclient.utils import InferenceServerException


def _infer(client: Any, module: Any, call: dict[str, Any], arrays: Any, http: bool) -> Any:
    inputs = []
    for spec in call.get("inputs", []):
        array = arrays[spec["key"]]
        if spec["datatype"] == "BYTES":
            array = array.astype(object)
        tensor = module.InferInput(spec["name"], list(array.shape), spec["datatype"])
        if http:
            tensor.set_data_from_numpy(array, binary_data=spec.get("binary", True))
        else:
            tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    outputs = None
    if "outputs" in call:
        outputs = []
        for spec in call["outputs"]:
            if http:
                outputs.append(module.InferRequestedOutput(
                    spec["name"], binary_data=spec.get("binary", True)))
            else:
                outputs.append(module.InferRequestedOutput(spec["name"]))
    kwargs: dict[str, Any] = {}
    if call.get("parameters"):
        kwargs["parameters"] = call["parameters"]
    if call.get("request_id"):
        kwargs["request_id"] = call["request_id"]
    if http and call.get("compression"):
        kwargs["request_compression_algorithm"] = call["compression"]
        kwargs["response_compression_algorithm"] = call["compression"]
    return client.infer(call["model"], inputs, model_version=call.get("version", ""),
                        outputs=outputs, **kwargs)


def _element_bytes(value: Any) -> bytes:
    # The HTTP client gives the elements of a BYTES output sent as JSON as str.
    return value.encode() if isinstance(value, str) else bytes(value)


def run_call(clients: dict[str, Any], call: dict[str, Any], arrays: Any,
             out: dict[str, np.ndarray]) -> dict[str, Any]:
    http = call["protocol"] == "http"
    client = clients[call["protocol"]]
    module = httpclient if http else grpcclient
    op = call["op"]
    result: dict[str, Any] = {"id": call["id"], "ok": True, "error": "", "status": ""}
    try:
        if op == "infer":
            answer = _infer(client, module, call, arrays, http)
            response = answer.get_response()
            result["response"] = response if http else MessageToDict(
                response, preserving_proto_field_name=True)
            names = [o["name"] for o in (response["outputs"] if http else result["response"]
                                         .get("outputs", []))]
            outputs = {}
            for name in names:
                array = answer.as_numpy(name)
                info: dict[str, Any] = {"shape": list(array.shape)}
                if array.dtype == object:
                    info["bytes"] = [base64.b64encode(_element_bytes(v)).decode()
                                     for v in array.reshape(-1)]
                else:
                    key = f"{call['id']}/{name}"
                    out[key] = array
                    info["key"] = key
                    info["dtype"] = str(array.dtype)
                outputs[name] = info
            result["outputs"] = outputs
        elif op == "server_live":
            result["value"] = bool(client.is_server_live())
        elif op == "server_ready":
            result["value"] = bool(client.is_server_ready())
        elif op == "model_ready":
            result["value"] = bool(client.is_model_ready(call["model"], call.get("version", "")))
        elif op == "server_metadata":
            value = client.get_server_metadata()
            result["value"] = value if http else MessageToDict(
                value, preserving_proto_field_name=True)
        elif op == "model_metadata":
            value = client.get_model_metadata(call["model"], call.get("version", ""))
            result["value"] = value if http else MessageToDict(
                value, preserving_proto_field_name=True)
        else:
            raise ValueError(f"unknown op {op}")
    except InferenceServerException as err:
        result.update(ok=False, error=str(err.message()), status=str(err.status()))
    return result


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    clients: dict[str, Any] = {}
    if plan.get("http"):
        clients["http"] = httpclient.InferenceServerClient(plan["http"], network_timeout=120)
    if plan.get("grpc"):
        clients["grpc"] = grpcclient.InferenceServerClient(plan["grpc"])
    arrays = np.load(plan["arrays"], allow_pickle=False) if plan.get("arrays") else {}
    out: dict[str, np.ndarray] = {}
    results = [run_call(clients, call, arrays, out) for call in plan["calls"]]
    if plan.get("out_arrays"):
        np.savez(plan["out_arrays"], **out)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
