"""The REST predict server a user would write instead of deploying a model server: FastAPI, a
pydantic body, TensorFlow calling the SavedModel's signature. A reference point for the serving
benchmark, run in TensorFlow's environment:

    .venv-tf/bin/python bench/fastapi_tf_server.py --port P --model_dir DIR/1

``POST /v1/models/<name>:predict`` with ``{"instances": [[...], ...]}`` (one float32 input of rank
2) answers ``{"predictions": [[...], ...]}`` (the signature's first output). The handler is a plain
``def``, so FastAPI runs it in its thread pool, as its documentation advises for blocking calls;
uvicorn, one worker, with its default event loop and HTTP parser (uvloop and httptools when
installed, as ``uvicorn[standard]`` does).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel


class PredictBody(BaseModel):
    instances: list[list[float]]


def make_app(model_dir: str) -> FastAPI:
    model = tf.saved_model.load(model_dir)
    signature = model.signatures["serving_default"]
    input_name = next(iter(signature.structured_input_signature[1]))
    output_name = min(signature.structured_outputs)
    app = FastAPI()

    @app.post("/v1/models/{name}:predict")
    def predict(name: str, body: PredictBody) -> dict[str, Any]:
        features = tf.constant(body.instances, dtype=tf.float32)
        outputs = signature(**{input_name: features})
        return {"predictions": outputs[output_name].numpy().tolist()}

    return app


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model_dir", required=True, help="a SavedModel directory (a version)")
    args = parser.parse_args(argv)
    app = make_app(args.model_dir)
    uvicorn.run(app, host="127.0.0.1", port=args.port, workers=1, access_log=False,
                log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
