"""``inference.GRPCInferenceService``: the Open Inference Protocol (KServe v2, Triton's gRPC API)
on the gRPC port, beside TensorFlow Serving's services, over the same request layer.

ModelInfer goes through ``inference_v2.infer`` and so through the dispatcher exactly as Predict
does (batching, deadlines, cancellation, the tensor-size limit). The health and metadata RPCs
only read the manager's state, which costs no more than a Predict's own look-up, so they answer
on the event loop too: probes keep answering while every worker is busy with model runs.
Errors are ``OpError``s; ``rpc`` turns them into gRPC statuses.
"""

from __future__ import annotations

from collections.abc import Callable

from protos.inference import grpc_service_pb2 as pb
from serving.grpc import inference_wire as wire
from serving.grpc.prediction_service import LARGE_RESPONSE_VALUES
from serving.grpc.rpc import Rpc
from serving.requests import inference_v2 as v2
from serving.requests.call_context import CallContext
from serving.requests.dispatcher import Dispatcher
from serving.requests.proto_convert import CHEAP_REQUEST_BYTES

# From the descriptor, which importing registers for reflection.
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].full_name


class InferenceService:
    def __init__(self, dispatcher: Dispatcher, ready: Callable[[], bool]) -> None:
        """``ready``: whether the server is ready (every configured model has an AVAILABLE
        version and it is not draining), as the health service says."""
        self.dispatcher = dispatcher
        self.manager = dispatcher.manager
        self._ready = ready

    def rpcs(self) -> dict[str, Rpc]:
        return {
            "ServerLive": Rpc(pb.ServerLiveRequest, self.server_live),
            "ServerReady": Rpc(pb.ServerReadyRequest, self.server_ready),
            "ModelReady": Rpc(pb.ModelReadyRequest, self.model_ready),
            "ServerMetadata": Rpc(pb.ServerMetadataRequest, self.server_metadata),
            "ModelMetadata": Rpc(pb.ModelMetadataRequest, self.model_metadata),
            "ModelInfer": Rpc(pb.ModelInferRequest, self.model_infer),
        }

    async def server_live(
        self, request: pb.ServerLiveRequest, call: CallContext, size: int
    ) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)  # answering is being live

    async def server_ready(
        self, request: pb.ServerReadyRequest, call: CallContext, size: int
    ) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self._ready())

    async def model_ready(
        self, request: pb.ModelReadyRequest, call: CallContext, size: int
    ) -> pb.ModelReadyResponse:
        return pb.ModelReadyResponse(
            ready=v2.model_ready(self.manager, request.name, request.version)
        )

    async def server_metadata(
        self, request: pb.ServerMetadataRequest, call: CallContext, size: int
    ) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(
            name=v2.SERVER_NAME, version=v2.server_version(), extensions=v2.EXTENSIONS
        )

    async def model_metadata(
        self, request: pb.ModelMetadataRequest, call: CallContext, size: int
    ) -> pb.ModelMetadataResponse:
        metadata = v2.model_metadata(self.manager, request.name, request.version)
        response = pb.ModelMetadataResponse(
            name=metadata.name, versions=metadata.versions, platform=metadata.platform
        )
        for tensors, field in ((metadata.inputs, response.inputs),
                               (metadata.outputs, response.outputs)):
            for tensor in tensors:
                field.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        return response

    async def model_infer(self, proto: pb.ModelInferRequest, call: CallContext, size: int) -> bytes:
        if size > CHEAP_REQUEST_BYTES and not proto.raw_input_contents:
            # Typed contents are read element by element.
            request = await self.dispatcher.offload(wire.infer_request, proto, size)
        else:
            request = wire.infer_request(proto, size)
        response = await v2.infer(self.dispatcher, request, call)
        if sum(o.array.size for o in response.outputs) > LARGE_RESPONSE_VALUES:
            return await self.dispatcher.offload(wire.infer_response, response)
        return wire.infer_response(response)
