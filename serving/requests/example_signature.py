"""What classify and regress share: finding the signature, feeding serialized examples, and
describing tensors in TensorFlow Serving's error messages.

Both APIs look the signature up in the MetaGraphDef's map (so ``__saved_model_init_op`` is found,
then refused by the shape checks, as upstream), feed one DT_STRING vector of serialized
``tf.Example``s to the signature's ``inputs`` tensor, and fetch only the outputs they read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from google.protobuf import text_format

from runtime import dtypes
from runtime.errors import InvalidArgumentError
from runtime.saved_model import DEFAULT_SIGNATURE_KEY

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"
INPUTS = "inputs"  # the one input of both kinds of signature
CLASSES = "classes"
SCORES = "scores"
OUTPUTS = "outputs"  # the one output of a regression signature


def signature_key(signature_name: str) -> str:
    return signature_name or DEFAULT_SIGNATURE_KEY


def find_signature_def(model: Any, key: str) -> Any:
    """The SignatureDef proto named ``key`` in the model's MetaGraphDef."""
    signature_defs = model.meta_graph.signature_def
    if key not in signature_defs:
        raise InvalidArgumentError(f"No signature was found with the name: {key}")
    return signature_defs[key]


def debug_string(message: Any) -> str:
    """A message as C++ ``DebugString`` prints it (text format, map entries by key)."""
    return str(text_format.MessageToString(message))


def examples_tensor(examples: Sequence[bytes]) -> np.ndarray:
    """The DT_STRING vector fed to the signature; an empty input is refused as upstream."""
    if len(examples) == 0:
        raise InvalidArgumentError("Input is empty.")
    tensor = np.empty(len(examples), dtype=object)
    tensor[:] = [bytes(e) for e in examples]
    return tensor


def shape_text(array: np.ndarray) -> str:
    """``TensorShape::DebugString``: ``[2,3]``."""
    return "[" + ",".join(str(d) for d in array.shape) + "]"


def dtype_name(array: np.ndarray) -> str:
    """``DataType_Name`` of an output (``DT_FLOAT``)."""
    try:
        return dtypes.from_numpy(array.dtype).name
    except ValueError:
        return str(array.dtype)
