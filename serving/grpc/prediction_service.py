"""``tensorflow.serving.PredictionService``: each RPC decodes its proto, calls the request layer
and encodes the answer. Errors are ``OpError``s; ``rpc`` turns them into gRPC statuses.

Predict runs on the event loop: the version's model runs in its batch queue (when it batches)
or on the executor, so a request waiting for its batch holds no thread; a run known to be
shorter than the hop to a worker thread and back (``serving.requests.run_site``, learned per model,
version and signature) runs inline. The other RPCs are the request layer's synchronous
functions and run on the executor.
"""

from __future__ import annotations

import asyncio
import time
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
from serving.grpc.executor import CallExecutor
from serving.grpc.predict_wire import PredictResponseWriter
from serving.grpc.rpc import Call, Rpc
from serving.requests import proto_convert as convert
from serving.requests.classify import classify
from serving.requests.metadata import get_model_metadata
from serving.requests.model_spec import ModelSpec
from serving.requests.multi_inference import multi_inference
from serving.requests.predict import PredictRequest, PredictResponse, predict, predict_async
from serving.requests.regress import regress
from serving.requests.run_site import REPROBE, RunSite
from serving.servable import ServableManager

# From the descriptor, which importing registers for reflection.
SERVICE_NAME = prediction_service_pb2.DESCRIPTOR.services_by_name["PredictionService"].full_name
_MAX_SITES = 4096  # model specs come from clients: forget them all rather than grow unbounded
# Beyond these, a request's tensors are decoded and its response written off the event loop.
LARGE_REQUEST_BYTES = 64 << 10
LARGE_RESPONSE_VALUES = 1 << 16


@dataclass(frozen=True)
class PredictionOptions:
    # --enable_serialization_as_tensor_content: Predict outputs as raw bytes, not typed fields.
    tensor_content: bool = False
    # --enable_signature_method_name_check: classify/regress also require their method name.
    method_name_check: bool = False


class PredictionService:
    def __init__(
        self, manager: ServableManager, options: PredictionOptions, executor: CallExecutor
    ) -> None:
        self.manager = manager
        self.options = options
        self.executor = executor  # model runs of versions that do not batch
        self._sites: dict[convert.SpecKey, RunSite] = {}
        self._writer = PredictResponseWriter(options.tensor_content)

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

    async def predict(self, proto: Any, call: Call) -> bytes:
        site = self._site(convert.required_spec_key(proto))
        inputs = convert.TensorInputs(proto.inputs)
        request = PredictRequest(site.spec, inputs, tuple(proto.output_filter))
        if call.request_bytes > LARGE_REQUEST_BYTES and not inputs.cheap():
            # Values in typed fields or strings, in bulk: decoded on a worker, so that the loop
            # goes on serving meanwhile.
            await asyncio.get_running_loop().run_in_executor(self.executor, inputs.decode_all)
        response = await self._predict(site, request, call)
        if sum([a.size for a in response.outputs.values()]) > LARGE_RESPONSE_VALUES:
            return await asyncio.get_running_loop().run_in_executor(
                self.executor, self._writer.write, response
            )
        return self._writer.write(response)

    async def _predict(self, site: RunSite, request: PredictRequest, call: Call) -> PredictResponse:
        if site.inline():
            return self._timed_predict(site, request)
        if site.batching is False and site.calls % REPROBE:
            # A version known not to batch, too slow for the loop: the whole request goes to a
            # worker, which does not start it if the caller has left meanwhile.
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self.executor.for_call(call.context), self._timed_predict, site, request
            )
        # Unknown yet, batching, or a re-probe: the batcher takes the run if the version
        # batches (no thread waits for it), else a worker; either way the site learns which.
        executor = site.executor(self.executor)
        response = await predict_async(self.manager, request, executor, call.context)
        executor.learned()
        return response

    def _timed_predict(self, site: RunSite, request: PredictRequest) -> PredictResponse:
        # CPU time: a run preempted by another process would not hold the loop any longer.
        start = time.thread_time()
        try:
            return predict(self.manager, request)
        finally:
            site.record(time.thread_time() - start)

    def _site(self, key: convert.SpecKey) -> RunSite:
        """What is known about the runs of one model spec (which also keeps the ModelSpec)."""
        site = self._sites.get(key)
        if site is None:
            if len(self._sites) >= _MAX_SITES:
                self._sites = {}
            site = self._sites[key] = RunSite(ModelSpec(*key))
        return site

    def classify(self, request: Any, call: Call) -> Any:
        response = classify(
            self.manager,
            convert.classify_request(request),
            method_name_check=self.options.method_name_check,
        )
        return convert.classify_response(response)

    def regress(self, request: Any, call: Call) -> Any:
        response = regress(
            self.manager,
            convert.regress_request(request),
            method_name_check=self.options.method_name_check,
        )
        return convert.regress_response(response)

    def multi_inference(self, request: Any, call: Call) -> Any:
        response = multi_inference(
            self.manager,
            convert.multi_inference_request(request),
            method_name_check=self.options.method_name_check,
        )
        return convert.multi_inference_response(response)

    def get_model_metadata(self, request: Any, call: Call) -> Any:
        response = get_model_metadata(self.manager, convert.metadata_request(request))
        return convert.metadata_response(response)
