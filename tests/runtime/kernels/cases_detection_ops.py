"""Kernel cases for NonMaxSuppression V1-V5 and CropAndResize, recorded via tf.raw_ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(17)
CASES: list[Case] = []


def f32(*v: Any) -> np.ndarray:
    return np.array(v, np.float32)


def scalar(v: float, dtype: type = np.float32) -> np.ndarray:
    return np.array(v, dtype)


def count(n: Any) -> np.ndarray:
    return np.array(n, np.int32)


def clustered_boxes(n: int, clusters: int = 6) -> np.ndarray:
    """Boxes jittered around a few centres, so that many overlap; some corners flipped."""
    centres = R.uniform(0.1, 0.9, size=(clusters, 2))
    pick = centres[R.integers(0, clusters, n)] + R.normal(0, 0.03, size=(n, 2))
    half = R.uniform(0.02, 0.15, size=(n, 2))
    boxes = np.concatenate([pick - half, pick + half], axis=1)
    flip = R.random(n) < 0.2
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


def nms(name: str, op: str, boxes: np.ndarray, scores: np.ndarray, max_out: Any,
        *thresholds: np.ndarray, **attrs: Any) -> None:
    inputs: dict[str, Any] = {"boxes": boxes, "scores": scores, "max_output_size": count(max_out)}
    for key, value in zip(("iou_threshold", "score_threshold", "soft_nms_sigma"), thresholds):
        inputs[key] = value
    node_attrs: dict[str, Any] = {}
    if op != "NonMaxSuppression":
        node_attrs["T"] = boxes.dtype.type
        if op != "NonMaxSuppressionV5":
            node_attrs["T_threshold"] = thresholds[0].dtype.type
    CASES.append(Case(f"{op}_{name}", op, inputs, attrs, node_attrs=node_attrs,
                      expect_error="error" in name))


BOXES = clustered_boxes(40)
SCORES = R.random(40).astype(np.float32)
BIG_BOXES = clustered_boxes(600, clusters=40)
BIG_SCORES = R.random(600).astype(np.float32)
# Identical boxes and equal scores: the lower index wins each tie.
TIED_BOXES = f32([0, 0, 1, 1], [0, 0, 1, 1], [0.5, 0.5, 1.5, 1.5], [0, 0, 1, 1], [2, 2, 3, 3])
TIED_SCORES = f32(0.5, 0.5, 0.5, 0.9, 0.5)
# Degenerate boxes: zero area overlaps nothing; a flipped box is the same box.
ODD_BOXES = f32([0, 0, 0, 1], [0, 0, 1, 1], [1, 1, 0, 0], [0.2, 0.2, 0.2, 0.2], [0, 0, 1, 0.9])
ODD_SCORES = f32(0.9, 0.8, 0.7, 0.6, 0.5)
SPECIAL_SCORES = f32(0.3, np.nan, -np.inf, np.inf, 0.3)
NONFINITE_BOXES = f32([0, 0, 1, 1], [0, 0, np.inf, 1], [np.nan, 0, 1, 1], [0, 0, 1, 1],
                      [-np.inf, 0, np.inf, 1])
EMPTY_BOXES, EMPTY_SCORES = np.zeros((0, 4), np.float32), np.zeros(0, np.float32)

nms("typical", "NonMaxSuppression", BOXES, SCORES, 10)
nms("iou_attr", "NonMaxSuppression", BOXES, SCORES, 40, iou_threshold=0.2)
nms("ties", "NonMaxSuppression", TIED_BOXES, TIED_SCORES, 5)
nms("special_scores", "NonMaxSuppression", ODD_BOXES, SPECIAL_SCORES, 5)
nms("error_iou_attr", "NonMaxSuppression", BOXES, SCORES, 5, iou_threshold=1.5)
nms("error_max_output_rank", "NonMaxSuppression", BOXES, SCORES, [5])

IOU = scalar(0.5)
for _op in ("NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4"):
    _extra = [] if _op == "NonMaxSuppressionV2" else [scalar(0.25)]
    _lowest = [] if _op == "NonMaxSuppressionV2" else [scalar(-np.inf)]
    nms("typical", _op, BOXES, SCORES, 10, IOU, *_extra)
    nms("big", _op, BIG_BOXES, BIG_SCORES, 100, scalar(0.6), *_extra)
    nms("all_boxes", _op, BOXES, SCORES, 100, scalar(0.7), *_lowest)
    nms("iou_zero", _op, BOXES, SCORES, 40, scalar(0.0), *_lowest)
    nms("iou_one", _op, BOXES, SCORES, 40, scalar(1.0), *_lowest)
    nms("ties", _op, TIED_BOXES, TIED_SCORES, 5, IOU, *_lowest)
    nms("odd_boxes", _op, ODD_BOXES, ODD_SCORES, 5, scalar(0.3), *_lowest)
    nms("special_scores", _op, ODD_BOXES, SPECIAL_SCORES, 5, IOU, *_lowest)
    nms("nonfinite_boxes", _op, NONFINITE_BOXES, ODD_SCORES, 5, IOU, *_lowest)
    nms("max_zero", _op, BOXES, SCORES, 0, IOU, *_extra)
    nms("no_boxes", _op, EMPTY_BOXES, EMPTY_SCORES, 3, IOU, *_extra)
    nms("half", _op, BOXES.astype(np.float16), SCORES.astype(np.float16), 10,
        IOU.astype(np.float16), *(t.astype(np.float16) for t in _extra))
    nms("half_boxes_float_thresholds", _op, BOXES.astype(np.float16),
        SCORES.astype(np.float16), 10, scalar(0.45), *_extra)
    nms("error_iou_range", _op, BOXES, SCORES, 5, scalar(-0.1), *_extra)
    nms("error_iou_nan", _op, BOXES, SCORES, 5, scalar(np.nan), *_extra)
    nms("error_iou_rank", _op, BOXES, SCORES, 5, f32(0.5), *_extra)
    nms("error_max_output_rank", _op, BOXES, SCORES, [5], IOU, *_extra)
    nms("error_max_output_negative", _op, BOXES, SCORES, -1, IOU, *_extra)
    nms("error_boxes_rank", _op, BOXES.reshape(-1), SCORES, 5, IOU, *_extra)
    nms("error_boxes_columns", _op, BOXES[:, :3], SCORES, 5, IOU, *_extra)
    nms("error_scores_rank", _op, BOXES, SCORES[:, None], 5, IOU, *_extra)
    nms("error_scores_size", _op, BOXES, SCORES[:-1], 5, IOU, *_extra)
    if _extra:
        nms("score_threshold_equal", _op, ODD_BOXES, ODD_SCORES, 5, scalar(0.0),
            scalar(0.7))
        nms("score_threshold_high", _op, BOXES, SCORES, 10, IOU, scalar(2.0))
        nms("error_score_threshold_rank", _op, BOXES, SCORES, 5, IOU, f32(0.1))
for _pad in (False, True):
    nms(f"pad_{_pad}", "NonMaxSuppressionV4", BOXES, SCORES, 30, scalar(0.3), scalar(0.5),
        pad_to_max_output_size=_pad)
    nms(f"pad_{_pad}_nothing", "NonMaxSuppressionV4", BOXES, SCORES, 4, IOU, scalar(5.0),
        pad_to_max_output_size=_pad)

V5 = "NonMaxSuppressionV5"
for _sigma in (0.0, 0.5, 0.1):
    _s = scalar(_sigma)
    nms(f"sigma{_sigma}", V5, BOXES, SCORES, 20, IOU, scalar(0.05), _s)
    nms(f"sigma{_sigma}_big", V5, BIG_BOXES, BIG_SCORES, 100, IOU, scalar(0.01), _s)
    nms(f"sigma{_sigma}_ties", V5, TIED_BOXES, TIED_SCORES, 5, IOU, scalar(0.0), _s)
    nms(f"sigma{_sigma}_nonfinite", V5, NONFINITE_BOXES, ODD_SCORES, 5, IOU, scalar(0.1), _s)
    nms(f"sigma{_sigma}_pad", V5, BOXES, SCORES, 50, IOU, scalar(0.3), _s,
        pad_to_max_output_size=True)
    nms(f"sigma{_sigma}_half", V5, BOXES.astype(np.float16), SCORES.astype(np.float16), 20,
        *(t.astype(np.float16) for t in (IOU, scalar(0.05), _s)))
nms("soft_iou_one", V5, BOXES, SCORES, 40, scalar(1.0), scalar(0.2), scalar(0.3))
nms("soft_lowest_threshold", V5, ODD_BOXES, ODD_SCORES, 5, IOU, scalar(-np.inf), scalar(1.0))
nms("soft_no_boxes", V5, EMPTY_BOXES, EMPTY_SCORES, 5, IOU, scalar(0.0), scalar(0.5))
nms("error_sigma_negative", V5, BOXES, SCORES, 5, IOU, scalar(0.0), scalar(-0.5))
nms("error_sigma_rank", V5, BOXES, SCORES, 5, IOU, scalar(0.0), f32(0.5))
nms("error_max_output_rank", V5, BOXES, SCORES, [3], IOU, scalar(0.0), scalar(0.5))
nms("error_iou_range", V5, BOXES, SCORES, 3, scalar(2.0), scalar(0.0), scalar(0.5))
nms("error_scores_size", V5, BOXES, SCORES[:3], 3, IOU, scalar(0.0), scalar(0.5))

# --- CropAndResize -------------------------------------------------------------------------------


def crop(name: str, image: np.ndarray, boxes: Any, box_ind: Any, size: Any,
         **attrs: Any) -> None:
    CASES.append(Case(
        f"CropAndResize_{name}", "CropAndResize",
        {"image": image, "boxes": np.asarray(boxes, np.float32),
         "box_ind": np.asarray(box_ind, np.int32), "crop_size": np.asarray(size, np.int32)},
        attrs, node_attrs={"T": image.dtype.type}, expect_error="error" in name))


IMAGE = R.uniform(-10, 10, size=(2, 9, 11, 3)).astype(np.float32)
CROP_BOXES = np.concatenate([
    R.uniform(0, 1, size=(6, 4)),
    [[0.1, 0.2, 0.8, 0.9],  # inside
     [0.9, 0.8, 0.1, 0.2],  # flipped: upside down and mirrored
     [-0.3, -0.2, 1.4, 1.1],  # reaching outside on every side
     [1.2, 0.1, 1.5, 0.5],  # wholly below the image
     [0.5, 0.5, 0.5, 0.5],  # a point
     [0.0, 0.0, 1.0, 1.0],  # the whole image: corners exactly on pixels
     [0.25, 0.0, 0.25, 1.0]],  # one row
]).astype(np.float32)
CROP_INDEX = R.integers(0, 2, len(CROP_BOXES)).astype(np.int32)
for _method in ("bilinear", "nearest"):
    _m = {"method": _method}
    crop(f"{_method}_typical", IMAGE, CROP_BOXES, CROP_INDEX, [5, 7], **_m)
    crop(f"{_method}_extrapolate", IMAGE, CROP_BOXES, CROP_INDEX, [6, 4],
         extrapolation_value=-1.5, **_m)
    crop(f"{_method}_one_by_one", IMAGE, CROP_BOXES, CROP_INDEX, [1, 1], **_m)
    crop(f"{_method}_one_row", IMAGE, CROP_BOXES, CROP_INDEX, [1, 6], **_m)
    crop(f"{_method}_upsample", IMAGE[:1, :3, :4], CROP_BOXES[:4], [0] * 4, [13, 17], **_m)
    crop(f"{_method}_single_pixel_image", IMAGE[:, :1, :1], CROP_BOXES, CROP_INDEX, [3, 3], **_m)
    crop(f"{_method}_halves", IMAGE[:1, :3, :3], [[0, 0, 0.5, 0.5], [0.25, 0.25, 0.75, 0.75]],
         [0, 0], [3, 3], **_m)
    for _type in (np.uint8, np.int16, np.int32, np.int64, np.float16, np.float64):
        _image = (IMAGE * 10).astype(_type) if np.dtype(_type).kind in "iu" else IMAGE
        if _type is np.uint8:
            _image = (np.abs(IMAGE) * 25).astype(np.uint8)
        crop(f"{_method}_{np.dtype(_type).name}", _image.astype(_type), CROP_BOXES, CROP_INDEX,
             [4, 5], **_m)
    crop(f"{_method}_no_boxes", IMAGE, np.zeros((0, 4)), np.zeros(0), [3, 3], **_m)
crop("no_channels", IMAGE[..., :0], CROP_BOXES, CROP_INDEX, [2, 2])
crop("big", R.uniform(0, 255, size=(3, 64, 48, 8)).astype(np.float32),
     R.uniform(-0.1, 1.1, size=(50, 4)), R.integers(0, 3, 50), [14, 14])
crop("error_box_index_range", IMAGE, CROP_BOXES[:2], [0, 2], [3, 3])
crop("error_box_index_negative", IMAGE, CROP_BOXES[:2], [-1, 0], [3, 3])
crop("error_nonfinite_box", IMAGE, [[0, 0, np.nan, 1]], [0], [3, 3])
crop("error_crop_size_zero", IMAGE, CROP_BOXES[:1], [0], [0, 3])
crop("error_crop_size_three", IMAGE, CROP_BOXES[:1], [0], [3, 3, 3])
crop("error_crop_size_rank", IMAGE, CROP_BOXES[:1], [0], [[3, 3]])
crop("error_image_rank", IMAGE[0], CROP_BOXES[:1], [0], [3, 3])
crop("error_image_empty", IMAGE[:, :0], CROP_BOXES[:1], [0], [3, 3])
crop("error_boxes_rank", IMAGE, CROP_BOXES[0], [0], [3, 3])
crop("error_boxes_columns", IMAGE, CROP_BOXES[:1, :3], [0], [3, 3])
crop("error_box_ind_rank", IMAGE, CROP_BOXES[:1], [[0]], [3, 3])
crop("error_box_ind_size", IMAGE, CROP_BOXES[:2], [0], [3, 3])
crop("error_method", IMAGE, CROP_BOXES[:1], [0], [3, 3], method="area")
