"""GetModelStatus and GetModelMetadata request layer."""

from __future__ import annotations

import pytest

from runtime.errors import Code, InvalidArgumentError, NotFoundError
from serving.core.server_core import ServerCore
from serving.requests.metadata import GetModelMetadataRequest, get_model_metadata
from serving.requests.model_spec import ModelSpec
from serving.requests.status import (
    GetModelStatusRequest,
    ModelVersionStatus,
    get_model_status,
)
from serving.servable import ManagerState


def test_status(store: ServerCore) -> None:
    available = ModelVersionStatus(123, ManagerState.AVAILABLE, Code.OK, "")
    for spec in (ModelSpec("half_plus_two"), ModelSpec("half_plus_two", version=123),
                 ModelSpec("half_plus_two", version_label="whatever")):
        response = get_model_status(store, GetModelStatusRequest(spec))
        assert response.model_version_status == (available,)


def test_status_errors(store: ServerCore) -> None:
    with pytest.raises(NotFoundError, match="^Could not find version 7 of model half_plus_two$"):
        get_model_status(store, GetModelStatusRequest(ModelSpec("half_plus_two", version=7)))
    with pytest.raises(NotFoundError, match="^Could not find any versions of model nope$"):
        get_model_status(store, GetModelStatusRequest(ModelSpec("nope")))
    with pytest.raises(InvalidArgumentError, match="^Missing ModelSpec$"):
        get_model_status(store, GetModelStatusRequest(None))


def test_metadata(store: ServerCore) -> None:
    response = get_model_metadata(store, GetModelMetadataRequest(ModelSpec("half_plus_two")))
    assert response.model_spec == ModelSpec("half_plus_two", 123)
    assert "serving_default" in response.signature_def
    assert "__saved_model_init_op" in response.signature_def  # as TensorFlow Serving shows it
    sig = response.signature_def["serving_default"]
    assert sig.method_name == "tensorflow/serving/predict"
    assert sig.inputs["x"].name == "serving_default_x:0"


def test_metadata_errors(store: ServerCore) -> None:
    spec = ModelSpec("half_plus_two")
    with pytest.raises(InvalidArgumentError) as info:
        get_model_metadata(store, GetModelMetadataRequest(spec, ()))
    assert info.value.message == (
        "GetModelMetadataRequest must specify at least one metadata_field"
    )
    with pytest.raises(InvalidArgumentError, match="^Metadata field x is not supported$"):
        get_model_metadata(store, GetModelMetadataRequest(spec, ("x",)))
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(nope\)$"):
        get_model_metadata(store, GetModelMetadataRequest(ModelSpec("nope")))
