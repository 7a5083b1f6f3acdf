"""Predict: run a signature of the resolved model version on the request's inputs.

Inputs come as an ``InputDecoder`` from the transport, which types them once the signature is
known (REST's JSON can only be typed then) and words the error for an unknown signature as
its TensorFlow Serving counterpart does: REST fails while parsing (INVALID_ARGUMENT ``Serving
signature name: "s" not found in signature def``), gRPC as its Predict does
(FAILED_PRECONDITION ``Serving signature key "s" not found.``). The checks here (names, dtypes,
output filter) are the only ones a request's inputs go through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import FailedPreconditionError, InvalidArgumentError, OpError
from runtime.saved_model import DEFAULT_SIGNATURE_KEY, Signature
from serving.requests.model_spec import ModelSpec
from serving.servable import Servable, ServableManager


class InputDecoder(Protocol):
    """A request's inputs as the transport received them."""

    def cheap(self) -> bool:
        """Whether decoding costs little enough to be done on the event loop."""
        ...

    def decode(self, signature: Signature, max_bytes: int | None) -> Mapping[str, Any]:
        """Values by alias for ``signature`` (arrays, or anything ``np.asarray`` takes), at
        most ``max_bytes`` of tensors in all (None: no limit); raises ``OpError``."""
        ...

    def unknown_signature(self, key: str) -> OpError:
        """The error for a signature key the version does not have."""
        ...


class ArrayInputs:
    """Inputs already typed (Python callers, warmup's protos decoded), refused as gRPC's
    Predict refuses them."""

    def __init__(self, arrays: Mapping[str, Any]) -> None:
        self.arrays = arrays

    def cheap(self) -> bool:
        return True

    def decode(self, signature: Signature, max_bytes: int | None) -> Mapping[str, Any]:
        return self.arrays

    def unknown_signature(self, key: str) -> OpError:
        return FailedPreconditionError(f'Serving signature key "{key}" not found.')


@dataclass(frozen=True)
class PredictRequest:
    model_spec: ModelSpec
    inputs: InputDecoder
    output_filter: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class PredictResponse:
    """``model_spec`` carries the model name, resolved version and resolved signature key;
    ``outputs`` are in sorted alias order."""

    model_spec: ModelSpec
    outputs: dict[str, np.ndarray]


def _join(names: Sequence[str]) -> str:
    return ",".join(sorted(names))


def _check_input_names(signature: Signature, inputs: Mapping[str, Any]) -> None:
    """TensorFlow Serving's checks and messages (signature ``defaults`` are not supported, so
    every input is required)."""
    expected = signature.inputs
    if len(inputs) != len(expected):
        extra = [n for n in inputs if n not in expected]
        missing = [n for n in expected if n not in inputs]
        raise InvalidArgumentError(
            f"input size does not match signature: {len(inputs)}!={len(expected)} "
            f"len({{{_join(list(inputs))}}}) != len({{{_join(list(expected))}}}). "
            f"Sent extra: {{{_join(extra)}}}. Missing but required: {{{_join(missing)}}}."
        )
    for alias in sorted(expected):
        if alias not in inputs:
            raise InvalidArgumentError(
                f"Signature input alias: {alias}(feed name: {expected[alias].name}) not found in "
                f"request and no default value provided. Inputs expected to be in the request "
                f"{{{_join(list(inputs))}}}, or default input alias set: "
            )


def _as_array(value: Any, dtype: DataType, alias: str) -> np.ndarray:
    """The input as an array of the signature's dtype; a different dtype is refused, as a
    TensorFlow session refuses a feed of the wrong type."""
    want = dtypes.to_numpy(dtype)
    if not isinstance(value, np.ndarray):
        return np.asarray(value, dtype=want)
    if value.dtype == want:
        return value
    if dtype == DataType.DT_STRING and value.dtype.kind in "SU":
        encoded = [v if isinstance(v, bytes) else v.encode() for v in value.reshape(-1).tolist()]
        array = np.empty(len(encoded), dtype=object)
        array[:] = encoded
        return array.reshape(value.shape)
    try:
        got = dtypes.short_name(dtypes.from_numpy(value.dtype))
    except ValueError:
        got = str(value.dtype)
    raise InvalidArgumentError(
        f"Input '{alias}' expects a tensor of type {dtypes.short_name(dtype)} but {got} "
        "is provided"
    )


