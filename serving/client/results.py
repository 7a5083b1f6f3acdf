"""What the client hands back besides tensors: version states and model metadata as plain Python.

Both transports end here, so a status or a metadata answer looks the same whichever carried it.
Metadata is a dict::

    {"model_spec": {"name": "half_plus_two", "version": 123, "signature_name": ""},
     "signature_def": {"serving_default": {
         "method_name": "tensorflow/serving/predict",
         "inputs": {"x": {"name": "serving_default_x:0", "dtype": "DT_FLOAT", "shape": [-1, 1]}},
         "outputs": {"y": {...}}}}}

``shape`` is None for a tensor of unknown rank, and -1 marks an unknown dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from protos.tensorflow.core.protobuf import meta_graph_pb2
from protos.tensorflow_serving.apis import get_model_metadata_pb2
from runtime import dtypes
from runtime.dtypes import DataType

SignatureDefMap = get_model_metadata_pb2.SignatureDefMap


@dataclass(frozen=True)
class VersionStatus:
    """One version's state (START, LOADING, AVAILABLE, UNLOADING, END) and its load status."""

    version: int
    state: str
    error_code: str = "OK"
    error_message: str = ""


def _tensor_info(info: meta_graph_pb2.TensorInfo) -> dict[str, Any]:
    shape = info.tensor_shape
    try:
        dtype = DataType.of(info.dtype).name
    except ValueError:  # a type newer than ours: keep the number
        dtype = str(info.dtype)
    return {
        "name": info.name,
        "dtype": dtype,
        "shape": None if shape.unknown_rank else [int(d.size) for d in shape.dim],
    }


def signature_defs(signatures: SignatureDefMap) -> dict[str, dict[str, Any]]:
    """Signature key -> {"method_name", "inputs", "outputs"}, keys sorted."""
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(signatures.signature_def):
        signature = signatures.signature_def[key]
        out[key] = {
            "method_name": signature.method_name,
            "inputs": {a: _tensor_info(signature.inputs[a]) for a in sorted(signature.inputs)},
            "outputs": {a: _tensor_info(signature.outputs[a]) for a in sorted(signature.outputs)},
        }
    return out


def metadata_dict(
    name: str, version: int | None, signature_name: str, signatures: SignatureDefMap
) -> dict[str, Any]:
    return {
        "model_spec": {"name": name, "version": version, "signature_name": signature_name},
        "signature_def": signature_defs(signatures),
    }


def numpy_dtype(dtype_name: str) -> np.dtype:
    """The numpy dtype of a signature tensor's ``"DT_..."`` name (object for strings)."""
    try:
        return dtypes.to_numpy(DataType[dtype_name])
    except (KeyError, ValueError) as err:
        raise ValueError(f"no numpy dtype for {dtype_name}") from err
