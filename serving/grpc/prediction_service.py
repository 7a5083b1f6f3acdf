"""``tensorflow.serving.PredictionService``: each RPC decodes its proto, calls the request layer
through the dispatcher and encodes the answer. Errors are ``OpError``s; ``rpc`` turns them into
gRPC statuses.

Predict runs on the event loop, and the dispatcher decides where its model runs (inline, the
batcher, or a worker). The other RPCs are the request layer's synchronous functions and run on
the dispatcher's workers.
"""

from __future__ import annotations

from typing import Any

from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    predict_pb2,
    prediction_service_pb2,
    regression_pb2,
)
from serving.grpc.predict_wire import PredictResponseWriter
from serving.grpc.rpc import Rpc, model_name
from serving.metrics.catalog import METRICS
from serving.requests import proto_convert as convert
from serving.requests.call_context import CallContext
from serving.requests.classify import classify
from serving.requests.dispatcher import Dispatcher
from serving.requests.metadata import get_model_metadata
from serving.requests.multi_inference import multi_inference
from serving.requests.regress import regress

# From the descriptor, which importing registers for reflection.
SERVICE_NAME = prediction_service_pb2.DESCRIPTOR.services_by_name["PredictionService"].full_name
# Beyond this, a response is written off the event loop.
LARGE_RESPONSE_VALUES = 1 << 16


def record_examples(request: Any) -> None:
    """A MultiInference request's examples into ``request_example_counts`` and
    ``request_example_count_total``, as upstream counts them."""
    kind = request.input.WhichOneof("kind")
    if kind is None:
        return
    examples = len(getattr(request.input, kind).examples)
    cell = (model_name(request),)
    METRICS.request_example_counts.observe(cell, examples)
    METRICS.request_example_count_total.add(cell, examples)


class PredictionService:
    def __init__(self, dispatcher: Dispatcher, tensor_content: bool = False) -> None:
        """``tensor_content``: --enable_serialization_as_tensor_content, Predict outputs as raw
        bytes, not typed fields."""
        self.dispatcher = dispatcher
        self.manager = dispatcher.manager
        self.method_name_check = dispatcher.options.method_name_check
        self._writer = PredictResponseWriter(tensor_content)

    def rpcs(self) -> dict[str, Rpc]:
        return {
            "Classify": Rpc(classification_pb2.ClassificationRequest, self.classify),
            "Regress": Rpc(regression_pb2.RegressionRequest, self.regress),
            "Predict": Rpc(predict_pb2.PredictRequest, self.predict),
            "MultiInference": Rpc(inference_pb2.MultiInferenceRequest, self.multi_inference),
            "GetModelMetadata": Rpc(
                get_model_metadata_pb2.GetModelMetadataRequest, self.get_model_metadata
            ),
        }

    async def predict(self, proto: Any, call: CallContext, size: int) -> bytes:
        name, version, label, signature = convert.required_spec_key(proto)
        response = await self.dispatcher.predict(
            name, version, label, signature, convert.TensorInputs(proto.inputs, size),
            tuple(proto.output_filter), call,
        )
        if sum([a.size for a in response.outputs.values()]) > LARGE_RESPONSE_VALUES:
            return await self.dispatcher.offload(self._writer.write, response)
        return self._writer.write(response)

    def classify(self, request: Any, call: CallContext) -> Any:
        response = classify(
            self.manager,
            convert.classify_request(request),
            method_name_check=self.method_name_check,
        )
        return convert.classify_response(response)

    def regress(self, request: Any, call: CallContext) -> Any:
        response = regress(
            self.manager,
            convert.regress_request(request),
            method_name_check=self.method_name_check,
        )
        return convert.regress_response(response)

    def multi_inference(self, request: Any, call: CallContext) -> Any:
        record_examples(request)
        response = multi_inference(
            self.manager,
            convert.multi_inference_request(request),
            method_name_check=self.method_name_check,
        )
        return convert.multi_inference_response(response)

    def get_model_metadata(self, request: Any, call: CallContext) -> Any:
        response = get_model_metadata(self.manager, convert.metadata_request(request))
        return convert.metadata_response(response)
