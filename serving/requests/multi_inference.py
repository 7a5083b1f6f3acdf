"""MultiInference: several classify/regress signatures of one model version over the same
examples (gRPC only; warmup replays it too).

TensorFlow Serving's rules (``servables/tensorflow/multi_inference.cc``): the version is the
one the first task's ``model_spec`` resolves to; every task must name that model, no signature
may appear twice, each must exist and have the shape its method needs, and the method must be
classify or regress. All of that is checked before anything runs, then the input is read
(``Input is empty.``), then each task runs. Upstream fetches every task's outputs in one
session run; the runtime runs signatures one at a time, with the same results.

Nothing here is specific to a transport; it sits beside the gRPC adapter because gRPC is the
only API that has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtime.errors import InvalidArgumentError, UnimplementedError
from serving.core.single_servable import SingleServableManager
from serving.requests.classify import (
    ClassifyRequest,
    ClassifyResponse,
    check_classification_signature,
    classify,
)
from serving.requests.example_signature import (
    CLASSIFY_METHOD_NAME,
    REGRESS_METHOD_NAME,
    signature_key,
)
from serving.requests.model_spec import ModelSpec
from serving.requests.regress import (
    RegressRequest,
    RegressResponse,
    check_regression_signature,
    regress,
)
from serving.servable import Servable, ServableId, ServableManager

MULTI_INFERENCE = "MultiInference"  # the API its tasks' runs are timed under


@dataclass(frozen=True)
class InferenceTask:
    model_spec: ModelSpec
    method_name: str


@dataclass(frozen=True)
class MultiInferenceRequest:
    tasks: Sequence[InferenceTask]
    examples: Sequence[bytes]  # serialized tf.Examples (context merged in); may be empty


@dataclass(frozen=True)
class MultiInferenceResponse:
    """One result per task, in task order; each carries the model name, resolved version and
    resolved signature key."""

    results: list[ClassifyResponse | RegressResponse]


def multi_inference(
    manager: ServableManager, request: MultiInferenceRequest, *, method_name_check: bool = False
) -> MultiInferenceResponse:
    """Resolve the first task's model spec (an empty one without tasks, refused as upstream
    refuses it) and run every task against that version."""
    spec = request.tasks[0].model_spec if request.tasks else ModelSpec("")
    with manager.handle(spec.servable_request()) as handle:
        return run_multi_inference(
            handle.id, handle.servable, request, method_name_check=method_name_check
        )


def run_multi_inference(
    id: ServableId,
    model: Servable,
    request: MultiInferenceRequest,
    *,
    method_name_check: bool = False,
) -> MultiInferenceResponse:
    """Run the tasks against one already resolved version (the model names in the tasks are
    checked against each other, not against ``id``: warmup replays records made elsewhere)."""
    signature_defs = model.meta_graph.signature_def
    model_name = ""
    seen: set[str] = set()
    for task in request.tasks:
        name = task.model_spec.name
        if not name:
            raise InvalidArgumentError("Found ModelSpec with an empty model name.")
        if model_name and name != model_name:
            raise InvalidArgumentError(
                "All ModelSpecs in a MultiInferenceRequest must access the same model name."
            )
        model_name = name
        key = signature_key(task.model_spec.signature_name)
        if key in seen:
            raise InvalidArgumentError(f"Duplicate evaluation of signature: {key}")
        seen.add(key)
        if key not in signature_defs:
            raise InvalidArgumentError(f"Requested signature not found in model graph: {key}")
        if task.method_name == CLASSIFY_METHOD_NAME:
            check_classification_signature(signature_defs[key], method_name_check)
        elif task.method_name == REGRESS_METHOD_NAME:
            check_regression_signature(signature_defs[key], method_name_check)
        else:
            raise UnimplementedError(f"Unsupported signature method_name: {task.method_name}")
    if not request.examples:
        raise InvalidArgumentError("Input is empty.")
    single = SingleServableManager(id, model)
    results: list[ClassifyResponse | RegressResponse] = []
    for task in request.tasks:
        spec = ModelSpec(id.name, id.version, None, task.model_spec.signature_name)
        if task.method_name == CLASSIFY_METHOD_NAME:
            results.append(
                classify(
                    single,
                    ClassifyRequest(spec, request.examples),
                    method_name_check=method_name_check,
                    api=MULTI_INFERENCE,
                )
            )
        else:
            results.append(
                regress(
                    single,
                    RegressRequest(spec, request.examples),
                    method_name_check=method_name_check,
                    api=MULTI_INFERENCE,
                )
            )
    return MultiInferenceResponse(results)
