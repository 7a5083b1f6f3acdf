"""Model base paths on object storage, against real protocol servers on loopback: moto's S3
server and gcp-storage-emulator for GCS. Versions are found by polling (stepped here by hand),
downloaded whole once settled, and their local copies follow the policy."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pytest
from gcp_storage_emulator.server import create_server
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from moto.server import ThreadedMotoServer

from serving.config import ModelConfig, ServerOptions, model_configs
from serving.core.server_core import CoreOptions, ServerCore
from serving.object_storage import redact, scheme_of, storage_options
from serving.servable import ServableRequest
from tests.serving.e2e.support import HALF_PLUS_THREE_V, HALF_PLUS_TWO_V
from tests.serving.rest.server_process import ServerProcess, free_port

WAIT_S = 60.0
SECRET = "s3cr3t-key-never-logged"


def test_schemes() -> None:
    assert scheme_of("s3://bucket/m") == "s3"
    assert scheme_of("gs://bucket/m") == "gs"
    assert scheme_of("/models/m") is None
    assert scheme_of("file://x") is None


def test_tensorflow_servings_environment_variables() -> None:
    assert storage_options("s3", {"S3_ENDPOINT": "minio:9000", "S3_USE_HTTPS": "0",
                                  "S3_VERIFY_SSL": "0", "AWS_REGION": "eu-west-1"}) == {
        "endpoint_url": "http://minio:9000",
        "client_kwargs": {"verify": False, "region_name": "eu-west-1"},
    }
    assert storage_options("s3", {"S3_ENDPOINT": "s3.example.com"}) == {
        "endpoint_url": "https://s3.example.com"
    }
    assert storage_options("s3", {"AWS_ENDPOINT_URL": "http://x:1", "S3_ENDPOINT": "y"}) == {
        "endpoint_url": "http://x:1"
    }
    assert storage_options("gs", {"STORAGE_EMULATOR_HOST": "localhost:9023"}) == {
        "endpoint_url": "http://localhost:9023", "token": "anon"
    }
    assert storage_options("gs", {"GOOGLE_APPLICATION_CREDENTIALS": "/k.json"}) == {
        "token": "/k.json"
    }


def test_credentials_are_redacted() -> None:
    env = {"AWS_SECRET_ACCESS_KEY": SECRET}
    assert redact(f"signature for {SECRET} failed", env) == "signature for <redacted> failed"


def test_a_url_base_path_is_kept_as_given(tmp_path: Path) -> None:
    options = ServerOptions(model_name="m", model_base_path="s3://bucket/models/m")
    (config,) = model_configs(options, tmp_path)
    assert config.remote == "s3://bucket/models/m"


class Store:
    """A bucket ``models`` on a protocol server on loopback; the model lives under ``m/``."""

    url: str  # the model's base path
    env: dict[str, str]  # what points the server's client at it

    def put(self, key: str, body: bytes) -> None:
        raise NotImplementedError

    def delete(self, prefix: str) -> None:
        raise NotImplementedError

    def upload(self, prefix: str, source: Path, skip: str = "") -> None:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            rel = path.relative_to(source).as_posix()
            if not (skip and rel.startswith(skip)):
                self.put(f"{prefix}/{rel}", path.read_bytes())


class S3(Store):
    def __init__(self, port: int) -> None:
        self.url = "s3://models/m"
        self.env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": SECRET,
                    "AWS_REGION": "us-east-1", "S3_ENDPOINT": f"127.0.0.1:{port}",
                    "S3_USE_HTTPS": "0"}
        self.client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                                   region_name="us-east-1", aws_access_key_id="testing",
                                   aws_secret_access_key=SECRET)
        self.client.create_bucket(Bucket="models")

    def put(self, key: str, body: bytes, storage_class: str = "STANDARD") -> None:
        self.client.put_object(Bucket="models", Key=key, Body=body, StorageClass=storage_class)

    def delete(self, prefix: str) -> None:
        for item in self.client.list_objects_v2(Bucket="models", Prefix=prefix)["Contents"]:
            self.client.delete_object(Bucket="models", Key=item["Key"])


class GCS(Store):
    def __init__(self, port: int) -> None:
        self.url = "gs://models/m"
        self.env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}"}
        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": f"http://127.0.0.1:{port}"})
        self.bucket = client.bucket("models")

    def put(self, key: str, body: bytes) -> None:
        self.bucket.blob(key).upload_from_string(body)

    def delete(self, prefix: str) -> None:
        for blob in list(self.bucket.list_blobs(prefix=prefix)):
            blob.delete()


@contextmanager
def _s3_server(port: int) -> Iterator[S3]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        # moto keeps its buckets in the process, across servers: each test starts from none.
        reset = f"http://127.0.0.1:{port}/moto-api/reset"
        urllib.request.urlopen(urllib.request.Request(reset, method="POST"), timeout=10).close()
        yield S3(port)
    finally:
        server.stop()


@contextmanager
def _gcs_server(port: int) -> Iterator[GCS]:
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="models")
    server.start()
    try:
        yield GCS(port)
    finally:
        server.stop()


@pytest.fixture(params=["s3", "gs"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    serve = _s3_server if request.param == "s3" else _gcs_server
    with serve(free_port()) as running:
        for name, value in running.env.items():
            monkeypatch.setenv(name, value)
        yield running


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3]:
    with _s3_server(free_port()) as running:
        for name, value in running.env.items():
            monkeypatch.setenv(name, value)
        yield running


def _answer(core: ServerCore) -> float:
    with core.handle(ServableRequest("m")) as handle:
        outputs = handle.servable.run("serving_default", {"x": [[1.0]]})
    return float(outputs["y"][0][0])


@contextmanager
def _serving(tmp_path: Path, url: str) -> Iterator[ServerCore]:
    """A core serving model ``m`` from ``url`` (polls stepped by hand), after one step: a
    version already whole in the store has been seen twice unchanged, so it is downloaded."""
    options = CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0,
                          max_num_load_retries=0, model_cache_dir=str(tmp_path / "cache"))
    with ServerCore(options) as core:
        core.reload_config([ModelConfig("m", Path(), remote=url)])
        _step(core)
        yield core


def _step(core: ServerCore) -> None:
    """One poll of the store, then one scan of the local mirror."""
    core.mirrors.sync()
    core.source.scan()


def test_versions_are_downloaded_whole_and_follow_the_policy(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.upload("m/1", HALF_PLUS_TWO_V)
    # Listed at the reload and again at the first step, unchanged: downloaded.
    with _serving(tmp_path, store.url) as core:
        assert core.wait_until_ready(WAIT_S)
        assert _answer(core) == 2.5
        # Version 2 arrives object by object; saved_model.pb, which makes it whole, comes last.
        store.upload("m/2", HALF_PLUS_THREE_V, skip="saved_model.pb")
        for _ in range(3):
            _step(core)
        assert _answer(core) == 2.5
        assert not list((tmp_path / "cache").glob("*/2"))  # never downloaded half
        store.upload("m/2", HALF_PLUS_THREE_V)
        _step(core)  # complete, not yet seen unchanged
        _step(core)
        assert core.monitor.wait_until_available("m", 2, WAIT_S)
        assert _answer(core) == 3.5
        # The policy wants only version 2 now: version 1's copy is gone.
        local = [p.name for p in (tmp_path / "cache").iterdir()]
        (model_dir,) = local
        assert sorted(p.name for p in (tmp_path / "cache" / model_dir).iterdir()) == ["2"]
        # Version 2 removed from the store: version 1 is downloaded and served again.
        store.delete("m/2/")
        _step(core)
        _step(core)
        assert core.wait_until_ready(WAIT_S)
        assert core.monitor.wait_until_available("m", 1, WAIT_S)
    assert SECRET not in caplog.text
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_saved_model_uploaded_before_its_variables_waits_for_them(
    store: Store, tmp_path: Path
) -> None:
    store.upload("m/1", HALF_PLUS_TWO_V)
    with _serving(tmp_path, store.url) as core:
        assert core.wait_until_ready(WAIT_S)
        # saved_model.pb first: its graph restores variables, so version 2 is not whole yet,
        # however long the upload pauses (loading it would serve uninitialized variables).
        store.upload("m/2", HALF_PLUS_THREE_V, skip="variables")
        for _ in range(3):
            _step(core)
        assert not list((tmp_path / "cache").glob("*/2"))
        assert _answer(core) == 2.5
        store.upload("m/2", HALF_PLUS_THREE_V)
        _step(core)
        _step(core)
        assert core.monitor.wait_until_available("m", 2, WAIT_S)
        assert _answer(core) == 3.5


def test_an_unreachable_store_keeps_what_serves(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture
) -> None:
    store.upload("m/1", HALF_PLUS_TWO_V)
    with _serving(tmp_path, store.url) as core:
        assert core.wait_until_ready(WAIT_S)
        nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
        for name, value in store.env.items():
            if name in ("S3_ENDPOINT", "STORAGE_EMULATOR_HOST"):
                monkeypatch.setenv(name, value.replace(value.rsplit("/", 1)[-1], nowhere))
        _step(core)
        assert f"Could not list {store.url} for servable m" in caplog.text
        assert _answer(core) == 2.5
    assert SECRET not in caplog.text


def test_an_emptied_base_path_keeps_what_serves(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.upload("m/1", HALF_PLUS_TWO_V)
    with _serving(tmp_path, store.url) as core:
        assert core.wait_until_ready(WAIT_S)
        store.delete("m/")
        _step(core)
        _step(core)
        # An empty prefix does not exist on an object store: as a missing base path, it keeps
        # what serves, and says so once.
        assert caplog.text.count(f"Could not find base path {store.url}") == 1
        assert _answer(core) == 2.5


def test_a_failed_download_is_the_versions_status_and_the_serving_one_stays(
    s3: S3, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s3.upload("m/1", HALF_PLUS_TWO_V)
    with _serving(tmp_path, s3.url) as core:
        assert core.wait_until_ready(WAIT_S)
        # Version 2's data shard is archived (storage class GLACIER): it is listed, but cannot
        # be read until restored, so the download of version 2 fails.
        s3.upload("m/2", HALF_PLUS_THREE_V)
        shard = "m/2/variables/variables.data-00000-of-00001"
        body = (HALF_PLUS_THREE_V / "variables" / "variables.data-00000-of-00001").read_bytes()
        s3.put(shard, body, storage_class="GLACIER")
        _step(core)
        _step(core)
        (state,) = [s for s in core.manager.version_states("m") if s.id.version == 2]
        assert state.error is not None
        assert state.error_message.startswith(
            "Could not download version 2 of servable m from s3://models/m/2: "
        ), state.error_message
        assert _answer(core) == 2.5  # version 1 still serves
        assert not list((tmp_path / "cache").glob("*/.staging-*"))
        _step(core)  # retried at every poll, logged and reported once
        said = [r for r in caplog.records if "Could not download version 2" in r.getMessage()]
        assert [r.name for r in said] == ["graphserve", "graphserve.lifecycle"]
        # Restored (stored again in the standard class): downloaded and served.
        s3.put(shard, body)
        _step(core)
        _step(core)
        assert core.monitor.wait_until_available("m", 2, WAIT_S)
        assert _answer(core) == 3.5
    assert SECRET not in caplog.text


def _state(server: ServerProcess, version: int) -> str | None:
    response = server.client.get(f"/v1/models/m/versions/{version}")
    if response.status_code != 200:
        return None
    return str(response.json()["model_version_status"][0]["state"])


def test_the_daemon_serves_and_swaps_versions_from_s3(s3: S3) -> None:
    # The binary, its flags and its poll thread: --model_base_path on s3://, TensorFlow
    # Serving's environment variables (set by the fixture) pointing it at the server.
    s3.upload("m/1", HALF_PLUS_TWO_V)
    server = ServerProcess(
        ["--model_name=m", f"--model_base_path={s3.url}", "--file_system_poll_wait_seconds=1",
         "--wait_for_initial_models=true"],
        ["m"],
    )
    try:
        predict = {"instances": [1.0]}
        assert server.client.post("/v1/models/m:predict", json=predict).json() == {
            "predictions": [2.5]
        }
        s3.upload("m/2", HALF_PLUS_THREE_V)
        deadline = time.monotonic() + WAIT_S
        # Known (200) is not enough: the status answers while the version still loads.
        while _state(server, 2) != "AVAILABLE":
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        assert server.client.post("/v1/models/m:predict", json=predict).json() == {
            "predictions": [3.5]
        }
    finally:
        status = server.stop()
    assert status == 0, server.output()
    assert "Downloaded version 2 of servable m from s3://models/m/2" in server.output()
    assert SECRET not in server.output()
