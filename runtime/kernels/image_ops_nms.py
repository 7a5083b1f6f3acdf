"""CPU kernels: NonMaxSuppression V1 to V5, greedy box selection for object detection exports.

One algorithm serves them all (``non_max_suppression_op.cc``): candidates scoring above
``score_threshold`` are taken best first (ties: lower box index first); a candidate is dropped
when its IoU with a box already selected exceeds ``iou_threshold``. With a soft-NMS ``sigma``
(V5) it is never dropped that way: each overlap scales its score by ``exp(-0.5 * iou**2 /
sigma)``, and a candidate whose score changed goes back into the queue, or out once it is no
longer above ``score_threshold``.

IoU is computed in float32 from the boxes' corners in either order; scores, thresholds and
the soft-NMS arithmetic are in the boxes' type ``T`` (float32 or half), with exp as expf. The
usual case, hard suppression with finite boxes, decides blocks of candidates with array
operations; the rest (soft-NMS, non-finite boxes whose IoU may be NaN) follows TensorFlow's loop
step by step. Both give TensorFlow's indices and scores exactly.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.string_common import shape_text

_F32 = np.float32
# A numpy scalar of the boxes' type T (float32 or float16): compared and multiplied in T.
Scalar = Any
# Candidates decided together by the hard-suppression path.
_BLOCK = 256


@dataclass(frozen=True)
class _Corners:
    """Each box's corners ordered (min before max), and its area, in float32."""

    ymin: np.ndarray
    xmin: np.ndarray
    ymax: np.ndarray
    xmax: np.ndarray
    area: np.ndarray

    @classmethod
    def of(cls, boxes: np.ndarray) -> _Corners:
        b = boxes.astype(_F32)
        y1, x1, y2, x2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        # Eigen's mini/maxi: std::min/max, which keep the first argument when a NaN is compared.
        ymin, xmin = np.where(y2 < y1, y2, y1), np.where(x2 < x1, x2, x1)
        ymax, xmax = np.where(y1 < y2, y2, y1), np.where(x1 < x2, x2, x1)
        return cls(ymin, xmin, ymax, xmax, (ymax - ymin) * (xmax - xmin))

    def iou(self, i: Any, j: Any) -> np.ndarray:
        """IOU(i, j) of the kernel: ``i`` the candidate, ``j`` a selected box; either an array."""
        ymin = np.where(self.ymin[i] < self.ymin[j], self.ymin[j], self.ymin[i])
        xmin = np.where(self.xmin[i] < self.xmin[j], self.xmin[j], self.xmin[i])
        ymax = np.where(self.ymax[j] < self.ymax[i], self.ymax[j], self.ymax[i])
        xmax = np.where(self.xmax[j] < self.xmax[i], self.xmax[j], self.xmax[i])
        height, width = ymax - ymin, xmax - xmin
        inter = np.where(height < 0, _F32(0), height) * np.where(width < 0, _F32(0), width)
        area_i, area_j = self.area[i], self.area[j]
        iou = inter / (area_i + area_j - inter)
        return np.where((area_i <= 0) | (area_j <= 0), _F32(0), iou)


@dataclass(frozen=True)
class _Params:
    max_output: int
    iou_threshold: Scalar
    score_threshold: Scalar
    sigma: Scalar


def _overlapping(selected: np.ndarray, candidates: np.ndarray, p: _Params,
                 dtype: np.dtype) -> np.ndarray:
    """``[s, c]``: IOU(candidate c, selected box s) > threshold, for finite boxes given as rows
    ymin, xmin, ymax, xmax, area (where Eigen's mini/maxi are plain minimum/maximum)."""
    s, c = selected[:, :, None], candidates[:, None, :]
    height = np.minimum(c[2], s[2]) - np.maximum(c[0], s[0])
    width = np.minimum(c[3], s[3]) - np.maximum(c[1], s[1])
    inter = np.maximum(height, _F32(0)) * np.maximum(width, _F32(0))
    iou = inter / (c[4] + s[4] - inter)
    # A box without area has IoU 0 with everything, which no threshold in [0, 1] exceeds.
    over: np.ndarray = (iou.astype(dtype, copy=False) > p.iou_threshold) & (c[4] > 0) & (s[4] > 0)
    return over


