"""CPU kernels: GatherNd and ScatterNd, indexing by coordinate rows (the last axis of ``indices``
holds one coordinate per leading dim of the params or output).

Out-of-range rows are an error, as on TensorFlow's CPU (negative coordinates included), unless
``bad_indices_policy`` is ``IGNORE``: then GatherNd gives zeros for them and ScatterNd skips them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import int_vector, shape_str
from runtime.kernels.registry import NodeContext, kernel


def index_str(shape: tuple[int, ...], flat: int) -> str:
    """The coordinates of a flat position in ``shape``, as TensorFlow prints them: ``1,2``."""
    return ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) if shape else ""


def _bad_nd_rows(indices: np.ndarray, bounds: tuple[int, ...]) -> np.ndarray:
    """Per index row (the last axis holds one coordinate per dim): whether it is out of range."""
    bad = (indices < 0) | (indices >= np.array(bounds, dtype=np.int64))
    return np.asarray(bad.any(axis=-1))


def _policy(node: NodeContext) -> bool:
    """Whether bad indices are skipped (IGNORE) rather than an error (the CPU default)."""
    policy = node.attr("bad_indices_policy", "")
    if policy not in ("", "DEFAULT", "ERROR", "IGNORE"):
        raise InvalidArgumentError(f"unknown bad_indices_policy {policy!r}")
    return bool(policy == "IGNORE")


@kernel("GatherNd")
def gather_nd(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    ignore_bad = _policy(node)

    def gather(params: np.ndarray, indices: np.ndarray) -> np.ndarray:
        if indices.ndim < 1:
            raise InvalidArgumentError(
                f"indices must be at least a vector, got shape {shape_str(indices.shape)}"
            )
        depth = indices.shape[-1]
        if depth > params.ndim:
            raise InvalidArgumentError(
                f"index innermost dimension length must be <= params rank; saw: {depth} vs. "
                f"{params.ndim}"
            )
        batch_shape = indices.shape[:-1]
        out_shape = batch_shape + params.shape[depth:]
        if depth == 0:
            return np.broadcast_to(params, out_shape).copy()
        bounds = params.shape[:depth]
        # A batch of int rows (a single row indexes as numpy's scalars and views do, below).
        if indices.ndim > 1 and indices.size and indices.dtype.kind == "i":
            try:  # one C call checks every row and flattens it (ValueError when out of range)
                flat = np.ravel_multi_index(tuple(indices.reshape(-1, depth).T), bounds)
            except ValueError:
                pass
            else:
                rows = params.reshape((math.prod(bounds),) + params.shape[depth:])
                taken: np.ndarray = rows.take(flat, 0).reshape(out_shape)
                return taken
        bad = _bad_nd_rows(indices, bounds) if indices.size else None
        if bad is not None and bad.any():
            if not ignore_bad:
                row = int(np.flatnonzero(bad.reshape(-1))[0])
                coords = indices.reshape(-1, depth)[row].tolist()
                raise InvalidArgumentError(
                    f"indices[{index_str(batch_shape, row)}] = "
                    f"[{', '.join(str(c) for c in coords)}] does not index into param shape "
                    f"{shape_str(params.shape)}, node name: {node.name}"
                )
            safe = np.where(bad[..., None], 0, indices)
            out: np.ndarray = params[tuple(np.moveaxis(safe, -1, 0))]
            out[bad] = 0
            return out
        gathered: np.ndarray = params[tuple(np.moveaxis(indices, -1, 0))]
        return gathered

    return gather


@kernel("ScatterNd")
def scatter_nd(node: NodeContext) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    ignore_bad = _policy(node)

    def scatter(indices: np.ndarray, updates: np.ndarray, shape: np.ndarray) -> np.ndarray:
        out_shape = tuple(int_vector(shape, "shape"))
        if indices.ndim < 1:
            raise InvalidArgumentError(
                f"Indices shape must have rank at least one. Found:{shape_str(indices.shape)}"
            )
        depth = indices.shape[-1]
        batch_shape = indices.shape[:-1]
        if depth > len(out_shape) or updates.shape != batch_shape + out_shape[depth:]:
            raise InvalidArgumentError(
                "Dimensions [0,{0}) of indices[shape={1}] = {2} must match dimensions [0,{0}) of "
                "updates[shape={3}]".format(
                    len(batch_shape),
                    shape_str(indices.shape),
                    shape_str(batch_shape),
                    shape_str(updates.shape),
                )
            )
        out = np.zeros(out_shape, dtype=updates.dtype)
        rows = indices.reshape(-1, depth)
        flat_updates = updates.reshape((rows.shape[0],) + out_shape[depth:])
        if rows.shape[0] == 0:
            return out
        bounds = out_shape[:depth]
        bad = _bad_nd_rows(rows, bounds)
        if bad.any():
            if not ignore_bad:
                row = int(np.flatnonzero(bad)[0])
                raise InvalidArgumentError(
                    f"indices[{index_str(batch_shape, row)}] = "
                    f"[{', '.join(str(c) for c in rows[row].tolist())}] does not index into "
                    f"shape {shape_str(out_shape)}"
                )
            rows, flat_updates = rows[~bad], flat_updates[~bad]
        # Repeated indices accumulate, as in TensorFlow (for bool: logical or).
        np.add.at(out, tuple(rows.T), flat_updates)
        return out

    return scatter
