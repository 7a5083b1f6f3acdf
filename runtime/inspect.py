"""``graphserve inspect DIR``: a SavedModel's tag-sets, signatures and op support.

Prints what ``saved_model_cli show --all`` shows (tags, signature inputs/outputs with dtype, shape
and tensor name, method name) plus whether every op the signatures, restore and init reach has a
kernel here and whether the model policy (``runtime.model_policy``) lets it be served, so a model
can be checked before it is deployed. Exit status 1 if an op is missing or refused.
Reached ops include those inside the function bodies that If/While/Case (or a call left
uninlined) run, which the kernel check looks inside too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from runtime.dtypes import DataType
from runtime.errors import OpError
from runtime.functions import referenced_functions
from runtime.graph import Graph
from runtime.saved_model import (
    load_graph,
    missing_ops,
    policy_violations,
    read_saved_model,
    signatures_of,
)


def _shape(shape: tuple[int, ...] | None) -> str:
    return (
        "unknown_rank"
        if shape is None
        else "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")
    )


def reached_op_types(graph: Graph) -> list[str]:
    """The op types of the graph's nodes and of the functions they run, transitively.

    A node whose op names a library function is a call to it: its body's ops count instead."""
    functions = graph.functions
    ops = {node.op for node in graph}
    for name in referenced_functions(graph):
        fdef = functions.get(name)
        if fdef is not None:
            ops.update(nd.op for nd in fdef.node_def)
    return sorted(op for op in ops if op not in functions)


def describe(export_dir: str, tag_set: str | None, signature: str | None, out: TextIO) -> int:
    proto = read_saved_model(export_dir)
    status = 0
    for meta_graph in proto.meta_graphs:
        tags = ",".join(sorted(meta_graph.meta_info_def.tags))
        if tag_set is not None and set(tag_set.split(",")) != set(meta_graph.meta_info_def.tags):
            continue
        print(
            f"MetaGraphDef with tag-set: '{tags}' contains the following SignatureDefs:", file=out
        )
        for key, sig in sorted(signatures_of(meta_graph).items()):
            if signature is not None and key != signature:
                continue
            print(f"\nsignature_def['{key}']:", file=out)
            for title, specs in (("inputs", sig.inputs), ("outputs", sig.outputs)):
                print(
                    f"  The given SavedModel SignatureDef contains the following {title}:", file=out
                )
                for alias, spec in sorted(specs.items()):
                    print(f"    {title}['{alias}'] tensor_info:", file=out)
                    print(f"        dtype: {DataType(spec.dtype).name}", file=out)
                    print(f"        shape: {_shape(spec.shape)}", file=out)
                    print(f"        name: {spec.name}", file=out)
            print(f"  Method name is: {sig.method_name}", file=out)
        reached = load_graph(meta_graph, export_dir)
        refused, denied = policy_violations(meta_graph, reached, export_dir)
        # A refused op is reported as such, kernel or not.
        refused_types = {item.op for item in refused}
        missing = {op: nodes for op, nodes in missing_ops(reached).items()
                   if op not in refused_types}
        op_types = reached_op_types(reached)
        print(
            "\nOps reachable from signatures, restore and init, function bodies included "
            f"({len(op_types)}): {', '.join(op_types)}",
            file=out,
        )
        if refused or denied:
            status = 1
            print("Refused by the model policy:", file=out)
            for item in refused:
                print(f"  {item.op}: '{item.node}' ({item.concern.value})", file=out)
            for read in denied:
                print(f"  {read.op}: '{read.node}' reads '{read.path}'", file=out)
        if missing:
            status = 1
            print("Unsupported ops (no kernel):", file=out)
            for op, nodes in sorted(missing.items()):
                print(f"  {op}: {len(nodes)} node(s), e.g. {nodes[0]}", file=out)
        elif not (refused or denied):
            print("Every reachable op is supported.", file=out)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="graphserve inspect", description="Show a SavedModel's signatures and op support."
    )
    parser.add_argument("dir", help="SavedModel directory (a version directory)")
    parser.add_argument("--tag_set", default=None, help="comma-separated tags (default: all)")
    parser.add_argument("--signature_def", default=None, help="show only this signature")
    args = parser.parse_args(argv)
    try:
        return describe(args.dir, args.tag_set, args.signature_def, sys.stdout)
    except OpError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
