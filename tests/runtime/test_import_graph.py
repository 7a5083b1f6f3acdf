"""The runtime's modules import each other without cycles.

Every import counts: at module level, inside functions, under ``TYPE_CHECKING``, and the kernel
and op families that ``importlib.import_module`` loads by name. Run as a script to print the
cycles (and the imports made inside functions)::

    .venv/bin/python tests/runtime/test_import_graph.py
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "runtime"

Edges = dict[tuple[str, str], set[str]]  # (importer, imported) -> how: top, function, dynamic


def _modules() -> dict[str, Path]:
    """Every module by name: the Python ones, and the compiled ones by their type stubs
    (``.pyi``), whose imports are the stubs' own."""
    modules = {}
    for path in [*(ROOT / PACKAGE).rglob("*.py"), *(ROOT / PACKAGE).rglob("*.pyi")]:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules.setdefault(".".join(parts), path)
    return modules


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, str]]:
    """(imported runtime module, how) for each import in ``path``."""
    tree = ast.parse(path.read_text())
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(inner) for inner in ast.walk(node) if inner is not node)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        how = "function" if id(node) in in_function else "top"
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, how
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield (submodule if submodule in modules else base), how
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.JoinedStr)
        ):
            # importlib.import_module(f"runtime.kernels.{family}"): any module of that folder.
            prefix = "".join(
                v.value for v in node.args[0].values if isinstance(v, ast.Constant)
            )
            for name in modules:
                if name.startswith(prefix) and name.count(".") == prefix.count("."):
                    yield name, "dynamic"


def import_edges() -> Edges:
    modules = _modules()
    edges: Edges = {}
    for module, path in modules.items():
        for imported, how in _imports(module, path, modules):
            if imported in modules and imported != module:
                edges.setdefault((module, imported), set()).add(how)
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycles_are_found() -> None:
    edges: Edges = {("a", "b"): {"top"}, ("b", "c"): {"function"}, ("c", "a"): {"top"},
                    ("c", "d"): {"top"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_runtime_modules_import_each_other_without_cycles() -> None:
    edges = import_edges()
    assert ("runtime.compiler", "runtime.plan") in edges  # the walk sees the imports
    assert ("runtime.kernels.logistic", "runtime.kernels._logistic") in edges  # and compiled ones
    assert cycles(edges) == []


def _main() -> int:
    edges = import_edges()
    found = cycles(edges)
    print(f"{len(found)} import cycle(s) among {PACKAGE} modules")
    for component in found:
        members = set(component)
        print("  cycle:", ", ".join(component))
        for (a, b), how in sorted(edges.items()):
            if a in members and b in members:
                print(f"    {a} -> {b} ({', '.join(sorted(how))})")
    inner = sorted((a, b) for (a, b), how in edges.items() if "function" in how)
    print(f"{len(inner)} import(s) of {PACKAGE} modules inside functions")
    for a, b in inner:
        print(f"  {a} -> {b}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(_main())
