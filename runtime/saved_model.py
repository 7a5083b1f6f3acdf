"""Loading a SavedModel directory: parse, select the MetaGraph, restore, initialize, optimize.

The sequence is TensorFlow Serving's: pick the MetaGraphDef whose tags match, build the graph
(function calls inlined), keep only what the signatures, the restore op and the init op reach,
refuse the model if any of that breaks the model policy (``runtime.model_policy``: running code,
writing files, reading files outside its version directory) or lacks a kernel (naming every
offending op either way), restore variables by feeding the checkpoint prefix to the SaverDef's
restore op, run the init op with asset paths fed, then optimize the serving graph and hand out a
``Session`` over it. The session's kernels read files only under the version's own data
directories (``runtime.readable_files``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import message, text_format

from protos.tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from runtime.cancellation import Cancellation
from runtime.dtypes import DataType
from runtime.errors import (
    DataLossError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)
from runtime.functions import inline_functions, referenced_functions
from runtime.graph import Graph, TensorRef, graph_from_graph_def, model_op_defs_from
from runtime.graph_queries import reachable_graph
from runtime.kernels import KERNELS, load_all_kernels
from runtime.model_policy import (
    PathRead,
    RefusedByPolicy,
    RefusedNode,
    constant_path_reads,
    policy_message,
    refused_nodes,
)
from runtime.plan import Plan
from runtime.readable_files import ReadableFiles
from runtime.ref_variables import dereference_refs, read_fetched_refs
from runtime.resources import ResourceManager
from runtime.session import Session

SAVED_MODEL_PB = "saved_model.pb"
SAVED_MODEL_PBTXT = "saved_model.pbtxt"
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"
DEFAULT_SIGNATURE_KEY = "serving_default"
_LEGACY_INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op")
_ASSET_COLLECTION = "saved_model_assets"


@dataclass(frozen=True)
class TensorSpec:
    """A signature tensor: graph tensor name, dtype, shape (-1 unknown dim; None unknown rank)."""

    name: str
    dtype: DataType
    shape: tuple[int, ...] | None


@dataclass(frozen=True)
class Signature:
    key: str
    method_name: str
    inputs: Mapping[str, TensorSpec]
    outputs: Mapping[str, TensorSpec]

    @cached_property
    def input_dtypes(self) -> dict[str, DataType]:
        """dtype by input alias, built once (REST decodes every request's JSON with it)."""
        return {alias: spec.dtype for alias, spec in self.inputs.items()}


def _tensor_spec(key: str, alias: str, info: Any) -> TensorSpec:
    if info.WhichOneof("encoding") != "name":
        raise UnimplementedError(
            f"signature '{key}' tensor '{alias}' uses a {info.WhichOneof('encoding')} encoding; "
            "only dense tensors are supported"
        )
    shape = None if info.tensor_shape.unknown_rank else tuple(d.size for d in info.tensor_shape.dim)
    return TensorSpec(info.name, DataType.of(info.dtype), shape)


def signatures_of(meta_graph: Any) -> dict[str, Signature]:
    result = {}
    for key, sig in meta_graph.signature_def.items():
        if key == INIT_OP_SIGNATURE_KEY:
            continue
        inputs = {alias: _tensor_spec(key, alias, info) for alias, info in sig.inputs.items()}
        outputs = {alias: _tensor_spec(key, alias, info) for alias, info in sig.outputs.items()}
        result[key] = Signature(key, sig.method_name, inputs, outputs)
    return result


def read_saved_model(export_dir: str | os.PathLike[str]) -> Any:
    """Parse ``saved_model.pb`` (or ``saved_model.pbtxt``) in ``export_dir``."""
    base = Path(export_dir)
    binary, text = base / SAVED_MODEL_PB, base / SAVED_MODEL_PBTXT
    if binary.is_file():
        return parse_saved_model(binary.read_bytes(), SAVED_MODEL_PB, base)
    if text.is_file():
        return parse_saved_model(text.read_bytes(), SAVED_MODEL_PBTXT, base)
    raise NotFoundError(
        f"SavedModel file does not exist at: {base}/{{{SAVED_MODEL_PBTXT}|{SAVED_MODEL_PB}}}"
    )


def parse_saved_model(data: bytes, file_name: str, where: object) -> Any:
    """Parse the contents of ``file_name`` (``saved_model.pb`` or ``saved_model.pbtxt``)."""
    proto = saved_model_pb2.SavedModel()
    try:
        if file_name == SAVED_MODEL_PBTXT:
            text_format.Parse(data.decode(), proto)
        else:
            proto.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as err:
        raise DataLossError(f"Could not parse SavedModel at {where}: {err}") from err
    return proto


def restores_variables(proto: Any) -> bool:
    """Whether a meta graph restores variables from ``variables/``: a version holding such a
    SavedModel without ``variables.index`` is still being copied (the loader would skip the
    restore and serve uninitialized variables, as TensorFlow does)."""
    return any(mg.saver_def.restore_op_name for mg in proto.meta_graphs)


def select_meta_graph(proto: Any, tags: Iterable[str], export_dir: str | os.PathLike[str]) -> Any:
    wanted = set(tags)
    for meta_graph in proto.meta_graphs:
        if set(meta_graph.meta_info_def.tags) == wanted:
            return meta_graph
    available = [sorted(mg.meta_info_def.tags) for mg in proto.meta_graphs]
    raise NotFoundError(
        f"Could not find meta graph def matching supplied tags: {{ {' '.join(sorted(wanted))} }}. "
        f"To inspect available tag-sets in the SavedModel, please use the SavedModel CLI: "
        f"`graphserve inspect {export_dir}`. Available tag-sets: {available}"
    )


def _init_op_name(meta_graph: Any) -> str | None:
    sig = meta_graph.signature_def.get(INIT_OP_SIGNATURE_KEY)
    if sig is not None:
        for info in sig.outputs.values():
            return TensorRef.parse(info.name).node
    for key in _LEGACY_INIT_COLLECTIONS:
        collection = meta_graph.collection_def.get(key)
        if collection is not None and collection.node_list.value:
            return TensorRef.parse(collection.node_list.value[0]).node
    return None


def _asset_feeds(meta_graph: Any, export_dir: Path) -> dict[str, np.ndarray]:
    defs = list(meta_graph.asset_file_def)
    collection = meta_graph.collection_def.get(_ASSET_COLLECTION)
    if collection is not None:
        for packed in collection.any_list.value:
            asset = meta_graph_pb2.AssetFileDef()
            asset.ParseFromString(packed.value)
            defs.append(asset)
    feeds = {}
    for asset in defs:
        path = export_dir / "assets" / asset.filename
        feeds[asset.tensor_info.name] = np.array(str(path).encode(), dtype=object)
    return feeds


def missing_ops(graph: Graph) -> dict[str, list[str]]:
    """Op type -> node names, for every op in the graph (or a function it uses) with no kernel."""
    load_all_kernels()
    missing: dict[str, list[str]] = {}
    for node in graph:
        if not KERNELS.has(node.op) and node.op != "NoOp":
            missing.setdefault(node.op, []).append(node.name)
    for fname in sorted(referenced_functions(graph)):
        fdef = graph.functions.get(fname)
        for nd in fdef.node_def if fdef is not None else ():
            if not KERNELS.has(nd.op) and nd.op != "NoOp" and nd.op not in graph.functions:
                missing.setdefault(nd.op, []).append(f"{fname}/{nd.name}")
    return missing


def missing_ops_message(missing: Mapping[str, list[str]], where: str) -> str:
    parts = []
    for op, nodes in sorted(missing.items()):
        sample = ", ".join(f"'{n}'" for n in nodes[:3]) + (", ..." if len(nodes) > 3 else "")
        parts.append(f"{op} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}: {sample})")
    return (
        f"Op type not registered: the model at {where} uses {len(missing)} op type"
        f"{'s' if len(missing) != 1 else ''} this runtime has no kernel for: " + "; ".join(parts)
    )


def policy_violations(
    meta_graph: Any, graph: Graph, export_dir: str | os.PathLike[str]
) -> tuple[list[RefusedNode], list[PathRead]]:
    """What the model policy refuses in ``graph`` (see ``runtime.model_policy``): its refused
    nodes, and the files it fixes that lie outside the version's readable directories. The
    tensors loading feeds (asset paths, the checkpoint prefix) are no fixed paths, though a TF1
    graph holds them as constants."""
    fed = {TensorRef.parse(name) for name in _asset_feeds(meta_graph, Path(export_dir))}
    if meta_graph.saver_def.filename_tensor_name:
        fed.add(TensorRef.parse(meta_graph.saver_def.filename_tensor_name))
    readable = ReadableFiles.of_version(export_dir)
    denied = [r for r in constant_path_reads(graph, fed) if not readable.allows(r.path, r.use)]
    return refused_nodes(graph), denied


class LoadedModel:
    """One loaded SavedModel version: its signatures and the session that serves them."""

    def __init__(
        self,
        export_dir: Path,
        tags: tuple[str, ...],
        meta_graph: Any,
        signatures: dict[str, Signature],
        session: Session,
        fetch_instead: Mapping[TensorRef, TensorRef] | None = None,
    ) -> None:
        self.export_dir = export_dir
        self.tags = tags
        self.meta_graph = meta_graph
        self.signatures = signatures
        self.session = session
        # Signature outputs served from another tensor (a TF1 ref output: its read).
        self.fetch_instead: dict[TensorRef, TensorRef] = dict(fetch_instead or {})
        self._calls: dict[tuple[str, tuple[str, ...] | None], _SignatureCall] = {}
        self._lock = threading.Lock()

    def signature(self, key: str) -> Signature:
        try:
            return self.signatures[key]
        except KeyError:
            raise InvalidArgumentError(
                f'Serving signature name: "{key}" not found in signature def'
            ) from None

    def run(
        self,
        signature_key: str,
        inputs: Mapping[str, Any],
        output_aliases: Sequence[str] | None = None,
        cancellation: Cancellation | None = None,
        checked: bool = False,
    ) -> dict[str, np.ndarray]:
        """Run a signature on inputs by alias; returns outputs by alias (all, or those asked).
        A cancelled ``cancellation`` stops the run between kernels (and between loop
        iterations) with its error. ``checked``: the caller vouches that the inputs are
        exactly the signature's aliases, as arrays of its dtypes (a serving layer that has
        checked them itself), so they are not checked again."""
        key = (signature_key, tuple(output_aliases) if output_aliases is not None else None)
        call = self._calls.get(key)
        if call is None:
            call = _SignatureCall(self, self.signature(signature_key), output_aliases)
            with self._lock:
                call = self._calls.setdefault(key, call)
        if checked:
            return call.run_checked(inputs, cancellation)
        return call(inputs, cancellation)

    def close(self) -> None:
        self.session.close()


class _SignatureCall:
    """A signature bound to its compiled plan (inputs in sorted alias order)."""

    def __init__(
        self, model: LoadedModel, sig: Signature, output_aliases: Sequence[str] | None
    ) -> None:
        if output_aliases is None:
            output_aliases = sorted(sig.outputs)
        for alias in output_aliases:
            if alias not in sig.outputs:
                raise InvalidArgumentError(
                    f"output tensor alias not found in signature: {alias} Outputs expected to be "
                    f"in the set {{{','.join(sorted(sig.outputs))}}}."
                )
        self.signature = sig
        self.input_aliases = sorted(sig.inputs)
        self.output_aliases = list(output_aliases)
        fetches = []
        for alias in self.output_aliases:
            ref = TensorRef.parse(sig.outputs[alias].name)
            fetches.append(str(model.fetch_instead.get(ref, ref)))
        self.plan: Plan = model.session.plan(
            [sig.inputs[a].name for a in self.input_aliases], fetches
        )

    def __call__(
        self, inputs: Mapping[str, Any], cancellation: Cancellation | None = None
    ) -> dict[str, np.ndarray]:
        if len(inputs) != len(self.input_aliases) or any(
            a not in inputs for a in self.input_aliases
        ):
            missing = sorted(set(self.input_aliases) - set(inputs))
            extra = sorted(set(inputs) - set(self.input_aliases))
            raise InvalidArgumentError(
                f"signature '{self.signature.key}' takes inputs {self.input_aliases}; "
                f"missing {missing}, unexpected {extra}"
            )
        # Like TensorFlow Serving, signature shapes are not enforced on requests (a model
        # declared [-1, 1] still answers [N] inputs if its ops accept them); dtypes are.
        values = self.plan.run(
            [inputs[a] for a in self.input_aliases], check_shapes=False, cancellation=cancellation
        )
        return dict(zip(self.output_aliases, values))

    def run_checked(
        self, inputs: Mapping[str, Any], cancellation: Cancellation | None = None
    ) -> dict[str, np.ndarray]:
        feeds = [inputs[a] for a in self.input_aliases]
        if cancellation is not None:
            values = self.plan.run_checked_cancellable(cancellation, feeds)
        else:
            values = self.plan.run_unchecked(*feeds)
        return dict(zip(self.output_aliases, values))


def signature_tensors(signatures: Mapping[str, Signature]) -> set[TensorRef]:
    """Every input and output tensor of the signatures: what serving feeds and fetches."""
    return {
        TensorRef.parse(spec.name)
        for sig in signatures.values()
        for spec in (*sig.inputs.values(), *sig.outputs.values())
    }


def load_graph(meta_graph: Any, export_dir: str | os.PathLike[str]) -> Graph:
    """The MetaGraph's graph, functions inlined, cut down to what loading and serving reach:
    the signatures, the asset tensors, the restore op and the init op."""
    op_defs = model_op_defs_from(meta_graph.meta_info_def.stripped_op_list)
    graph = inline_functions(graph_from_graph_def(meta_graph.graph_def, op_defs))
    roots = [ref.node for ref in signature_tensors(signatures_of(meta_graph))]
    roots += [TensorRef.parse(name).node for name in _asset_feeds(meta_graph, Path(export_dir))]
    saver = meta_graph.saver_def
    if saver.restore_op_name:
        roots += [saver.restore_op_name, TensorRef.parse(saver.filename_tensor_name).node]
    init_op = _init_op_name(meta_graph)
    if init_op:
        roots.append(init_op)
    for name in roots:
        if name not in graph:
            raise InvalidArgumentError(
                f"SavedModel at {export_dir} refers to node '{name}', "
                "which its graph does not contain"
            )
    return reachable_graph(graph, roots)


def load_saved_model(
    export_dir: str | os.PathLike[str],
    tags: Iterable[str] = ("serve",),
    *,
    optimize: bool = True,
) -> LoadedModel:
    """Load a SavedModel version directory. Raises an ``OpError`` subclass on any failure."""
    base = Path(export_dir)
    tags = tuple(tags)
    meta_graph = select_meta_graph(read_saved_model(base), tags, base)
    signatures = signatures_of(meta_graph)
    graph = load_graph(meta_graph, base)
    # The policy first: a refused op is refused whether or not a kernel exists for it.
    refused, denied = policy_violations(meta_graph, graph, base)
    if refused or denied:
        raise RefusedByPolicy(policy_message(refused, denied, str(base)))
    missing = missing_ops(graph)
    if missing:
        raise NotFoundError(missing_ops_message(missing, str(base)))
    graph = dereference_refs(graph)
    # A signature output naming a TF1 variable itself serves the variable's value.
    graph, fetch_instead = read_fetched_refs(graph, signature_tensors(signatures))
    protected = {fetch_instead.get(ref, ref) for ref in signature_tensors(signatures)}

    load_session = Session(graph, ResourceManager(ReadableFiles.of_version(base)))
    saver = meta_graph.saver_def
    prefix = base / "variables" / "variables"
    if saver.restore_op_name and Path(f"{prefix}.index").exists():
        load_session.run(
            [],
            {saver.filename_tensor_name: np.array(str(prefix).encode(), dtype=object)},
            [saver.restore_op_name],
        )
    init_op = _init_op_name(meta_graph)
    if init_op:
        load_session.run([], _asset_feeds(meta_graph, base), [init_op])

    serving_graph = graph
    if optimize:
        from runtime.optimize import optimize_for_serving
        from runtime.optimize.freeze import drop_unused_variables

        serving_graph = optimize_for_serving(graph, protected, load_session.resources)
        drop_unused_variables(serving_graph, load_session.resources)
    session = Session(serving_graph, load_session.resources)
    return LoadedModel(base, tags, meta_graph, signatures, session, fetch_instead)


__all__ = [
    "LoadedModel",
    "Signature",
    "TensorSpec",
    "load_graph",
    "load_saved_model",
    "missing_ops",
    "parse_saved_model",
    "policy_violations",
    "read_saved_model",
    "restores_variables",
    "select_meta_graph",
    "signatures_of",
]
