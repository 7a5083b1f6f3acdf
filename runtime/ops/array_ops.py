"""Op definitions: array_ops (tensor construction, shape manipulation, slicing, gathering).

Argument names, their order and attr defaults follow TensorFlow's op registry
(``tensorflow/core/ops/array_ops.cc``, ``no_op.cc``): defaults fill in the attrs a SavedModel
omits, and function bodies refer to outputs by these argument names.
"""

from __future__ import annotations

from runtime.dtypes import DataType
from runtime.ops.registry import define

_INT32 = DataType.DT_INT32
_INT64 = DataType.DT_INT64

# Constants, feeds and identities.
define("Const", outputs="output")
define("Placeholder", outputs="output", attrs={"shape": None}, placeholder=True)  # None: any rank
define("PlaceholderWithDefault", inputs="input", outputs="output", forwards_input=True,
       placeholder=True)
define("NoOp")
define("Identity", inputs="input", outputs="output", forwards_input=True)
define("IdentityN", inputs="input*T", outputs="output*T", forwards_input=True)
define("Snapshot", inputs="input", outputs="output", forwards_input=True)
define("StopGradient", inputs="input", outputs="output", forwards_input=True)
define("PreventGradient", inputs="input", outputs="output", attrs={"message": ""},
       forwards_input=True)
define("EnsureShape", inputs="input", outputs="output")
# Stateful in TensorFlow so that graph optimizers never fold or drop the check.
define("CheckNumerics", inputs="tensor", outputs="output", stateful=True)
define("CheckNumericsV2", inputs="tensor", outputs="output", stateful=True)

# Shapes.
define("Shape", inputs="input", outputs="output", attrs={"out_type": _INT32})
define("ShapeN", inputs="input*N", outputs="output*N", attrs={"out_type": _INT32})
define("Size", inputs="input", outputs="output", attrs={"out_type": _INT32})
define("Rank", inputs="input", outputs="output")
define("Reshape", inputs="tensor, shape", outputs="output", attrs={"Tshape": _INT32})
define("Squeeze", inputs="input", outputs="output", attrs={"squeeze_dims": []})
define("ExpandDims", inputs="input, dim", outputs="output", attrs={"Tdim": _INT32})
define("Transpose", inputs="x, perm", outputs="y", attrs={"Tperm": _INT32})
define("InvertPermutation", inputs="x", outputs="y", attrs={"T": _INT32})
define("BroadcastTo", inputs="input, shape", outputs="output", attrs={"Tidx": _INT32})
define("BroadcastArgs", inputs="s0, s1", outputs="r0", attrs={"T": _INT32})
define("Bitcast", inputs="input", outputs="output")

# Construction.
define("Fill", inputs="dims, value", outputs="output", attrs={"index_type": _INT32})
define("ZerosLike", inputs="x", outputs="y")
define("OnesLike", inputs="x", outputs="y")
define("Tile", inputs="input, multiples", outputs="output", attrs={"Tmultiples": _INT32})
define("Pad", inputs="input, paddings", outputs="output", attrs={"Tpaddings": _INT32})
define(
    "PadV2",
    inputs="input, paddings, constant_values",
    outputs="output",
    attrs={"Tpaddings": _INT32},
)
define("MirrorPad", inputs="input, paddings", outputs="output", attrs={"Tpaddings": _INT32})
define("ReverseV2", inputs="tensor, axis", outputs="output", attrs={"Tidx": _INT32})
define("Reverse", inputs="tensor, dims", outputs="output")  # dims: one bool per dimension
define("MatrixBandPart", inputs="input, num_lower, num_upper", outputs="band",
       attrs={"Tindex": _INT64})
define(
    "OneHot",
    inputs="indices, depth, on_value, off_value",
    outputs="output",
    attrs={"axis": -1, "TI": _INT64},
)

# Joining and splitting.
define("ConcatV2", inputs="values*N, axis", outputs="output", attrs={"Tidx": _INT32})
define("Concat", inputs="concat_dim, values*N", outputs="output")
define("Pack", inputs="values*N", outputs="output", attrs={"axis": 0})
define("Unpack", inputs="value", outputs="output*num", attrs={"axis": 0})
define("Split", inputs="split_dim, value", outputs="output*num_split")
define(
    "SplitV",
    inputs="value, size_splits, split_dim",
    outputs="output*num_split",
    attrs={"Tlen": _INT64},
)

# Slicing.
define(
    "StridedSlice",
    inputs="input, begin, end, strides",
    outputs="output",
    attrs={
        "begin_mask": 0,
        "end_mask": 0,
        "ellipsis_mask": 0,
        "new_axis_mask": 0,
        "shrink_axis_mask": 0,
    },
)
define("Slice", inputs="input, begin, size", outputs="output")

# Gathering and scattering.
define("GatherV2", inputs="params, indices, axis", outputs="output", attrs={"batch_dims": 0})
define("Gather", inputs="params, indices", outputs="output", attrs={"validate_indices": True})
define("GatherNd", inputs="params, indices", outputs="output", attrs={"bad_indices_policy": ""})
define(
    "ScatterNd",
    inputs="indices, updates, shape",
    outputs="output",
    attrs={"bad_indices_policy": ""},
)
define("Where", inputs="input", outputs="index", attrs={"T": DataType.DT_BOOL})
define("Unique", inputs="x", outputs="y, idx", attrs={"out_idx": _INT32})

# Scatter into a copy of a tensor (``array_ops.cc``).
for _name in ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
              "TensorScatterMin"):
    define(_name, inputs="tensor, indices, updates", outputs="output")

# Partitioning rows by id and putting them back (``data_flow_ops.cc``): embedding lookups over a
# partitioned variable.
define("DynamicPartition", inputs="data, partitions", outputs="outputs*num_partitions")
define("DynamicStitch", inputs="indices*N, data*N", outputs="merged")
define("ParallelDynamicStitch", inputs="indices*N, data*N", outputs="merged")
