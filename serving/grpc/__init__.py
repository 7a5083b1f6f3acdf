"""The gRPC transport: TensorFlow Serving's ``PredictionService`` and ``ModelService`` as thin
adapters over the request layer, plus the standard health and reflection services.

``start_grpc_server(core, GrpcOptions(...))`` builds and starts the server (see ``server``).
"""
