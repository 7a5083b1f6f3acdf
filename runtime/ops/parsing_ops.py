"""Op definitions: tf.Example parsing, the sparse-tensor op its sparse outputs feed, and the
CSV and raw-bytes decoders (``tensorflow/core/ops/parsing_ops.cc``)."""

from __future__ import annotations

from runtime.ops.registry import define

define(
    "ParseExampleV2",
    inputs="serialized, names, sparse_keys, dense_keys, ragged_keys, dense_defaults*Tdense",
    outputs=(
        "sparse_indices*num_sparse, sparse_values*sparse_types, sparse_shapes*num_sparse, "
        "dense_values*Tdense, ragged_values*ragged_value_types, "
        "ragged_row_splits*ragged_split_types"
    ),
    attrs={"sparse_types": [], "ragged_value_types": [], "ragged_split_types": []},
)
define(
    "ParseExample",
    inputs="serialized, names, sparse_keys*Nsparse, dense_keys*Ndense, dense_defaults*Tdense",
    outputs=(
        "sparse_indices*Nsparse, sparse_values*sparse_types, sparse_shapes*Nsparse, "
        "dense_values*Tdense"
    ),
)
define(
    "ParseSingleExample",
    inputs="serialized, dense_defaults*Tdense",
    outputs=(
        "sparse_indices*num_sparse, sparse_values*sparse_types, sparse_shapes*num_sparse, "
        "dense_values*Tdense"
    ),
)
define(
    "SparseToDense",
    inputs="sparse_indices, output_shape, sparse_values, default_value",
    outputs="dense",
    attrs={"validate_indices": True},
)

# CSV serving input receivers; OUT_TYPE is the list of the record_defaults' types.
define(
    "DecodeCSV",
    inputs="records, record_defaults*OUT_TYPE",
    outputs="output*OUT_TYPE",
    attrs={"field_delim": ",", "use_quote_delim": True, "na_value": "", "select_cols": []},
)
define("DecodeRaw", inputs="bytes", outputs="output", attrs={"little_endian": True})
define(
    "DecodePaddedRaw",
    inputs="input_bytes, fixed_length",
    outputs="output",
    attrs={"little_endian": True},
)
