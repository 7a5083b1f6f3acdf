"""TensorFlow Serving's JSON tensor formats for :predict, request side.

A body is parsed once (``parse_predict_body``); its tensors are decoded later, when the
signature's input dtypes are known (``decode_inputs``), exactly as TensorFlow Serving looks the
signature up between the two steps. Row (``instances``) and columnar (``inputs``) formats, base64
``{"b64": ...}`` strings, NaN/Infinity tokens, and every 400 message with TensorFlow's wording.

Tensor values are decoded by ``json_tensor``; this module handles the document and the two
formats. ``decode_inputs`` takes the request's byte limit (an ``int`` or a ``TensorBudget``
shared with the rest of the request) and charges every tensor it decodes against it; a value
nested deeper than a tensor's dimensions is INVALID_ARGUMENT, and running out of memory while
decoding is RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, OpError, from_memory_error
from runtime.tensor_codec import TensorBudget
from serving.rest.json_tensor import (
    decode_tensor,
    dense_shape,
    fast_tensor,
    fill,
    is_b64_object,
    to_array,
)
from serving.rest.json_text import debug_string, parse_json


class RequestFormat(enum.Enum):
    ROW = "instances"
    COLUMNAR = "inputs"


@dataclass(frozen=True)
class PredictBody:
    """A parsed :predict body, before its tensors are decoded."""

    document: dict[str, Any]
    signature_name: str
    has_bool_tokens: bool  # the fast numeric path must not swallow true/false as 1/0

    @property
    def format(self) -> RequestFormat:
        return RequestFormat.ROW if "instances" in self.document else RequestFormat.COLUMNAR


def _format_error(document: Any, *parts: str) -> InvalidArgumentError:
    return InvalidArgumentError("JSON Value: " + debug_string(document) + " " + "".join(parts))


def parse_predict_body(body: bytes) -> PredictBody:
    document = parse_json(body)
    if not isinstance(document, dict):
        raise _format_error(document, "Is not object")
    signature_name = document.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise _format_error(
            document, "not formatted correctly. 'signature_name' key must be a string value."
        )
    has_bools = b"true" in body or b"false" in body
    return PredictBody(document, signature_name, has_bools)


# ---------------------------------------------------------------------------------------------
# Row ("instances") and columnar ("inputs") formats.


def _is_element_object(value: Any) -> bool:
    return isinstance(value, dict) and not is_b64_object(value)


def _careful_instances(
    instances: list[Any], input_dtypes: Mapping[str, DataType], budget: TensorBudget | None
) -> dict[str, np.ndarray]:
    names = sorted(input_dtypes)
    wanted = set(names)
    objects = _is_element_object(instances[0])
    values: dict[str, list[Any]] = {}
    shapes: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}

    def add_item(item: Any, name: str) -> None:
        if name not in input_dtypes:
            raise InvalidArgumentError(f"JSON object: does not have named input: {name}")
        shape = dense_shape(item, outer_dims=1)  # the 'instances' list is dimension 0
        out: list[Any] = []
        fill(item, 0, shape, input_dtypes[name], out)
        if name not in sizes:
            sizes[name], shapes[name] = len(out), shape
            values[name] = out
            return
        if sizes[name] != len(out):
            raise InvalidArgumentError(f"Expecting tensor size: {sizes[name]} but got: {len(out)}")
        if shapes[name] != shape:
            expected = ",".join(map(str, shapes[name]))
            raise InvalidArgumentError(
                f"Expecting shape [{expected}] but got: [{','.join(map(str, shape))}]"
            )
        values[name].extend(out)

    for index, element in enumerate(instances):
        if objects:
            if not _is_element_object(element):
                raise InvalidArgumentError(
                    f"Expecting object but got list at item {index} of input list"
                )
            for name, item in element.items():
                try:
                    add_item(item, name)
                except OpError as err:
                    raise InvalidArgumentError(
                        f"Failed to process element: {index} key: {name} of 'instances' list. "
                        f"Error: {err.status_text()}"
                    ) from None
            if element.keys() != wanted:
                raise InvalidArgumentError(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{debug_string(element)} keys must be equal to: {','.join(names)}"
                )
        else:
            if _is_element_object(element):
                raise InvalidArgumentError(
                    f"Expecting value/list but got object at item {index} of input list"
                )
            try:
                add_item(element, names[0])
            except OpError as err:
                raise InvalidArgumentError(
                    f"Failed to process element: {index} of 'instances' list. "
                    f"Error: {err.status_text()}"
                ) from None
    return {
        name: to_array(values[name], [len(instances), *shapes[name]], input_dtypes[name], budget)
        for name in values
    }


def _charged(
    tensors: dict[str, np.ndarray], input_dtypes: Mapping[str, DataType], budget: TensorBudget | None
) -> dict[str, np.ndarray]:
    if budget is not None:
        for name, tensor in tensors.items():
            budget.charge(tensor.nbytes, tensor.shape, input_dtypes[name])
    return tensors


def _from_instances(
    instances: list[Any],
    input_dtypes: Mapping[str, DataType],
    has_bools: bool,
    budget: TensorBudget | None,
) -> dict[str, np.ndarray]:
    if not isinstance(instances[0], dict) and len(input_dtypes) > 1:
        raise InvalidArgumentError(
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            "required as per tensorinfo_map"
        )
    names = sorted(input_dtypes)
    if _is_element_object(instances[0]):
        wanted = set(names)
        if all(isinstance(e, dict) and e.keys() == wanted for e in instances):
            columns = {n: [e[n] for e in instances] for n in names}
            fast = {n: fast_tensor(columns[n], input_dtypes[n], has_bools) for n in names}
            if all(t is not None and t.ndim >= 1 for t in fast.values()):
                return _charged(fast, input_dtypes, budget)  # type: ignore[arg-type]
    else:
        single = fast_tensor(instances, input_dtypes[names[0]], has_bools)
        if single is not None:
            return _charged({names[0]: single}, input_dtypes, budget)
    return _careful_instances(instances, input_dtypes, budget)


def _from_inputs(
    inputs: Any,
    input_dtypes: Mapping[str, DataType],
    has_bools: bool,
    budget: TensorBudget | None,
) -> dict[str, np.ndarray]:
    names = sorted(input_dtypes)
    if not isinstance(inputs, dict) or is_b64_object(inputs):
        if len(names) > 1:
            raise InvalidArgumentError(
                "inputs is a plain value/list, but expecting an object as multiple input tensors "
                "required as per tensorinfo_map"
            )
        return {names[0]: decode_tensor(inputs, input_dtypes[names[0]], has_bools, budget)}
    tensors = {}
    for name in names:
        if name not in inputs:
            raise InvalidArgumentError(f"Missing named input: {name} in 'inputs' object.")
        tensors[name] = decode_tensor(inputs[name], input_dtypes[name], has_bools, budget)
    return tensors


def decode_inputs(
    body: PredictBody,
    input_dtypes: Mapping[str, DataType],
    *,
    max_bytes: int | TensorBudget | None = None,
) -> dict[str, np.ndarray]:
    """The request's tensors by input alias, typed by the signature's ``input_dtypes``.

    ``max_bytes`` bounds their total size (see ``runtime.tensor_codec.TensorBudget``); a tensor
    that does not fit is RESOURCE_EXHAUSTED. ``None`` means no limit.
    """
    budget = TensorBudget.of(max_bytes)
    try:
        return _decode_inputs(body, input_dtypes, budget)
    except MemoryError as err:
        raise from_memory_error(err, "the request's tensors") from err
    except RecursionError:
        # dense_shape bounds the recursion; this keeps a miss a client error, not a crash.
        raise InvalidArgumentError("JSON value is nested too deeply to decode") from None


def _decode_inputs(
    body: PredictBody, input_dtypes: Mapping[str, DataType], budget: TensorBudget | None
) -> dict[str, np.ndarray]:
    document = body.document
    if not input_dtypes:
        raise InvalidArgumentError(
            f"Failed to get input map for signature: {body.signature_name or 'DEFAULT'}"
        )
    if "instances" in document:
        if "inputs" in document:
            raise _format_error(
                document,
                "Not formatted correctly expecting only one of 'inputs' or 'instances' keys "
                "to exist ",
            )
        instances = document["instances"]
        if not isinstance(instances, list):
            raise _format_error(document, "Expecting 'instances' to be an list/array")
        if not instances:
            raise _format_error(document, "No values in 'instances' array")
        return _from_instances(instances, input_dtypes, body.has_bool_tokens, budget)
    if "inputs" in document:
        return _from_inputs(document["inputs"], input_dtypes, body.has_bool_tokens, budget)
    raise InvalidArgumentError("Missing 'inputs' or 'instances' key")
