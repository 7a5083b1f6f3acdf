"""What a served graph may do: a model is data.

A SavedModel comes from whoever ships it and its signatures take input from whoever calls them;
neither may make the server run code it brings along, write files or state outside the process,
read files other than the version's own, or reach other processes. The lists below name the op
types that do such things. ``load_saved_model`` refuses a model that reaches any of them, before it
asks whether a kernel exists, so a kernel added later for one of these ops stays out of reach.

Reading the version's own files (vocabularies, the checkpoint) is allowed: the kernels that open a
path ask ``runtime.readable_files`` first, and ``constant_path_reads`` lets the loader refuse at
load a path the graph itself fixes.

Ops that only log or check (Print, PrintV2 to a log stream, Assert, StringFormat, the *Summary ops
that merely serialize a proto) stay allowed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.attrs import decode_attrs
from runtime.errors import PermissionDeniedError
from runtime.functions import referenced_functions
from runtime.graph import Graph, TensorRef
from runtime.readable_files import FileUse, dirs_text


class RefusedByPolicy(PermissionDeniedError):
    """A load the policy refuses: the same files are refused again, so retrying cannot help."""


class Concern(enum.Enum):
    """Why an op is refused; the value is how a refusal message says it."""

    RUNS_CODE = "runs code the model brings along"
    WRITES = "writes files or state outside the server"
    READS_FILES = "reads arbitrary files or lists directories"
    REACHES_OUT = "talks to other processes"


def _all(concern: Concern, *ops: str) -> dict[str, Concern]:
    return dict.fromkeys(ops, concern)


REFUSED_OPS: Mapping[str, Concern] = {
    **_all(Concern.RUNS_CODE, "PyFunc", "PyFuncStateless", "EagerPyFunc"),
    **_all(
        Concern.WRITES,
        "WriteFile", "Save", "SaveSlices", "SaveV2", "MergeV2Checkpoints",
        "CalibrationStatisticsSaver", "FileSystemSetConfiguration",
        # Summary writers (the *Summary ops that only build a proto are harmless).
        "CreateSummaryFileWriter", "CreateSummaryDbWriter", "SummaryWriter", "WriteSummary",
        "WriteRawProtoSummary", "WriteScalarSummary", "WriteHistogramSummary",
        "WriteImageSummary", "WriteAudioSummary", "WriteGraphSummary", "ImportEvent",
        "FlushSummaryWriter", "CloseSummaryWriter", "StatsAggregatorSetSummaryWriter",
        # Datasets that write (CacheDataset writes its cache to the file its input names).
        "SaveDataset", "SaveDatasetV2", "DatasetToTFRecord", "ExperimentalDatasetToTFRecord",
        "SnapshotDataset", "SnapshotDatasetV2", "DistributedSave", "CacheDataset",
        "CacheDatasetV2",
    ),
    **_all(
        Concern.READS_FILES,
        "ReadFile", "MatchingFiles", "MatchingFilesDataset", "ExperimentalMatchingFilesDataset",
        "ImmutableConst", "RecordInput", "LoadAndRemapMatrix", "GenerateVocabRemapping",
        "DTensorRestoreV2",
        # TF1 readers and the ops that drive them.
        "WholeFileReader", "WholeFileReaderV2", "TextLineReader", "TextLineReaderV2",
        "TFRecordReader", "TFRecordReaderV2", "FixedLengthRecordReader",
        "FixedLengthRecordReaderV2", "IdentityReader", "IdentityReaderV2", "LMDBReader",
        "ReaderRead", "ReaderReadV2", "ReaderReadUpTo", "ReaderReadUpToV2",
        "ReaderNumRecordsProduced", "ReaderNumRecordsProducedV2", "ReaderNumWorkUnitsCompleted",
        "ReaderNumWorkUnitsCompletedV2", "ReaderReset", "ReaderResetV2", "ReaderRestoreState",
        "ReaderRestoreStateV2", "ReaderSerializeState", "ReaderSerializeStateV2",
        # Datasets over files.
        "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset", "FixedLengthRecordDataset",
        "FixedLengthRecordDatasetV2", "CSVDataset", "CSVDatasetV2", "ExperimentalCSVDataset",
        "LMDBDataset", "ExperimentalLMDBDataset", "SqlDataset", "ExperimentalSqlDataset",
        "LoadDataset", "SnapshotDatasetReader", "SnapshotChunkDataset",
        "SnapshotNestedDatasetReader", "ListSnapshotChunksDataset",
    ),
    **_all(
        Concern.REACHES_OUT,
        "RpcServer", "RpcServerStart", "RpcServerRegister", "RpcClient", "RpcCall",
        "RpcCheckStatus", "RpcGetValue", "RemoteCall", "DataServiceDataset",
        "DataServiceDatasetV2", "DataServiceDatasetV3", "DataServiceDatasetV4", "RegisterDataset",
        "RegisterDatasetV2",
    ),
}


@dataclass(frozen=True)
class AttrRule:
    """An op refused only when one of its attrs asks for something refused. A missing attr
    means the op's default, which every rule here allows."""

    attr: str
    refuses: Callable[[Any], bool]
    concern: Concern


def _file_stream(value: Any) -> bool:
    return str(value).startswith("file://")


def _any_set(value: Any) -> bool:
    return any(str(item) for item in value) if isinstance(value, list) else bool(value)


def _not_local(value: Any) -> bool:
    return str(value) != "local://"


_DEBUG_URLS = AttrRule("debug_urls", _any_set, Concern.WRITES)  # file:// and grpc:// sinks