def output_aliases(signature: Signature, output_filter: Sequence[str]) -> list[str] | None:
    """The outputs to fetch, sorted (None: all of them)."""
    if not output_filter:
        return None
    seen: set[str] = set()
    for alias in output_filter:
        if alias not in signature.outputs:
            raise InvalidArgumentError(
                f"output tensor alias not found in signature: {alias} Outputs expected to be in "
                f"the set {{{_join(list(signature.outputs))}}}."
            )
        if alias in seen:
            raise InvalidArgumentError(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return sorted(output_filter)


def signature_of(servable: Servable, key: str, decoder: InputDecoder) -> Signature:
    signature = servable.signatures.get(key)
    if signature is None:
        raise decoder.unknown_signature(key)
    return signature


_NUMPY_DTYPES = "_numpy_input_dtypes"


def _input_dtypes(signature: Signature) -> dict[str, np.dtype[Any]]:
    """The numpy dtype of each of the signature's inputs, worked out once per signature (kept
    on the signature object, as its own ``input_dtypes`` are)."""
    store: dict[str, Any] = signature.__dict__
    cached: dict[str, np.dtype[Any]] | None = store.get(_NUMPY_DTYPES)
    if cached is None:
        cached = {alias: dtypes.to_numpy(spec_.dtype) for alias, spec_ in signature.inputs.items()}
        store[_NUMPY_DTYPES] = cached
    return cached


def checked_inputs(signature: Signature, raw: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs by alias as arrays of the signature's dtypes, in the signature's alias order;
    raises as TensorFlow Serving. The model runs them unchecked."""
    wanted = _input_dtypes(signature)
    if len(raw) == len(wanted) and all(alias in raw for alias in wanted):
        # The common case (a decoder's output above all): the right names, already arrays of
        # the right dtypes, taken as they are. Names are checked before any value is read,
        # since reading one may decode it and fail.
        inputs = {alias: raw[alias] for alias in wanted}
        if all(
            type(value) is np.ndarray and value.dtype == wanted[alias]
            for alias, value in inputs.items()
        ):
            return inputs
    _check_input_names(signature, raw)
    return {
        alias: _as_array(raw[alias], spec_.dtype, alias)
        for alias, spec_ in signature.inputs.items()
    }


def signature_key(spec: ModelSpec) -> str:
    return spec.signature_name or DEFAULT_SIGNATURE_KEY


def response(
    spec: ModelSpec, version: int, key: str, outputs: Mapping[str, Any]
) -> PredictResponse:
    """Outputs in sorted alias order, with the resolved version and signature key."""
    if len(outputs) == 1:
        ((alias, value),) = outputs.items()
        ordered = {alias: value if type(value) is np.ndarray else np.asarray(value)}
    else:
        ordered = {alias: np.asarray(outputs[alias]) for alias in sorted(outputs)}
    return PredictResponse(ModelSpec(spec.name, version, None, key), ordered)


def predict(
    manager: ServableManager, request: PredictRequest, max_bytes: int | None = None
) -> PredictResponse:
    """The blocking Predict (warmup, Python callers); transports go through the dispatcher."""
    spec = request.model_spec
    with manager.handle(spec.servable_request()) as handle:
        servable = handle.servable
        key = signature_key(spec)
        signature = signature_of(servable, key, request.inputs)
        aliases = output_aliases(signature, request.output_filter)
        inputs = checked_inputs(signature, request.inputs.decode(signature, max_bytes))
        return response(spec, handle.id.version, key, servable.run(key, inputs, aliases))
