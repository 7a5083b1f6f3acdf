"""``tensorflow.serving.PredictionService``: each RPC decodes its proto, calls the request layer
and encodes the answer. Errors are ``OpError``s; ``server`` turns them into gRPC statuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    predict_pb2,
    prediction_service_pb2,
    regression_pb2,
)
from serving.grpc.rpc import Rpc
from serving.requests import proto_convert as convert
from serving.requests.classify import classify
from serving.requests.metadata import get_model_metadata
from serving.requests.multi_inference import multi_inference
from serving.requests.predict import predict
from serving.requests.regress import regress
from serving.servable import ServableManager

# From the descriptor, which importing registers for reflection.
SERVICE_NAME = prediction_service_pb2.DESCRIPTOR.services_by_name["PredictionService"].full_name


@dataclass(frozen=True)
class PredictionOptions:
    # --enable_serialization_as_tensor_content: Predict outputs as raw bytes, not typed fields.
    tensor_content: bool = False
    # --enable_signature_method_name_check: classify/regress also require their method name.
    method_name_check: bool = False


class PredictionService:
    def __init__(self, manager: ServableManager, options: PredictionOptions) -> None:
        self.manager = manager
        self.options = options

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

    def predict(self, request: Any, context: Any) -> Any:
        response = predict(self.manager, convert.predict_request(request))
        return convert.predict_response(response, tensor_content=self.options.tensor_content)

    def classify(self, request: Any, context: Any) -> Any:
        response = classify(
            self.manager,
            convert.classify_request(request),
            method_name_check=self.options.method_name_check,
        )
        return convert.classify_response(response)

    def regress(self, request: Any, context: Any) -> Any:
        response = regress(
            self.manager,
            convert.regress_request(request),
            method_name_check=self.options.method_name_check,
        )
        return convert.regress_response(response)

    def multi_inference(self, request: Any, context: Any) -> Any:
        response = multi_inference(
            self.manager,
            convert.multi_inference_request(request),
            method_name_check=self.options.method_name_check,
        )
        return convert.multi_inference_response(response)

    def get_model_metadata(self, request: Any, context: Any) -> Any:
        response = get_model_metadata(self.manager, convert.metadata_request(request))
        return convert.metadata_response(response)