REFUSED_WITH_ATTR: Mapping[str, AttrRule] = {
    "PrintV2": AttrRule("output_stream", _file_stream, Concern.WRITES),
    **dict.fromkeys(
        ("DebugIdentity", "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount",
         "DebugNumericSummary"),
        _DEBUG_URLS,
    ),
    # tfdbg's copies carry "op;url;gated" specs.
    **dict.fromkeys(("Copy", "CopyHost"), AttrRule("debug_ops_spec", _any_set, Concern.WRITES)),
    # Any other descriptor source is a file of FileDescriptorSets read at load.
    **dict.fromkeys(
        ("DecodeProtoV2", "EncodeProto"),
        AttrRule("descriptor_source", _not_local, Concern.READS_FILES),
    ),
}

# Ops that open a file named by an input: the input's index and what the file is for. Their
# kernels check the path at run time; a path the graph fixes is checked at load.
PATH_INPUTS: Mapping[str, tuple[int, FileUse]] = {
    "InitializeTableFromTextFile": (1, FileUse.ASSET),
    "InitializeTableFromTextFileV2": (1, FileUse.ASSET),
    "RestoreV2": (0, FileUse.CHECKPOINT),
    "Restore": (0, FileUse.CHECKPOINT),
    "RestoreSlice": (0, FileUse.CHECKPOINT),
}


def refusal(op: str, attrs: Mapping[str, Any]) -> Concern | None:
    """Why the policy refuses a node of type ``op`` with ``attrs``, or None if it may run."""
    concern = REFUSED_OPS.get(op)
    if concern is not None:
        return concern
    rule = REFUSED_WITH_ATTR.get(op)
    if rule is not None and rule.attr in attrs and rule.refuses(attrs[rule.attr]):
        return rule.concern
    return None


@dataclass(frozen=True)
class RefusedNode:
    """A node the policy refuses: its name (``function/node`` inside a library function)."""

    node: str
    op: str
    concern: Concern


def refused_nodes(graph: Graph) -> list[RefusedNode]:
    """Every node of the graph, and of the library functions it runs, that the policy refuses."""
    found = [
        RefusedNode(node.name, node.op, concern)
        for node in graph
        if (concern := refusal(node.op, node.attrs)) is not None
    ]
    for fname in sorted(referenced_functions(graph)):
        fdef = graph.functions.get(fname)
        for nd in fdef.node_def if fdef is not None else ():
            # Body attrs are decoded only where a rule reads them.
            attrs = decode_attrs(nd.attr) if nd.op in REFUSED_WITH_ATTR else {}
            concern = refusal(nd.op, attrs)
            if concern is not None:
                found.append(RefusedNode(f"{fname}/{nd.name}", nd.op, concern))
    return found


@dataclass(frozen=True)
class PathRead:
    """A node that opens a file whose name the graph fixes."""

    node: str
    op: str
    path: str
    use: FileUse


def constant_path_reads(graph: Graph, fed: Iterable[TensorRef] = ()) -> list[PathRead]:
    """Nodes of ``PATH_INPUTS`` ops whose path input is a string constant of the graph (through
    Identity-like nodes). A constant in ``fed`` is not one: the loader replaces it (the asset
    paths and the checkpoint prefix of a TF1 SavedModel are constants it feeds). Library
    function bodies are left to the kernels' run-time check."""
    replaced = set(fed)
    reads = []
    for node in graph:
        spec = PATH_INPUTS.get(node.op)
        if spec is None or len(node.inputs) <= spec[0]:
            continue
        path = _constant_string(graph, node.inputs[spec[0]], replaced)
        if path is not None:
            reads.append(PathRead(node.name, node.op, path, spec[1]))
    return reads


def _constant_string(graph: Graph, ref: TensorRef, fed: set[TensorRef]) -> str | None:
    seen: set[str] = set()
    while ref not in fed and ref.node in graph and ref.node not in seen:
        seen.add(ref.node)
        producer = graph.node(ref.node)
        if producer.op in ("Const", "HostConst"):
            value = producer.attrs.get("value")
            if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype == object:
                item = value.item()
                if isinstance(item, bytes):
                    return item.decode("utf-8", "surrogateescape")
            return None
        if not (graph.is_identity(producer) and producer.inputs):
            return None
        ref = producer.inputs[0]
    return None


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def policy_message(
    refused: Sequence[RefusedNode], denied_reads: Sequence[PathRead], where: str
) -> str:
    """The load error for a model the policy refuses, naming every offending node."""
    parts = []
    if refused:
        by_op: dict[str, list[RefusedNode]] = {}
        for item in refused:
            by_op.setdefault(item.op, []).append(item)
        ops = []
        for op, items in sorted(by_op.items()):
            count = f"{len(items)} node{'s' if len(items) != 1 else ''}"
            ops.append(f"{op} ({items[0].concern.value}; {count}: {_quoted([i.node for i in items])})")
        parts.append(
            f"it uses {len(by_op)} op type{'s' if len(by_op) != 1 else ''} a served model may "
            "not run: " + "; ".join(ops)
        )
    if denied_reads:
        reads = [
            f"{r.op} node '{r.node}' reads '{r.path}' (a model reads {r.use.value}s only from "
            f"{dirs_text(r.use)})"
            for r in denied_reads
        ]
        parts.append("it reads files outside its version directory: " + "; ".join(reads))
    return f"Refused by the model policy: the model at {where} may not be served: " + "; and ".join(
        parts
    )


__all__ = [
    "PATH_INPUTS",
    "REFUSED_OPS",
    "REFUSED_WITH_ATTR",
    "AttrRule",
    "Concern",
    "PathRead",
    "RefusedByPolicy",
    "RefusedNode",
    "constant_path_reads",
    "policy_message",
    "refusal",
    "refused_nodes",
]
