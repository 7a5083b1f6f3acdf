"""deploy/: every manifest parses, validates against its schema, and agrees with the server.

Core Kubernetes kinds are checked by kubernetes-validate in strict mode (unknown fields rejected)
against the Kubernetes version below, from the schemas the package bundles (no network). KServe
kinds are checked against the openAPIV3Schema of KServe's own CRDs (tests/deploy/schemas/, see the
headers there for the release), made strict the same way. The rest checks that the manifests use
the server as it is: flags it accepts, its ports, probe paths and drain timing.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from protos.tensorflow_serving.config import monitoring_config_pb2
from serving.cli import parse_flags
from serving.config import ServerOptions, parse_model_server_config
from serving.proto_text import parse_proto_text
from serving.rest.app import HEALTHZ, READYZ

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEMAS = Path(__file__).resolve().parent / "schemas"

# The oldest Kubernetes still common in managed clusters; the manifests use nothing newer.
KUBERNETES_VERSION = "1.30.0"
# (apiVersion, kind) -> the KServe schema file for it.
KSERVE_SCHEMAS = {
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): "clusterservingruntime.yaml",
    ("serving.kserve.io/v1beta1", "InferenceService"): "inferenceservice.yaml",
}
# Kinds no API server stores: read by kustomize on the client.
CLIENT_SIDE = {("kustomize.config.k8s.io/v1beta1", "Kustomization")}

YAML_FILES = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
# The directories of Kubernetes objects (deploy/ holds the container image's files too).
MANIFEST_DIRS = ("kubernetes", "kserve")
MANIFESTS = [p for p in YAML_FILES if p.relative_to(DEPLOY).parts[0] in MANIFEST_DIRS]


def _load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _documents() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in MANIFESTS for doc in _load(path)]


def _doc_id(item: tuple[Path, dict[str, Any]]) -> str:
    path, doc = item
    return f"{path.relative_to(DEPLOY)}:{doc.get('kind')}/{doc.get('metadata', {}).get('name', '')}"


DOCUMENTS = _documents()
CORE = [
    d
    for d in DOCUMENTS
    if (d[1]["apiVersion"], d[1]["kind"]) not in {*KSERVE_SCHEMAS, *CLIENT_SIDE}
]
KSERVE = [d for d in DOCUMENTS if (d[1]["apiVersion"], d[1]["kind"]) in KSERVE_SCHEMAS]


def _one(directory: str, kind: str) -> dict[str, Any]:
    found = [
        doc for path, doc in DOCUMENTS if path.parent.name == directory and doc["kind"] == kind
    ]
    assert len(found) == 1, f"expected one {kind} under deploy/{directory}, found {len(found)}"
    return found[0]


# --- every document parses and validates -----------------------------------------------------


def test_deploy_has_manifests() -> None:
    assert {p.parent.name for p in MANIFESTS} == set(MANIFEST_DIRS)
    assert CORE and KSERVE


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    list(yaml.safe_load_all(path.read_text()))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_manifests_are_kubernetes_objects(path: Path) -> None:
    docs = _load(path)
    assert docs, f"{path} holds no document"
    for doc in docs:
        assert isinstance(doc, dict), f"{path}: a document is {type(doc).__name__}, not a mapping"
        assert {"apiVersion", "kind"} <= doc.keys(), f"{path}: apiVersion or kind missing"


@pytest.mark.parametrize("item", CORE, ids=_doc_id)
def test_core_kinds_validate_strictly(item: tuple[Path, dict[str, Any]]) -> None:
    _, doc = item
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        pytest.fail(f"{_doc_id(item)}: {err.message}")


def _strict(schema: Any) -> Any:
    """A CRD schema that rejects unknown fields, as `kubectl apply --validate=strict` does,
    where the CRD does not preserve them."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    if "properties" in schema:
        out["properties"] = {name: _strict(sub) for name, sub in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    return out


@functools.cache
def _kserve_validator(name: str) -> jsonschema.protocols.Validator:
    schema = _strict(yaml.load((SCHEMAS / name).read_text(), Loader=yaml.CSafeLoader))
    # A CRD's schema is OpenAPI 3.0's dialect of JSON Schema draft 4 (boolean exclusiveMinimum).
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.mark.parametrize("item", KSERVE, ids=_doc_id)
def test_kserve_kinds_validate_against_kserve_crds(item: tuple[Path, dict[str, Any]]) -> None:
    _, doc = item
    validator = _kserve_validator(KSERVE_SCHEMAS[doc["apiVersion"], doc["kind"]])
    errors = [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(doc)
    ]
    assert not errors, f"{_doc_id(item)}:\n" + "\n".join(errors)


def test_strict_kserve_schema_rejects_unknown_fields() -> None:
    runtime = copy.deepcopy(_one("kserve", "ClusterServingRuntime"))
    runtime["spec"]["containers"][0]["argz"] = []
    assert not _kserve_validator("clusterservingruntime.yaml").is_valid(runtime)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = _one("kubernetes", "Kustomization")
    others = {p.name for p in MANIFESTS if p.parent.name == "kubernetes"} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(others)


# --- the Deployment runs the server as it is --------------------------------------------------


def _container(directory: str, kind: str) -> dict[str, Any]:
    doc = _one(directory, kind)
    spec = doc["spec"]["template"]["spec"] if kind == "Deployment" else doc["spec"]
    assert len(spec["containers"]) == 1
    return dict(spec["containers"][0])


def _flags(container: dict[str, Any]) -> dict[str, Any]:
    assert container["command"] == ["graphserve"]
    parsed = parse_flags(container["args"])
    assert not parsed.unknown, f"flags graphserve does not know: {parsed.unknown}"
    return parsed.values


def test_deployment_flags_ports_and_probes_match_the_server() -> None:
    container = _container("kubernetes", "Deployment")
    flags = _flags(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # gRPC on the server's default port; REST (off by default) where the tensorflow/serving
    # image puts it.
    assert ports["grpc"] == flags["port"] == ServerOptions().port == 8500
    assert ports["http"] == flags["rest_api_port"] == 8501
    for probe, path in (
        ("startupProbe", HEALTHZ),
        ("livenessProbe", HEALTHZ),
        ("readinessProbe", READYZ),
    ):
        get = container[probe]["httpGet"]
        assert get["path"] == path.decode(), probe
        assert ports.get(get["port"], get["port"]) == flags["rest_api_port"], probe


def test_termination_grace_period_outlasts_the_drain() -> None:
    pod = _one("kubernetes", "Deployment")["spec"]["template"]["spec"]
    flags = _flags(_container("kubernetes", "Deployment"))
    defaults = ServerOptions()
    drain = flags.get("drain_delay_seconds", defaults.drain_delay_seconds) + flags.get(
        "drain_grace_seconds", defaults.drain_grace_seconds
    )
    assert pod["terminationGracePeriodSeconds"] > drain
    # The readiness probe must notice the drain within its delay.
    probe = _container("kubernetes", "Deployment")["readinessProbe"]
    assert probe["periodSeconds"] * probe.get("failureThreshold", 3) <= flags["drain_delay_seconds"]


def test_deployment_config_files_come_from_the_configmap() -> None:
    pod = _one("kubernetes", "Deployment")["spec"]["template"]["spec"]
    container = _container("kubernetes", "Deployment")
    flags = _flags(container)
    configmap = _one("kubernetes", "ConfigMap")
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])

    def key(flag: str) -> str:
        path = Path(flags[flag])
        assert path.parent == Path(mount["mountPath"]), flag
        return path.name

    models = parse_model_server_config(configmap["data"][key("model_config_file")], Path("/"))
    assert len(models) == 1
    models_mount = next(m for m in container["volumeMounts"] if m["name"] == "models")
    assert models[0].base_path.is_relative_to(models_mount["mountPath"])

    monitoring = parse_proto_text(
        configmap["data"][key("monitoring_config_file")], monitoring_config_pb2.MonitoringConfig()
    )
    assert monitoring.prometheus_config.enable
    annotations = _one("kubernetes", "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == monitoring.prometheus_config.path
    assert int(annotations["prometheus.io/port"]) == flags["rest_api_port"]


def test_deployment_runs_locked_down() -> None:
    pod = _one("kubernetes", "Deployment")["spec"]["template"]["spec"]
    container = _container("kubernetes", "Deployment")
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 1000
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()


def test_service_hpa_and_pdb_point_at_the_deployment() -> None:
    deployment = _one("kubernetes", "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"]: p["containerPort"] for p in _container("kubernetes", "Deployment")["ports"]}

    service = _one("kubernetes", "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        "grpc": (ports["grpc"], "grpc"),
        "http": (ports["http"], "http"),
    }

    hpa = _one("kubernetes", "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    # The HPA owns the replica count.
    assert "replicas" not in deployment["spec"]

    pdb = _one("kubernetes", "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


# --- the KServe runtime runs the server as KServe runs TensorFlow Serving ---------------------


def test_kserve_runtime_serves_tensorflow_like_tf_serving() -> None:
    runtime = _one("kserve", "ClusterServingRuntime")
    flags = _flags(_container("kserve", "ClusterServingRuntime"))
    # KServe's kserve-tensorflow-serving: the model named after the InferenceService, loaded
    # from where the storage initializer puts it, REST on KServe's 8080.
    assert flags["model_name"] == "{{.Name}}"
    assert flags["model_base_path"] == "/mnt/models"
    assert flags["rest_api_port"] == 8080
    assert flags["port"] == 9000
    formats = runtime["spec"]["supportedModelFormats"]
    assert {(f["name"], f["version"], f["autoSelect"]) for f in formats} == {
        ("tensorflow", "1", True),
        ("tensorflow", "2", True),
    }
    assert runtime["spec"]["protocolVersions"] == ["v1", "v2", "grpc-v1", "grpc-v2"]


def test_inference_service_uses_the_runtime() -> None:
    runtime = _one("kserve", "ClusterServingRuntime")
    model = _one("kserve", "InferenceService")["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] == "tensorflow"
    assert model.get("protocolVersion", "v1") in runtime["spec"]["protocolVersions"]
    assert model["storageUri"]
