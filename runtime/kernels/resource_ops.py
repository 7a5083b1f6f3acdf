"""CPU kernels: resource variables and checkpoint restore.

Handles are bound when the plan is compiled: a VarHandleOp kernel returns the same handle on every
call, so reading a variable costs one attribute load. RestoreV2 opens the checkpoint's files only
where the session's ``ReadableFiles`` allows (the version's ``variables/``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.errors import FailedPreconditionError, InvalidArgumentError
from runtime.kernels.registry import KernelError, NodeContext, kernel
from runtime.readable_files import FileUse
from runtime.resources import ResourceHandle, readable_files


def _require_resources(node: NodeContext) -> Any:
    if node.resources is None:
        raise KernelError(node, "needs a session resource manager")
    return node.resources


@kernel("VarHandleOp")
def var_handle(node: NodeContext) -> Callable[..., Any]:
    resources = _require_resources(node)
    name = node.attr("shared_name", "") or node.name
    dtype = node.np_dtype("dtype")
    shape = node.attr("shape", None)
    handle = ResourceHandle(resources.variable(node.attr("container", ""), name, dtype, shape))
    return lambda: handle


@kernel("ReadVariableOp")
def read_variable(node: NodeContext) -> Callable[..., Any]:
    return lambda handle: handle.resource.read()


@kernel("AssignVariableOp")
def assign_variable(node: NodeContext) -> Callable[..., Any]:
    def assign(handle: ResourceHandle, value: np.ndarray) -> None:
        handle.resource.assign(value)

    return assign


def _updating(update: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., Any]:
    def apply(handle: ResourceHandle, value: np.ndarray) -> None:
        var = handle.resource
        with var.lock:
            var.assign(update(var.read(), value))

    return apply


@kernel("AssignAddVariableOp")
def assign_add(node: NodeContext) -> Callable[..., Any]:
    return _updating(np.add)


@kernel("AssignSubVariableOp")
def assign_sub(node: NodeContext) -> Callable[..., Any]:
    return _updating(np.subtract)


@kernel("VarIsInitializedOp")
def var_is_initialized(node: NodeContext) -> Callable[..., Any]:
    return lambda handle: np.array(handle.resource.value is not None)


@kernel("DisableCopyOnRead", "DestroyResourceOp")
def no_effect(node: NodeContext) -> Callable[..., Any]:
    # Copy-on-read is a GPU aliasing concern; variables here never alias their readers.
    return lambda handle: None


@kernel("ResourceGather")
def resource_gather(node: NodeContext) -> Callable[..., Any]:
    batch_dims = node.attr("batch_dims", 0)
    if batch_dims != 0:
        raise KernelError(node, "batch_dims other than 0 is not supported")

    def gather(handle: ResourceHandle, indices: np.ndarray) -> np.ndarray:
        params: np.ndarray = handle.resource.read()
        limit = params.shape[0]
        if indices.size and (indices.min() < 0 or indices.max() >= limit):
            bad = indices[(indices < 0) | (indices >= limit)].flat[0]
            raise InvalidArgumentError(f"indices = {bad} is not in [0, {limit})")
        rows: np.ndarray = params[indices]
        return rows

    return gather


@kernel("RestoreV2")
def restore_v2(node: NodeContext) -> Callable[..., Any]:
    from runtime.checkpoint import BundleReader
    from runtime.checkpoint.bundle import data_filename, index_filename

    wanted = [dtypes.DataType.of(int(t)) for t in node.attr("dtypes")]
    readable = readable_files(node.resources)

    def restore(prefix: np.ndarray, names: np.ndarray, slices: np.ndarray) -> list[np.ndarray]:
        path = _text(prefix.item())
        readable.check(index_filename(path), FileUse.CHECKPOINT, node.op)
        # The reader checks each entry's dtype against what the restore op expects.
        with BundleReader(path) as reader:
            # The index names the shard count; every shard is checked before any is opened.
            for shard in range(reader.num_shards):
                readable.check(
                    data_filename(path, shard, reader.num_shards), FileUse.CHECKPOINT, node.op
                )
            return [
                reader.read_slice(_text(name), _text(spec), dtype)
                for name, spec, dtype in zip(names.ravel(), slices.ravel(), wanted)
            ]

    if node.num_outputs == 1:
        # A one-output op's kernel returns its value, not a list (a checkpoint of one variable,
        # as in TensorFlow Serving's saved_model_counter).
        return lambda prefix, names, slices: restore(prefix, names, slices)[0]
    return restore


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# TF1 reference variables: the ref tensor is a ResourceHandle on the session's variable, so the
# ops that take a ref (Assign*, IsVariableInitialized, the Ref* control-flow ops) reach the
# variable itself; everything else reads it through an inserted ReadVariableOp.


@kernel("VariableV2", "Variable")
def ref_variable(node: NodeContext) -> Callable[..., Any]:
    resources = _require_resources(node)
    name = node.attr("shared_name", "") or node.name
    # The declared shape is checked by Assign (validate_shape), not by the variable: an Assign
    # with validate_shape=False may give it another shape.
    var = resources.variable(node.attr("container", ""), name, node.np_dtype("dtype"), None)
    handle = ResourceHandle(var)
    return lambda: handle


def _ref_value(handle: ResourceHandle) -> np.ndarray:
    value: np.ndarray | None = handle.resource.value
    if value is None:
        raise FailedPreconditionError(
            f"Attempting to use uninitialized value {handle.resource.name}"
        )
    return value


@kernel("Assign")
def assign_ref(node: NodeContext) -> Callable[..., Any]:
    validate = bool(node.attr("validate_shape", True))

    def assign(ref: ResourceHandle, value: np.ndarray) -> ResourceHandle:
        var = ref.resource
        with var.lock:
            old = var.value
            if validate and old is not None and old.shape != np.shape(value):
                raise InvalidArgumentError(
                    "Assign requires shapes of both tensors to match. lhs shape= "
                    f"{list(old.shape)} rhs shape= {list(np.shape(value))}"
                )
            var.assign(value)
        return ref

    return assign


def _ref_update(update: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., Any]:
    def apply(ref: ResourceHandle, value: np.ndarray) -> ResourceHandle:
        var = ref.resource
        with var.lock:
            old = _ref_value(ref)
            if old.shape != np.shape(value):
                raise InvalidArgumentError(
                    "Must have the same number of elements: "
                    f"lhs shape= {list(old.shape)} rhs shape= {list(np.shape(value))}"
                )
            var.assign(update(old, value))
        return ref

    return apply


@kernel("AssignAdd")
def assign_add_ref(node: NodeContext) -> Callable[..., Any]:
    return _ref_update(np.add)


@kernel("AssignSub")
def assign_sub_ref(node: NodeContext) -> Callable[..., Any]:
    return _ref_update(np.subtract)


@kernel("IsVariableInitialized")
def is_variable_initialized(node: NodeContext) -> Callable[..., Any]:
    return lambda ref: np.array(ref.resource.value is not None)


@kernel("RefIdentity")
def ref_identity(node: NodeContext) -> Callable[..., Any]:
    return lambda ref: ref
