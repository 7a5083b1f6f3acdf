"""Regenerate the Python modules for every .proto under protos/.

Usage:
    .venv/bin/python protos/generate.py          # write generated files next to the sources
    .venv/bin/python protos/generate.py --check  # exit 1 if the committed files are stale

protoc sees the sources with `-I protos`, so a file's import path is its upstream path
(`tensorflow/core/framework/tensor.proto`) and the messages get upstream's full names. The
generated code would then import `tensorflow.core...`, which is the real TensorFlow package;
we rewrite those imports to `protos.tensorflow...` so our modules never shadow or load it (the
same for every package in TOP_LEVEL).
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.resources
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT.name  # "protos"
# Proto packages whose generated imports are rewritten under protos/ (`inference` is Triton's
# Open Inference Protocol package).
TOP_LEVEL = ("inference", "tensorflow", "tensorflow_serving")
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")

# `from tensorflow.core.framework import x_pb2` / `import tensorflow_serving.apis.y_pb2`
_IMPORT_RE = re.compile(rf"^(\s*)(from|import) ({'|'.join(TOP_LEVEL)})([.\s])", flags=re.MULTILINE)
# The module name protobuf stamps on generated classes (their __module__).
_MODULE_NAME_RE = re.compile(
    rf"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, ')(({'|'.join(TOP_LEVEL)})\.)"
)

_DEFINES_CLASS_RE = re.compile(r"^class ", flags=re.MULTILINE)


def proto_sources(root: Path = ROOT) -> list[Path]:
    """All .proto files, relative to `root`, in a stable order."""
    return sorted(p.relative_to(root) for p in root.rglob("*.proto"))


def _well_known_include() -> Path:
    # grpc_tools ships google/protobuf/*.proto (any, wrappers, ...) next to protoc.
    return Path(str(importlib.resources.files("grpc_tools") / "_proto"))


def _rewrite(text: str) -> str:
    text = _IMPORT_RE.sub(rf"\1\2 {PACKAGE}.\3\4", text)
    return _MODULE_NAME_RE.sub(rf"\1{PACKAGE}.\2", text)


def generate_into(out: Path, root: Path = ROOT) -> list[Path]:
    """Run protoc over every source into `out`; return the generated files (relative)."""
    sources = proto_sources(root)
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{_well_known_include()}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *(str(s) for s in sources),
    ]
    result = subprocess.run(cmd, check=False, cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"protoc failed:\n{result.stderr}")

    generated: list[Path] = []
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(out)
        if rel.name.endswith("_pb2_grpc.py") and not _DEFINES_CLASS_RE.search(path.read_text()):
            # The grpc plugin emits a module for every file; keep only those with services.
            path.unlink()
            continue
        path.write_text(_rewrite(path.read_text()))
        generated.append(rel)

    # Every directory on the way to a generated module must be a package.
    for rel in list(generated):
        parent = rel.parent
        while parent != Path("."):
            init = parent / "__init__.py"
            if not (out / init).exists():
                (out / init).write_text("")
                generated.append(init)
            parent = parent.parent
    return sorted(generated)


def committed_files(root: Path = ROOT) -> list[Path]:
    """Generated-looking files currently under `root` (sub-package __init__.py included)."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if not path.is_file() or "__pycache__" in rel.parts:
            continue
        if rel.name.endswith(GENERATED_SUFFIXES) or (
            rel.name == "__init__.py" and rel.parts[0] in TOP_LEVEL
        ):
            found.append(rel)
    return sorted(found)


def stale_files(root: Path = ROOT) -> list[str]:
    """Describe every difference between the committed and freshly generated files."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate_into(Path(tmp), root)
        problems = []
        have = set(committed_files(root))
        for rel in fresh:
            if rel not in have:
                problems.append(f"missing: {rel}")
            elif not filecmp.cmp(root / rel, Path(tmp) / rel, shallow=False):
                problems.append(f"differs: {rel}")
        problems += [f"extra: {rel}" for rel in sorted(have - set(fresh))]
    return problems


def write(root: Path = ROOT) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate_into(Path(tmp), root)
        for rel in fresh:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or not filecmp.cmp(target, Path(tmp) / rel, shallow=False):
                shutil.copyfile(Path(tmp) / rel, target)
        for rel in sorted(set(committed_files(root)) - set(fresh)):
            (root / rel).unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only verify the committed files")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale_files()
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("generated protos are stale: run `make protos`", file=sys.stderr)
            return 1
        return 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
