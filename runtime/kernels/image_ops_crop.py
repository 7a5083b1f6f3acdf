"""CPU kernel: CropAndResize, which samples a fixed-size crop per box from a batch of NHWC images.

Boxes are ``[y1, x1, y2, x2]`` in normalized coordinates and may be flipped (``y1 > y2`` samples
upside down) or reach outside the image; crop pixel ``(y, x)`` of a box samples the image at
``y1 * (height - 1) + y * (y2 - y1) * (height - 1) / (crop_height - 1)`` (the box's centre for a
crop one pixel high), and alike for ``x``. A sampling point outside the image gives
``extrapolation_value``; inside, ``bilinear`` interpolates its four neighbours and ``nearest``
takes the one ``roundf`` picks. Everything is float32, in the order ``crop_and_resize_op.cc``
computes it, so the crops match TensorFlow's bit for bit; the output is float32 whatever the
image type.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError, OutOfRangeError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.string_common import attr_text, reject_when_run, shape_text

_F32 = np.float32
# Crop values computed per block of boxes (a few MiB of float32 temporaries).
_CHUNK_VALUES = 1 << 20


def _sample_points(start: np.ndarray, end: np.ndarray, size: int, crop: int) -> np.ndarray:
    """Sampling coordinates, ``[boxes, crop]``, along one axis of an image ``size`` long."""
    last = _F32(size - 1)
    if crop > 1:
        step = (end - start) * last / _F32(crop - 1)
        points: np.ndarray = start[:, None] * last + np.arange(crop, dtype=_F32) * step[:, None]
        return points
    # The kernel computes the centre in double (its 0.5 is a double literal).
    centre: np.ndarray = 0.5 * (start + end).astype(np.float64) * float(size - 1)
    return centre.astype(_F32)[:, None]


def _check(image: np.ndarray, boxes: np.ndarray, box_ind: np.ndarray,
           crop_size: np.ndarray) -> tuple[int, int]:
    if image.ndim != 4:
        raise InvalidArgumentError(f"input image must be 4-D{shape_text(image.shape)}")
    if not (image.shape[1] > 0 and image.shape[2] > 0):
        raise InvalidArgumentError("image dimensions must be positive")
    if boxes.ndim != 2:
        raise InvalidArgumentError(f"boxes must be 2-D, got: {shape_text(boxes.shape)}")
    if box_ind.ndim != 1:
        raise InvalidArgumentError(
            f"box_indices must be rank 1 but is shape {shape_text(box_ind.shape)}"
        )
    if boxes.size or box_ind.size:
        if boxes.shape[1] != 4:
            raise InvalidArgumentError("boxes must have 4 columns")
        if box_ind.shape[0] != boxes.shape[0]:
            raise InvalidArgumentError("box_index has incompatible shape")
    if crop_size.ndim != 1:
        raise InvalidArgumentError(f"crop_size must be 1-D{shape_text(crop_size.shape)}")
    if crop_size.shape[0] != 2:
        raise InvalidArgumentError(
            f"crop_size must have two elements{shape_text(crop_size.shape)}"
        )
    crop_height, crop_width = (int(v) for v in crop_size.tolist())
    if not (crop_height > 0 and crop_width > 0):
        raise InvalidArgumentError("crop dimensions must be positive")
    if ((box_ind < 0) | (box_ind >= image.shape[0])).any():
        raise OutOfRangeError("box_index has values outside [0, batch_size)")
    if not np.isfinite(boxes).all():
        raise InvalidArgumentError("Boxes contains at least one element that is not finite")
    return crop_height, crop_width


def _sample(image: np.ndarray, batch: np.ndarray, in_y: np.ndarray, in_x: np.ndarray,
            bilinear: bool) -> np.ndarray:
    """Crops ``[boxes, crop_height, crop_width, depth]`` for sampling points inside the image."""
    batch = batch[:, None, None]
    if not bilinear:
        # roundf: halves away from zero (the points are >= 0 here).
        rows, cols = np.floor(in_y), np.floor(in_x)
        rows_i = (rows + (in_y - rows >= 0.5)).astype(np.intp)
        cols_i = (cols + (in_x - cols >= 0.5)).astype(np.intp)
        nearest: np.ndarray = image[batch, rows_i[:, :, None], cols_i[:, None, :]]
        return nearest.astype(_F32)
    top, left = np.floor(in_y), np.floor(in_x)
    y_lerp, x_lerp = (in_y - top)[:, :, None, None], (in_x - left)[:, None, :, None]
    top_i, bottom_i = top.astype(np.intp), np.ceil(in_y).astype(np.intp)
    left_i, right_i = left.astype(np.intp), np.ceil(in_x).astype(np.intp)

    def pixels(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        values: np.ndarray = image[batch, rows[:, :, None], cols[:, None, :]]
        return values.astype(_F32, copy=False)

    # In place, in the kernel's order: top_left + (top_right - top_left) * x_lerp, ...
    top_left = pixels(top_i, left_i)
    upper = pixels(top_i, right_i) - top_left
    upper *= x_lerp
    upper += top_left
    bottom_left = pixels(bottom_i, left_i)
    lower: np.ndarray = pixels(bottom_i, right_i) - bottom_left
    lower *= x_lerp
    lower += bottom_left
    lower -= upper
    lower *= y_lerp
    lower += upper
    return lower


def _crop(image: np.ndarray, boxes: np.ndarray, box_ind: np.ndarray, crop_height: int,
          crop_width: int, bilinear: bool, extrapolation: np.float32) -> np.ndarray:
    num_boxes = box_ind.shape[0] if boxes.size or box_ind.size else 0
    _, height, width, depth = image.shape
    out = np.empty((num_boxes, crop_height, crop_width, depth), _F32)
    if out.size == 0:
        return out
    b = boxes.astype(_F32, copy=False)
    in_y = _sample_points(b[:, 0], b[:, 2], height, crop_height)  # [boxes, crop_height]
    in_x = _sample_points(b[:, 1], b[:, 3], width, crop_width)  # [boxes, crop_width]
    # NaN only from an overflowing box: sampled nowhere, where TF would read out of bounds.
    inside_y = (in_y >= 0) & (in_y <= _F32(height - 1))
    inside_x = (in_x >= 0) & (in_x <= _F32(width - 1))
    in_y, in_x = np.where(inside_y, in_y, _F32(0)), np.where(inside_x, in_x, _F32(0))
    outside = ~(inside_y[:, :, None] & inside_x[:, None, :])[..., None]
    batch = box_ind.astype(np.intp)
    # A few boxes at a time: bilinear sampling holds several crop-sized temporaries.
    step = max(1, _CHUNK_VALUES // (crop_height * crop_width * depth))
    for lo in range(0, num_boxes, step):
        hi = min(num_boxes, lo + step)
        out[lo:hi] = _sample(image, batch[lo:hi], in_y[lo:hi], in_x[lo:hi], bilinear)
        np.copyto(out[lo:hi], extrapolation, where=outside[lo:hi])
    return out


@kernel("CropAndResize")
def crop_and_resize(node: NodeContext) -> Callable[..., np.ndarray]:
    method = attr_text(node.attr("method"))
    if method not in ("bilinear", "nearest"):
        return reject_when_run(
            InvalidArgumentError(f"method must be 'bilinear' or 'nearest'{method}")
        )
    bilinear = method == "bilinear"
    extrapolation = _F32(node.attr("extrapolation_value"))

    def run(image: np.ndarray, boxes: np.ndarray, box_ind: np.ndarray,
            crop_size: np.ndarray) -> np.ndarray:
        crop_height, crop_width = _check(image, boxes, box_ind, crop_size)
        with np.errstate(all="ignore"):  # inf/NaN from extreme boxes are values, as in TF
            return _crop(image, boxes, box_ind, crop_height, crop_width, bilinear,
                         extrapolation)

    return run
