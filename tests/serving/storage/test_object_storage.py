"""Model base paths on object storage, against a real protocol server on loopback: moto's S3
server. Versions are found by polling (stepped here by hand), downloaded
whole once settled, and their local copies follow the policy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from serving.config import ModelConfig, ServerOptions, model_configs
from serving.core.server_core import CoreOptions, ServerCore
from serving.object_storage import redact, scheme_of, storage_options
from serving.servable import ServableRequest
from tests.serving.e2e.support import HALF_PLUS_THREE_V, HALF_PLUS_TWO_V
from tests.serving.rest.server_process import free_port

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


def _upload(client: object, bucket: str, prefix: str, source: Path, skip: str = "") -> None:
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source).as_posix()
        if skip and rel.startswith(skip):
            continue
        client.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=path.read_bytes())  # type: ignore[attr-defined]


def _answer(core: ServerCore) -> float:
    with core.handle(ServableRequest("m")) as handle:
        outputs = handle.servable.run("serving_default", {"x": [[1.0]]})
    return float(outputs["y"][0][0])


@contextmanager
def _serving(tmp_path: Path, url: str = "s3://models/m") -> Iterator[ServerCore]:
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


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("S3_ENDPOINT", f"127.0.0.1:{port}")
    monkeypatch.setenv("S3_USE_HTTPS", "0")
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
    client.create_bucket(Bucket="models")
    yield client
    server.stop()


def test_versions_on_s3_are_downloaded_whole_and_follow_the_policy(
    s3: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _upload(s3, "models", "m/1", HALF_PLUS_TWO_V)
    # Listed at the reload and again at the first step, unchanged: downloaded.
    with _serving(tmp_path) as core:
        assert core.wait_until_ready(WAIT_S)
        assert _answer(core) == 2.5
        # Version 2 arrives object by object; saved_model.pb, which makes it whole, comes last.
        _upload(s3, "models", "m/2", HALF_PLUS_THREE_V, skip="saved_model.pb")
        for _ in range(3):
            _step(core)
        assert _answer(core) == 2.5
        assert not list((tmp_path / "cache").glob("*/2"))  # never downloaded half
        _upload(s3, "models", "m/2", HALF_PLUS_THREE_V)
        _step(core)  # complete, not yet seen unchanged
        _step(core)
        assert core.monitor.wait_until_available("m", 2, WAIT_S)
        assert _answer(core) == 3.5
        # The policy wants only version 2 now: version 1's copy is gone.
        local = [p.name for p in (tmp_path / "cache").iterdir()]
        (model_dir,) = local
        assert sorted(p.name for p in (tmp_path / "cache" / model_dir).iterdir()) == ["2"]
        # Version 2 removed from the store: version 1 is downloaded and served again.
        for key in [o["Key"] for o in s3.list_objects_v2(Bucket="models", Prefix="m/2/")["Contents"]]:  # type: ignore[attr-defined]
            s3.delete_object(Bucket="models", Key=key)  # type: ignore[attr-defined]
        _step(core)
        _step(core)
        assert core.wait_until_ready(WAIT_S)
        assert core.monitor.wait_until_available("m", 1, WAIT_S)
    assert SECRET not in caplog.text
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_an_unreachable_store_keeps_what_serves(
    s3: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _upload(s3, "models", "m/1", HALF_PLUS_TWO_V)
    with _serving(tmp_path) as core:
        assert core.wait_until_ready(WAIT_S)
        monkeypatch.setenv("S3_ENDPOINT", f"127.0.0.1:{free_port()}")  # nothing listens there
        _step(core)
        assert "Could not list s3://models/m for servable m" in caplog.text
        assert _answer(core) == 2.5
    assert SECRET not in caplog.text


def test_an_emptied_base_path_keeps_what_serves(
    s3: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _upload(s3, "models", "m/1", HALF_PLUS_TWO_V)
    with _serving(tmp_path) as core:
        assert core.wait_until_ready(WAIT_S)
        listed = s3.list_objects_v2(Bucket="models", Prefix="m/")["Contents"]  # type: ignore[attr-defined]
        for key in [o["Key"] for o in listed]:
            s3.delete_object(Bucket="models", Key=key)  # type: ignore[attr-defined]
        _step(core)
        _step(core)
        # An empty prefix does not exist on an object store: as a missing base path, it keeps
        # what serves, and says so once.
        assert caplog.text.count("Could not find base path s3://models/m") == 1
        assert _answer(core) == 2.5
