"""Op definitions: image_ops (``tensorflow/core/ops/image_ops.cc``)."""

from __future__ import annotations

from runtime.dtypes import DataType
from runtime.ops.registry import define

_RESIZE_ATTRS = {"align_corners": False, "half_pixel_centers": False}

define("ResizeBilinear", inputs="images, size", outputs="resized_images", attrs=_RESIZE_ATTRS)
define(
    "ResizeNearestNeighbor",
    inputs="images, size",
    outputs="resized_images",
    attrs=_RESIZE_ATTRS,
)

# Decoding (``image_ops.cc``): every decode op takes a scalar string of encoded bytes.
_UINT8 = DataType.DT_UINT8
define(
    "DecodeJpeg",
    inputs="contents",
    outputs="image",
    attrs={
        "channels": 0,
        "ratio": 1,
        "fancy_upscaling": True,
        "try_recover_truncated": False,
        "acceptable_fraction": 1.0,
        "dct_method": "",
    },
)
define("DecodePng", inputs="contents", outputs="image", attrs={"channels": 0, "dtype": _UINT8})
define("DecodeGif", inputs="contents", outputs="image")
define("DecodeBmp", inputs="contents", outputs="image", attrs={"channels": 0})
define(
    "DecodeImage",
    inputs="contents",
    outputs="image",
    attrs={"channels": 0, "dtype": _UINT8, "expand_animations": True},
)
define(
    "ExtractJpegShape",
    inputs="contents",
    outputs="image_shape",
    attrs={"output_type": DataType.DT_INT32},
)
define("ResizeBicubic", inputs="images, size", outputs="resized_images", attrs=_RESIZE_ATTRS)

# Object detection: box selection and region cropping.
_F32 = DataType.DT_FLOAT
define("NonMaxSuppression", inputs="boxes, scores, max_output_size", outputs="selected_indices",
       attrs={"iou_threshold": 0.5})
_NMS_INPUTS = "boxes, scores, max_output_size, iou_threshold"
_NMS_TYPES = {"T": _F32, "T_threshold": _F32}
define("NonMaxSuppressionV2", inputs=_NMS_INPUTS, outputs="selected_indices", attrs=_NMS_TYPES)
define("NonMaxSuppressionV3", inputs=_NMS_INPUTS + ", score_threshold",
       outputs="selected_indices", attrs=_NMS_TYPES)
define("NonMaxSuppressionV4", inputs=_NMS_INPUTS + ", score_threshold",
       outputs="selected_indices, valid_outputs",
       attrs={**_NMS_TYPES, "pad_to_max_output_size": False})
define("NonMaxSuppressionV5", inputs=_NMS_INPUTS + ", score_threshold, soft_nms_sigma",
       outputs="selected_indices, selected_scores, valid_outputs",
       attrs={"T": _F32, "pad_to_max_output_size": False})
define("CropAndResize", inputs="image, boxes, box_ind, crop_size", outputs="crops",
       attrs={"method": "bilinear", "extrapolation_value": 0.0})
