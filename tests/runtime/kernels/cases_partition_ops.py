"""Kernel cases for DynamicPartition, DynamicStitch and ParallelDynamicStitch, recorded via
tf.raw_ops (fixtures/record_kernel_cases.py).

Embedding lookups over a partitioned variable split the ids with DynamicPartition and put the
looked-up rows back in order with (Parallel)DynamicStitch. The cases cover empty partitions,
partitions of more than one dimension, stitches with gaps and with overlapping indices (the last
write wins), string data and the inputs TensorFlow rejects.
"""

from __future__ import annotations

import numpy as np

from tests.runtime.kernels.case import Case, rng

R = rng(41)
CASES: list[Case] = []


def ids(*values: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.array(values, np.int32)
    return out if shape is None else out.reshape(shape)


def floats(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return R.standard_normal(shape).astype(dtype)


def S(*items: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = [s.encode() for s in items]
    return out if shape is None else out.reshape(shape)


def partition(name: str, data: np.ndarray, partitions: np.ndarray, num: int) -> None:
    CASES.append(Case(f"DynamicPartition_{name}", "DynamicPartition",
                      {"data": data, "partitions": partitions}, {"num_partitions": num},
                      expect_error="error" in name))


def stitch(name: str, indices: list[np.ndarray], data: list[np.ndarray],
           ops: tuple[str, ...] = ("DynamicStitch", "ParallelDynamicStitch")) -> None:
    for op in ops:
        CASES.append(Case(f"{op}_{name}", op, {"indices": indices, "data": data}, {},
                          {"N": len(indices)}, expect_error="error" in name))


# --- DynamicPartition ---------------------------------------------------------------------------

partition("vector", floats(6), ids(0, 2, 0, 1, 2, 2), 3)
partition("empty_partition", floats(5), ids(0, 2, 0, 2, 0), 4)
partition("rows", floats(5, 3), ids(1, 0, 1, 1, 0), 2)
partition("matrix_partitions", floats(2, 3, 4), ids(1, 0, 2, 2, 0, 1, shape=(2, 3)), 3)
partition("ids_int64", np.arange(7, dtype=np.int64) * 11, ids(0, 1, 2, 3, 0, 1, 2), 4)
partition("strings", S("a", "b", "c", "d"), ids(1, 1, 0, 1), 2)
partition("one_partition", floats(3, 2, dtype=np.float64), ids(0, 0, 0), 1)
partition("empty", floats(0, 4), ids(), 3)
partition("scalar", np.array(2.5, np.float32), np.array(1, np.int32), 2)
_BIG_IDS = R.integers(0, 7, 300).astype(np.int32)
partition("big", floats(300, 5), _BIG_IDS, 7)
partition("error_out_of_range", floats(4), ids(0, 1, 3, 0), 3)
partition("error_negative", floats(4), ids(0, -1, 1, 0), 3)
partition("error_matrix_out_of_range", floats(2, 2), ids(0, 1, 5, 0, shape=(2, 2)), 2)
partition("error_shape", floats(4, 2), ids(0, 1, 1), 2)

# --- DynamicStitch / ParallelDynamicStitch ------------------------------------------------------

stitch("interleave", [ids(0, 2, 4), ids(1, 3)], [floats(3), floats(2)])
stitch("rows", [ids(1, 0), ids(2)], [floats(2, 3), floats(1, 3)])
stitch("gaps", [ids(4), ids(0, 2)], [floats(1, 2), floats(2, 2)])
stitch("matrix_indices", [ids(0, 3, 5, 1, shape=(2, 2)), ids(2, 4)],
       [floats(2, 2, 3), floats(2, 3)])
stitch("scalar_index", [np.array(1, np.int32), ids(0)], [floats(2), floats(1, 2)])
stitch("strings", [ids(1), ids(0, 2)], [S("b"), S("a", "c")])
stitch("ints", [ids(0, 1, 2)], [np.array([7, 8, 9], np.int64)])
stitch("repeated_within_input", [ids(0, 1, 0, 1)], [floats(4, 2)])
stitch("empty_input", [ids(), ids(0, 1)], [floats(0, 3), floats(2, 3)])
stitch("all_empty", [ids(), ids()], [floats(0, 3), floats(0, 3)])
# The stitch that undoes the partition above: each shard's positions with its rows.
_BIG_POS = [np.flatnonzero(_BIG_IDS == p).astype(np.int32) for p in range(7)]
stitch("big", _BIG_POS, [floats(len(p), 5) for p in _BIG_POS])
stitch("error_only_negative", [ids(-1, -3)], [floats(2)])
# Partition-ordered inputs whose indices overlap across inputs: the later input wins, which the
# parallel kernel does not promise, so only DynamicStitch is recorded.
stitch("overlap_across_inputs", [ids(0, 1, 2), ids(1, 3), ids(0)],
       [floats(3), floats(2), floats(1)], ("DynamicStitch",))
stitch("error_negative", [ids(0, -1), ids(1)], [floats(2), floats(1)])
stitch("error_data_shape", [ids(0, 1), ids(2)], [floats(3), floats(1)])
stitch("error_extra_shape", [ids(0, 1), ids(2)], [floats(2, 3), floats(1, 4)])

# --- Past the small-input paths -----------------------------------------------------------------
# Appended last so that the random values of the cases above stay as recorded.

_BIG_BAD = _BIG_IDS.copy()
_BIG_BAD[250] = 7
partition("error_big_out_of_range", floats(300), _BIG_BAD, 7)
_BIG_NEG = [p.copy() for p in _BIG_POS]
_BIG_NEG[3][-1] = -2
stitch("error_big_negative", _BIG_NEG, [floats(len(p), 5) for p in _BIG_POS])
# Many ids with repeats within and across inputs: the last write wins.
stitch("big_overlap", [R.integers(0, 40, 50).astype(np.int32), R.integers(0, 40, 30)
                       .astype(np.int32)], [floats(50, 2), floats(30, 2)], ("DynamicStitch",))
stitch("small_overlap_strings", [ids(2, 0), ids(0, 1, 2)], [S("a", "b"), S("c", "d", "e")],
       ("DynamicStitch",))