def _hard_nms(corners: _Corners, order: np.ndarray, p: _Params, dtype: np.dtype) -> list[int]:
    """Hard suppression when every box is finite. Candidates are taken best first a block at a
    time: those a box selected in earlier blocks overlaps go at once, the rest are decided in
    order against the block's own selections. The same pairs are compared as in the kernel
    (each candidate with every box selected before it), so the outcome is the same."""
    table = np.stack([corners.ymin, corners.xmin, corners.ymax, corners.xmax, corners.area])
    selected: list[int] = []
    chosen = table[:, :0]
    for start in range(0, order.size, _BLOCK):
        if len(selected) >= p.max_output:
            break
        block = order[start:start + _BLOCK]
        candidates = table[:, block]
        dropped = np.zeros(block.size, dtype=bool)
        if chosen.shape[1]:
            dropped |= _overlapping(chosen, candidates, p, dtype).any(axis=0)
        within = _overlapping(candidates, candidates, p, dtype)
        picked: list[int] = []
        for i in np.flatnonzero(~dropped).tolist():
            if dropped[i]:
                continue
            picked.append(i)
            selected.append(int(block[i]))
            if len(selected) == p.max_output:
                break
            dropped |= within[i]  # only later candidates are still to be decided
        chosen = np.concatenate([chosen, candidates[:, picked]], axis=1)
    return selected


