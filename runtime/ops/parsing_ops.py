"""Op definitions: tf.Example and tf.SequenceExample parsing, the sparse-tensor op its sparse
outputs feed, and the CSV and raw-bytes decoders (``tensorflow/core/ops/parsing_ops.cc``)."""

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
# tf.SequenceExample parsing. V2 takes its keys as inputs and adds ragged features; V1 and the
# single-example op take them as attrs (V1) or scalar inputs (single).
_SEQUENCE_ATTRS = {
    "Ncontext_sparse": 0,
    "Tcontext_dense": [],
    "context_sparse_types": [],
    "context_dense_shapes": [],
    "Nfeature_list_sparse": 0,
    "Nfeature_list_dense": 0,
    "feature_list_dense_types": [],
    "feature_list_sparse_types": [],
    "feature_list_dense_shapes": [],
}
_SEQUENCE_CONTEXT_OUTPUTS = (
    "context_sparse_indices*Ncontext_sparse, context_sparse_values*context_sparse_types, "
    "context_sparse_shapes*Ncontext_sparse, context_dense_values*Tcontext_dense"
)
_SEQUENCE_LIST_OUTPUTS = (
    "feature_list_sparse_indices*Nfeature_list_sparse, "
    "feature_list_sparse_values*feature_list_sparse_types, "
    "feature_list_sparse_shapes*Nfeature_list_sparse, "
    "feature_list_dense_values*feature_list_dense_types"
)
define(
    "ParseSequenceExampleV2",
    inputs=(
        "serialized, debug_name, context_sparse_keys, context_dense_keys, context_ragged_keys, "
        "feature_list_sparse_keys, feature_list_dense_keys, feature_list_ragged_keys, "
        "feature_list_dense_missing_assumed_empty, context_dense_defaults*Tcontext_dense"
    ),
    outputs=(
        f"{_SEQUENCE_CONTEXT_OUTPUTS}, context_ragged_values*context_ragged_value_types, "
        f"context_ragged_row_splits*context_ragged_split_types, {_SEQUENCE_LIST_OUTPUTS}, "
        "feature_list_dense_lengths*Nfeature_list_dense, "
        "feature_list_ragged_values*feature_list_ragged_value_types, "
        "feature_list_ragged_outer_splits*feature_list_ragged_split_types, "
        "feature_list_ragged_inner_splits*feature_list_ragged_split_types"
    ),
    attrs={
        **_SEQUENCE_ATTRS,
        "context_ragged_value_types": [],
        "context_ragged_split_types": [],
        "feature_list_ragged_value_types": [],
        "feature_list_ragged_split_types": [],
    },
)
define(
    "ParseSequenceExample",
    inputs="serialized, debug_name, context_dense_defaults*Tcontext_dense",
    outputs=(
        f"{_SEQUENCE_CONTEXT_OUTPUTS}, {_SEQUENCE_LIST_OUTPUTS}, "
        "feature_list_dense_lengths*Nfeature_list_dense"
    ),
    attrs={**_SEQUENCE_ATTRS, "Ncontext_dense": 0},
)
define(
    "ParseSingleSequenceExample",
    inputs=(
        "serialized, feature_list_dense_missing_assumed_empty, "
        "context_sparse_keys*Ncontext_sparse, context_dense_keys*Ncontext_dense, "
        "feature_list_sparse_keys*Nfeature_list_sparse, "
        "feature_list_dense_keys*Nfeature_list_dense, context_dense_defaults*Tcontext_dense, "
        "debug_name"
    ),
    outputs=f"{_SEQUENCE_CONTEXT_OUTPUTS}, {_SEQUENCE_LIST_OUTPUTS}",
    attrs={**_SEQUENCE_ATTRS, "Ncontext_dense": 0},
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
