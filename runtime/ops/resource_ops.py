"""Op definitions: resource variables and checkpoint restore."""

from __future__ import annotations

from runtime.ops.registry import define

_HANDLE_ATTRS = {"container": "", "shared_name": "", "debug_name": "", "allowed_devices": []}

define("VarHandleOp", outputs="resource", attrs=_HANDLE_ATTRS, stateful=True)
define("ReadVariableOp", inputs="resource", outputs="value", stateful=True)
define("AssignVariableOp", inputs="resource, value", attrs={"validate_shape": False}, stateful=True)
define("AssignAddVariableOp", inputs="resource, value", stateful=True)
define("AssignSubVariableOp", inputs="resource, value", stateful=True)
define("VarIsInitializedOp", inputs="resource", outputs="is_initialized", stateful=True)
define("DisableCopyOnRead", inputs="resource", stateful=True)
define("DestroyResourceOp", inputs="resource", attrs={"ignore_lookup_error": True}, stateful=True)
define(
    "ResourceGather",
    inputs="resource, indices",
    outputs="output",
    attrs={"batch_dims": 0, "validate_indices": True},
    stateful=True,
)
define(
    "RestoreV2",
    inputs="prefix, tensor_names, shape_and_slices",
    outputs="tensors*dtypes",
    stateful=True,
)

# TF1 reference variables. A ref tensor is the variable itself (a ``ResourceHandle`` here); ops
# that take a plain value read it through a ``ReadVariableOp`` that ``runtime.ref_variables``
# inserts when a graph is loaded.
_REF_VARIABLE_ATTRS = {"container": "", "shared_name": ""}
define("VariableV2", outputs="ref", attrs=_REF_VARIABLE_ATTRS, stateful=True)
define("Variable", outputs="ref", attrs=_REF_VARIABLE_ATTRS, stateful=True)
define(
    "Assign",
    inputs="ref, value",
    outputs="output_ref",
    attrs={"validate_shape": True, "use_locking": True},
    stateful=True,
)
define("AssignAdd", inputs="ref, value", outputs="output_ref", attrs={"use_locking": False},
       stateful=True)
define("AssignSub", inputs="ref, value", outputs="output_ref", attrs={"use_locking": False},
       stateful=True)
define("IsVariableInitialized", inputs="ref", outputs="is_initialized", stateful=True)
define("RefIdentity", inputs="input", outputs="output", stateful=True, forwards_input=True)
