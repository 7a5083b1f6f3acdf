"""Write the KServe CRD schemas that tests/deploy/test_manifests.py validates against.

Usage (from the repository root, with a clone of https://github.com/kserve/kserve):

    python tests/deploy/schemas/extract_kserve_schemas.py /path/to/kserve v0.20.0

For each CRD it reads ``config/crd/full/<file>`` at that release from the clone (``git show``, so
a bare clone works too), takes the ``openAPIV3Schema`` of the served version and writes it as YAML
under ``tests/deploy/schemas/``, headed by the source file, release and commit. The
InferenceService schema is cut to what the example uses: the subtrees listed in ``CUT`` (the
other components, the predictor's per-framework shorthands, multi-node worker specs, the status)
become objects left unchecked. Everything else is KServe's schema unchanged (the ``full`` CRDs
carry no descriptions).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent

# file under config/crd/full -> (apiVersion of the served version, output file)
CRDS = {
    "serving.kserve.io_clusterservingruntimes.yaml": ("v1alpha1", "clusterservingruntime.yaml"),
    "serving.kserve.io_inferenceservices.yaml": ("v1beta1", "inferenceservice.yaml"),
}

_FRAMEWORKS = [
    "huggingface",
    "lightgbm",
    "onnx",
    "paddle",
    "pmml",
    "pytorch",
    "sklearn",
    "tensorflow",
    "triton",
    "xgboost",
]
CUT: dict[str, list[tuple[str, ...]]] = {
    "serving.kserve.io_inferenceservices.yaml": [
        ("status",),
        ("spec", "canary"),
        ("spec", "explainer"),
        ("spec", "transformer"),
        ("spec", "predictor", "workerSpec"),
        *[("spec", "predictor", name) for name in _FRAMEWORKS],
    ],
}
UNCHECKED: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True
    ).stdout


def served_schema(crd: dict[str, Any], version: str) -> dict[str, Any]:
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version and entry.get("served"):
            schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
            return schema
    raise SystemExit(f"{crd['metadata']['name']}: no served version {version}")


def cut(schema: dict[str, Any], path: tuple[str, ...]) -> None:
    node = schema
    for name in path[:-1]:
        node = node["properties"][name]
    if path[-1] not in node["properties"]:
        raise SystemExit(f"nothing to cut at {'.'.join(path)}")
    node["properties"][path[-1]] = dict(UNCHECKED)


def main(repo: str, release: str) -> None:
    commit = git(repo, "rev-parse", f"{release}^{{commit}}").strip()
    for source, (version, out) in CRDS.items():
        path = f"config/crd/full/{source}"
        crd = yaml.safe_load(git(repo, "show", f"{release}:{path}"))
        schema = served_schema(crd, version)
        cuts = CUT.get(source, [])
        for where in cuts:
            cut(schema, where)
        header = [
            f"# openAPIV3Schema of {crd['spec']['names']['kind']} {version}, from KServe's",
            f"# {path}",
            f"# at release {release} (commit {commit}), https://github.com/kserve/kserve.",
            "# Written by tests/deploy/schemas/extract_kserve_schemas.py; regenerate with it.",
        ]
        if cuts:
            header.append("# Cut to unchecked objects:")
            header += [f"#   {'.'.join(where)}" for where in cuts]
        text = yaml.safe_dump(schema, sort_keys=True, width=100)
        (HERE / out).write_text("\n".join(header) + "\n" + text)
        print(f"wrote {out} ({len(text)} bytes)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
