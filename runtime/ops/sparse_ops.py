"""Op definitions: sparse-tensor ops (``sparse_ops.cc``), the ones Estimator feature columns and
``tf.sparse`` emit. ``SparseToDense`` is defined with the parsing ops whose outputs it densifies;
the SparseSegment reductions are with the segment reductions in ``math_ops``.

A sparse tensor travels as three tensors: int64 ``indices [nnz, rank]``, ``values [nnz]`` and an
int64 ``dense_shape [rank]``.
"""

from __future__ import annotations

from runtime.dtypes import DataType
from runtime.ops.registry import define

define("SparseReshape", inputs="input_indices, input_shape, new_shape",
       outputs="output_indices, output_shape")
define("SparseFillEmptyRows", inputs="indices, values, dense_shape, default_value",
       outputs="output_indices, output_values, empty_row_indicator, reverse_index_map")
define("SparseReorder", inputs="input_indices, input_values, input_shape",
       outputs="output_indices, output_values")
define("SparseSlice", inputs="indices, values, shape, start, size",
       outputs="output_indices, output_values, output_shape")
define("SparseConcat", inputs="indices*N, values*N, shapes*N",
       outputs="output_indices, output_values, output_shape")
define("SparseAdd", inputs="a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh",
       outputs="sum_indices, sum_values, sum_shape")
define("SparseReduceSum", inputs="input_indices, input_values, input_shape, reduction_axes",
       outputs="output", attrs={"keep_dims": False})
define("SparseTensorDenseMatMul", inputs="a_indices, a_values, a_shape, b", outputs="product",
       attrs={"Tindices": DataType.DT_INT64, "adjoint_a": False, "adjoint_b": False})

# Feature crosses: ``N`` sparse inputs (their values typed by ``sparse_types``), then the dense
# inputs (``dense_types``). None of the attrs has a default.
_CROSS_INPUTS = "indices*N, values*sparse_types, shapes*N, dense_inputs*dense_types"
_CROSS_OUTPUTS = "output_indices, output_values, output_shape"
define("SparseCross", inputs=_CROSS_INPUTS, outputs=_CROSS_OUTPUTS)
define("SparseCrossV2", inputs=f"{_CROSS_INPUTS}, sep", outputs=_CROSS_OUTPUTS)
define("SparseCrossHashed", inputs=f"{_CROSS_INPUTS}, num_buckets, strong_hash, salt",
       outputs=_CROSS_OUTPUTS)