def _exp(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    # expf, then (for half) rounded to half as Eigen's half exp does.
    return np.exp(x.astype(np.float64)).astype(_F32).astype(dtype)


def _general_nms(
    corners: _Corners, scores: np.ndarray, order: np.ndarray, p: _Params, dtype: np.dtype
) -> tuple[list[int], list[Any]]:
    """The kernel's loop as written: a priority queue of (score, index, first selected box not
    yet compared with), rescored by every overlap and pushed back while above the threshold."""
    soft = p.sigma > 0
    scale = dtype.type(dtype.type(-0.5) / p.sigma) if soft else dtype.type(0)
    # Entries sort best score first, then lowest index; each carries its current score (in T)
    # and the first selected box it has yet to be compared with.
    queue = [(-float(scores[i]), int(i), 0, scores[i]) for i in order]
    heapq.heapify(queue)
    selected: list[int] = []
    kept: list[Any] = []
    while queue and len(selected) < p.max_output:
        _, index, begin, original = heapq.heappop(queue)
        against = np.array(selected[begin:][::-1], dtype=np.int64)  # newest first
        score = original
        hard = False
        if against.size:
            sim = corners.iou(index, against).astype(dtype)
            weight = _exp((scale * sim) * sim, dtype)
            if not soft:
                weight = np.where(sim <= p.iou_threshold, weight, dtype.type(0))
            running = np.multiply.accumulate(np.concatenate([[original], weight]).astype(dtype))
            over = (sim > p.iou_threshold) if not soft else np.zeros(sim.shape, bool)
            stop = np.flatnonzero(over | (running[1:] <= p.score_threshold))
            last = int(stop[0]) if stop.size else against.size - 1
            hard = bool(over[last])
            score = running[last + 1]
        if hard:
            continue
        if score == original:
            selected.append(index)
            kept.append(score)
        elif score > p.score_threshold:
            heapq.heappush(queue, (-float(score), index, len(selected), score))
    return selected, kept


def _select(
    boxes: np.ndarray, scores: np.ndarray, p: _Params, dtype: np.dtype
) -> tuple[list[int], list[Any]]:
    scores = scores.astype(dtype, copy=False)
    candidates = np.flatnonzero(scores > p.score_threshold)
    # Best first; a stable sort keeps equal scores in index order.
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    corners = _Corners.of(boxes)
    with np.errstate(all="ignore"):
        if p.sigma > 0 or not np.isfinite(corners.area).all():
            return _general_nms(corners, scores, order, p, dtype)
        selected = _hard_nms(corners, order, p, dtype)
    return selected, [scores[i] for i in selected]


# --- argument checks, in TensorFlow's order and words --------------------------------------------


def _scalar(value: np.ndarray, name: str, with_rank: bool = False) -> np.ndarray:
    if value.ndim != 0:
        rank = f" (Shape must be rank 0 but is rank {value.ndim})" if with_rank else ""
        raise InvalidArgumentError(
            f"{name} must be 0-D, got shape {shape_text(value.shape)}{rank}"
        )
    return value


def _check_boxes(boxes: np.ndarray, scores: np.ndarray) -> None:
    if boxes.ndim != 2:
        raise InvalidArgumentError(
            f"boxes must be 2-D{shape_text(boxes.shape)} (Shape must be rank 2 but is rank "
            f"{boxes.ndim})"
        )
    if boxes.shape[1] != 4:
        raise InvalidArgumentError(
            f"boxes must have 4 columns (Dimension must be 4 but is {boxes.shape[1]})"
        )
    if scores.ndim != 1:
        raise InvalidArgumentError(
            f"scores must be 1-D{shape_text(scores.shape)} (Shape must be rank 1 but is rank "
            f"{scores.ndim})"
        )
    if scores.shape[0] != boxes.shape[0]:
        raise InvalidArgumentError(
            "scores has incompatible shape (Dimensions must be equal, but are "
            f"{boxes.shape[0]} and {scores.shape[0]})"
        )


def _iou_threshold(value: Scalar) -> Scalar:
    if not (value >= 0 and value <= 1):
        raise InvalidArgumentError("iou_threshold must be in [0, 1]")
    return value


def _max_output(value: np.ndarray) -> int:
    size = int(value)
    if size < 0:
        raise InvalidArgumentError("output size must be non-negative")
    return size


def _type(node: NodeContext) -> np.dtype:
    return node.np_dtype("T", np.dtype(_F32))


def _as(value: np.ndarray, dtype: np.dtype) -> Scalar:
    result: Scalar = value.astype(dtype)[()]
    return result


def _indices(selected: list[int], size: int, pad: bool) -> np.ndarray:
    return np.array(selected + [0] * (size - len(selected) if pad else 0), dtype=np.int32)


Kernel = Callable[..., Any]


@kernel("NonMaxSuppression")
def nms_v1(node: NodeContext) -> Kernel:
    threshold = _F32(node.attr("iou_threshold"))

    def run(boxes: np.ndarray, scores: np.ndarray, max_output_size: np.ndarray) -> np.ndarray:
        _scalar(max_output_size, "max_output_size")
        _iou_threshold(threshold)
        _check_boxes(boxes, scores)
        params = _Params(_max_output(max_output_size), threshold, np.finfo(_F32).min, _F32(0))
        return _indices(_select(boxes, scores, params, np.dtype(_F32))[0], 0, False)

    return run


@kernel("NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4")
def nms_v2_to_v4(node: NodeContext) -> Kernel:
    dtype = _type(node)
    version = int(node.op[-1])
    pad = version == 4 and bool(node.attr("pad_to_max_output_size"))
    with_rank = version == 3  # V3 alone adds the rank to its scalar-shape messages

    def run(boxes: np.ndarray, scores: np.ndarray, max_output_size: np.ndarray,
            iou_threshold: np.ndarray, score_threshold: np.ndarray | None = None) -> Any:
        _scalar(max_output_size, "max_output_size", with_rank)
        _scalar(iou_threshold, "iou_threshold", with_rank)
        iou = _iou_threshold(_as(iou_threshold, dtype))
        floor = np.finfo(dtype).min
        if score_threshold is not None:
            floor = _as(_scalar(score_threshold, "score_threshold"), dtype)
        _check_boxes(boxes, scores)
        size = _max_output(max_output_size)
        selected, _ = _select(boxes, scores, _Params(size, iou, floor, dtype.type(0)), dtype)
        indices = _indices(selected, size, pad)
        if version < 4:
            return indices
        return indices, np.array(len(selected), dtype=np.int32)

    return run


@kernel("NonMaxSuppressionV5")
def nms_v5(node: NodeContext) -> Kernel:
    dtype = _type(node)
    pad = bool(node.attr("pad_to_max_output_size"))

    def run(boxes: np.ndarray, scores: np.ndarray, max_output_size: np.ndarray,
            iou_threshold: np.ndarray, score_threshold: np.ndarray,
            soft_nms_sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        _scalar(max_output_size, "max_output_size")
        iou = _iou_threshold(_as(_scalar(iou_threshold, "iou_threshold"), dtype))
        floor = _as(_scalar(score_threshold, "score_threshold"), dtype)
        sigma = _as(_scalar(soft_nms_sigma, "soft_nms_sigma"), dtype)
        if not sigma >= 0:
            raise InvalidArgumentError("soft_nms_sigma_val must be >= 0")
        _check_boxes(boxes, scores)
        size = _max_output(max_output_size)
        selected, kept = _select(boxes, scores, _Params(size, iou, floor, sigma), dtype)
        padding = size - len(selected) if pad else 0
        return (
            _indices(selected, size, pad),
            np.array(kept + [0] * padding, dtype=dtype),
            np.array(len(selected), dtype=np.int32),
        )

    return run
