"""The phase grid: a padded NHWC input re-laid channels first so that every filter tap of a
windowed op reads one contiguous run of memory.

A stride splits the padded input into phases: phase (a, b) holds the padded cells
(q * stride_h + a, r * stride_w + b) for q < gh, r < gw, one channel after another, images one
after another, flattened to ``[channels, n * gh * gw (+ slack)]``. Filter tap (i, j) then reads
phase (i * dilation_h % stride_h, j * dilation_w % stride_w) from flat offset
(i * dilation_h // stride_h) * gw + j * dilation_w // stride_w, and output (y, x) of image k sits
at cell k * gh * gw + y * gw + x of the run: a convolution becomes a sum of shifted runs, each a
plain row of a matrix for BLAS. Cells of a run beyond the valid outputs (x >= out_w or
y >= out_h) compute garbage that the caller crops away; the valid ones never wrap into another
row or image. Cells outside the input stay zero: the buffer is zeroed once when built and only
the cells that the input covers are ever written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.kernels.nn_ops_common import Window, view


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a grid."""

    cells: int  # grid cells per image along the axis
    phases: tuple[int, ...]  # the phases that some tap reads
    # per phase: (first cell written, cells written, first input index, input step)
    fills: tuple[tuple[int, int, int, int], ...]
    # per filter tap along the axis: (index into ``phases``, cell shift)
    taps: tuple[tuple[int, int], ...]


def grid_axis(size: int, ksize: int, stride: int, dilation: int, win: Window) -> Axis:
    shifts = [(k * dilation) // stride for k in range(ksize)]
    tap_phases = [(k * dilation) % stride for k in range(ksize)]
    phases = tuple(sorted(set(tap_phases)))
    cells = win.out + (max(shifts) if shifts else 0)
    fills = []
    for phase in phases:
        # Cell q holds padded index q * stride + phase, input index q * stride + phase - before.
        first = max(0, -(-(win.pad_before - phase) // stride))
        start = first * stride + phase - win.pad_before
        count = max(0, min(cells - first, -(-(size - start) // stride))) if start < size else 0
        fills.append((first, count, start, stride))
    taps = tuple((phases.index(p), s) for p, s in zip(tap_phases, shifts))
    return Axis(cells, phases, tuple(fills), taps)


@dataclass(frozen=True)
class Grid:
    n: int
    channels: int
    rows: Axis
    cols: Axis
    out_h: int
    out_w: int

    @property
    def cells(self) -> int:
        """Grid cells per image."""
        return self.rows.cells * self.cols.cells

    @property
    def phases(self) -> list[tuple[int, int]]:
        """(row phase index, column phase index) of each stored phase, in storage order."""
        return [(a, b) for a in range(len(self.rows.phases)) for b in range(len(self.cols.phases))]

    @property
    def run(self) -> int:
        """Length of each phase's flat run per channel: all images plus room for the largest
        tap shift, which only garbage cells read."""
        shift = max((s for _, s in self.rows.taps), default=0) * self.cols.cells + max(
            (s for _, s in self.cols.taps), default=0
        )
        return self.n * self.cells + shift

    def buffer(self, dtype: np.dtype) -> np.ndarray:
        """A zeroed ``[phases, channels, run]`` buffer."""
        return np.zeros((len(self.phases), self.channels, self.run), dtype)

    def fill_views(self, buf: np.ndarray) -> list[tuple[np.ndarray, tuple[slice, slice]]]:
        """Per phase: the buffer view ``[C, n, rows, cols]`` that the input covers, and the
        spatial slices of the NHWC input that go there (transposed channels first)."""
        result = []
        gh, gw = self.rows.cells, self.cols.cells
        for p, (a, b) in enumerate(self.phases):
            q0, nq, y0, sy = self.rows.fills[a]
            r0, nr, x0, sx = self.cols.fills[b]
            if nq == 0 or nr == 0:
                continue
            cells = buf[p, :, :self.n * gh * gw].reshape(self.channels, self.n, gh, gw)
            target = cells[:, :, q0:q0 + nq, r0:r0 + nr]
            source = (slice(y0, y0 + (nq - 1) * sy + 1, sy), slice(x0, x0 + (nr - 1) * sx + 1, sx))
            result.append((target, source))
        return result

    def tap_groups(self) -> list[tuple[int, list[int], list[int], int, int, int, int]]:
        """Taps grouped by the phase they read; within a phase the taps form a rectangle of
        evenly spaced shifts. Per group: (phase, filter rows, filter cols, first row shift,
        row shift step, first col shift, col shift step)."""
        groups = []
        for p, (a, b) in enumerate(self.phases):
            ti = [i for i, (ph, _) in enumerate(self.rows.taps) if ph == a]
            tj = [j for j, (ph, _) in enumerate(self.cols.taps) if ph == b]
            if not ti or not tj:
                continue
            si = [self.rows.taps[i][1] for i in ti]
            sj = [self.cols.taps[j][1] for j in tj]
            step_i = si[1] - si[0] if len(si) > 1 else 0
            step_j = sj[1] - sj[0] if len(sj) > 1 else 0
            groups.append((p, ti, tj, si[0], step_i, sj[0], step_j))
        return groups

    def tap_order(self) -> list[tuple[int, int]]:
        """Filter taps (i, j) in the order that ``patch_views`` lays them out."""
        return [(i, j) for _, ti, tj, *_ in self.tap_groups() for i in ti for j in tj]

    @property
    def used(self) -> int:
        """Cells per image that hold an output row: the first ``out_h`` grid rows."""
        return self.out_h * self.cols.cells

    def patch_views(self, buf: np.ndarray, patches: np.ndarray, first: int, count: int,
                    channels_outer: bool) -> list[tuple[np.ndarray, np.ndarray]]:
        """(destination, source) pairs that copy the patches of images [first, first + count)
        into ``patches``: taps in ``tap_order``, each tap's channels, each a row of
        ``count * used`` cells (every image's output rows, garbage columns included).
        ``patches`` is ``[tap * channel, cell]``, or ``[channel, tap, cell]`` when
        ``channels_outer``; it may have extra rows after the taps, and its rows may be longer
        than the block."""
        gw = self.cols.cells
        used = self.used
        row = patches.shape[-1]
        c = self.channels
        run = buf.shape[-1]
        pairs = []
        t0 = 0
        for p, ti, tj, s0i, dsi, s0j, dsj in self.tap_groups():
            ni, nj = len(ti), len(tj)
            offset = p * c * run + first * self.cells + s0i * gw + s0j
            if channels_outer:
                src = view(buf, (c, ni, nj, count, used),
                           (run, dsi * gw, dsj, self.cells, 1), offset)
                dst = view(patches, (c, ni, nj, count, used),
                           (patches.shape[1] * row, nj * row, row, used, 1), t0 * row)
            else:
                src = view(buf, (ni, nj, c, count, used),
                           (dsi * gw, dsj, run, self.cells, 1), offset)
                dst = view(patches, (ni, nj, c, count, used),
                           (nj * c * row, c * row, row, used, 1), t0 * c * row)
            pairs.append((dst, src))
            t0 += ni * nj
        return pairs
