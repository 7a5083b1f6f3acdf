"""Predict: run a signature of the resolved model version on the request's inputs.

Inputs come either as arrays by alias (gRPC, Python callers) or as an ``InputDecoder`` that
turns the signature into arrays (REST, whose JSON can only be typed once the signature's input
dtypes are known). That choice also picks the message for an unknown signature: the decoder
path fails while parsing, as TensorFlow Serving's REST pre-check does (INVALID_ARGUMENT
``Serving signature name: "s" not found in signature def``); the array path fails as its
Predict does (FAILED_PRECONDITION ``Serving signature key "s" not found.``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import FailedPreconditionError, InvalidArgumentError
from runtime.saved_model import DEFAULT_SIGNATURE_KEY
from serving.requests.call_context import CallContext
from serving.requests.model_runner import start_run
from serving.requests.model_spec import ModelSpec
from serving.servable import ServableHandle, ServableManager


class InputDecoder(Protocol):
    def __call__(self, signature: Any) -> dict[str, np.ndarray]:
        """Arrays by alias for ``signature`` (a runtime ``Signature``); raises ``OpError``."""
        ...


@dataclass(frozen=True)
class PredictRequest:
    model_spec: ModelSpec
    inputs: Mapping[str, Any] | InputDecoder
    output_filter: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class PredictResponse:
    """``model_spec`` carries the model name, resolved version and resolved signature key;
    ``outputs`` are in sorted alias order."""

    model_spec: ModelSpec
    outputs: dict[str, np.ndarray]


def _join(names: Sequence[str]) -> str:
    return ",".join(sorted(names))


def _check_input_names(signature: Any, inputs: Mapping[str, Any]) -> None:
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


def _output_aliases(signature: Any, output_filter: Sequence[str]) -> list[str] | None:
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
    return sorted(output_filter) if output_filter else None


_NUMPY_DTYPES = "_numpy_input_dtypes"


def _input_dtypes(signature: Any) -> dict[str, np.dtype]:
    """The numpy dtype of each of the signature's inputs, worked out once per signature (kept
    on the signature object, as its own ``input_dtypes`` are)."""
    store: dict[str, Any] = getattr(signature, "__dict__", {})
    cached: dict[str, np.dtype] | None = store.get(_NUMPY_DTYPES)
    if cached is None:
        cached = {alias: dtypes.to_numpy(spec_.dtype) for alias, spec_ in signature.inputs.items()}
        store[_NUMPY_DTYPES] = cached
    return cached


def _checked(signature: Any, raw: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs by alias as arrays of the signature's dtypes; raises as TensorFlow Serving."""
    wanted = _input_dtypes(signature)
    if len(raw) == len(wanted) and all(alias in raw for alias in wanted):
        # The common case (a decoder's output above all): the right names, already arrays of
        # the right dtypes, taken as they are. Names are checked before any value is read,
        # since reading one may decode it and fail.
        inputs = {alias: raw[alias] for alias in wanted}
        if all(
            isinstance(value, np.ndarray) and value.dtype == wanted[alias]
            for alias, value in inputs.items()
        ):
            return inputs
    _check_input_names(signature, raw)
    return {
        alias: _as_array(raw[alias], spec_.dtype, alias)
        for alias, spec_ in signature.inputs.items()
    }


def _prepared(
    model: Any, request: PredictRequest
) -> tuple[str, dict[str, np.ndarray], list[str] | None]:
    """The signature key, the checked inputs by alias and the output aliases (None: all)."""
    key = request.model_spec.signature_name or DEFAULT_SIGNATURE_KEY
    raw: Mapping[str, Any]
    if callable(request.inputs):
        # The runtime's lookup error is the REST pre-check's INVALID_ARGUMENT.
        signature = model.signature(key)
        raw = request.inputs(signature)
    else:
        signature = model.signatures.get(key)
        if signature is None:
            raise FailedPreconditionError(f'Serving signature key "{key}" not found.')
        raw = request.inputs
    assert isinstance(raw, Mapping)
    inputs = _checked(signature, raw)
    aliases = _output_aliases(signature, request.output_filter) if request.output_filter else None
    return key, inputs, aliases


def _response(handle: Any, key: str, outputs: Mapping[str, Any]) -> PredictResponse:
    if len(outputs) == 1:
        ((alias, value),) = outputs.items()
        ordered = {alias: value if type(value) is np.ndarray else np.asarray(value)}
    else:
        ordered = {alias: np.asarray(outputs[alias]) for alias in sorted(outputs)}
    return PredictResponse(ModelSpec(handle.id.name, handle.id.version, None, key), ordered)


def predict(manager: ServableManager, request: PredictRequest) -> PredictResponse:
    with manager.handle(request.model_spec.servable_request()) as handle:
        key, inputs, aliases = _prepared(handle.servable, request)
        return _response(handle, key, handle.servable.run(key, inputs, aliases))


def _start(
    manager: ServableManager,
    request: PredictRequest,
    executor: Executor | None,
    call: CallContext | None,
) -> tuple[ServableHandle, str, asyncio.Future[dict[str, np.ndarray]]]:
    handle = manager.handle(request.model_spec.servable_request())
    try:
        key, inputs, aliases = _prepared(handle.servable, request)
    except BaseException:
        handle.release()
        raise
    return handle, key, start_run(handle, key, inputs, aliases, executor, call)  # releases it


async def predict_async(
    manager: ServableManager,
    request: PredictRequest,
    executor: Executor | None = None,
    call: CallContext | None = None,
) -> PredictResponse:
    """``predict`` for an event loop: the checks run here, the model runs in the batcher (when
    the version batches) or on ``executor``, and the version stays loaded until the run is over,
    even when the caller stops waiting first."""
    handle, key, outputs = _start(manager, request, executor, call)
    return _response(handle, key, await outputs)


def predict_outputs_async(
    manager: ServableManager,
    request: PredictRequest,
    executor: Executor | None = None,
    call: CallContext | None = None,
) -> asyncio.Future[dict[str, np.ndarray]]:
    """``predict_async`` for a caller that needs only the outputs, by alias (unordered): the
    checks run (and raise) at once, the future answers the run. For the per-request cost of a
    transport's hot path: no coroutine of its own, no response object."""
    return _start(manager, request, executor, call)[2]
