"""Kernels read files only under the version's own data directories: the pure containment rule,
the roots a version gets, and the kernels that open paths (a table's text file, RestoreV2), alone
and in a loaded model whose request names the file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.dtypes import DataType
from runtime.errors import NotFoundError, PermissionDeniedError
from runtime.kernels.registry import instantiate
from runtime.readable_files import UNRESTRICTED, FileUse, ReadableFiles, within
from runtime.resources import ResourceHandle, ResourceManager
from runtime.saved_model import LoadedModel, load_saved_model
from tests.runtime.model_fixtures import FIXTURE_MODELS

FILE_TABLE = FIXTURE_MODELS / "file_table_model" / "1"
MLP = FIXTURE_MODELS / "mlp" / "1"
ASSET_DENIED = (
    "InitializeTableFromTextFileV2 may not read '{path}': a served model reads data files only "
    "from its version directory's assets/ or assets.extra/"
)


def _text(value: str) -> np.ndarray:
    return np.array(value.encode(), dtype=object)


# -- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "roots", "inside"),
    [
        ("/m/1/assets", ["/m/1/assets"], True),
        ("/m/1/assets/vocab.txt", ["/m/1/assets"], True),
        ("/m/1/assets/a/b.txt", ["/m/1/assets.extra", "/m/1/assets"], True),
        ("/m/1/assetsX/vocab.txt", ["/m/1/assets"], False),  # a prefix is no parent
        ("/m/1/saved_model.pb", ["/m/1/assets"], False),
        ("/etc/passwd", ["/m/1/assets"], False),
        ("/etc/passwd", [], False),
        ("/etc/passwd", ["/"], True),
    ],
)
def test_within(path: str, roots: list[str], inside: bool) -> None:
    assert within(path, roots) is inside


_PARTS = st.lists(st.sampled_from(["a", "b", "assets", "x.txt"]), min_size=1, max_size=4)


@given(_PARTS, _PARTS)
def test_within_means_below_a_root(root_parts: list[str], rest: list[str]) -> None:
    root = "/" + "/".join(root_parts)
    below = root + "/" + "/".join(rest)
    assert within(below, [root])
    assert within(root, [root])
    # Sharing a prefix is not enough: a sibling whose name extends the root's is outside.
    assert not within(root + "x/" + "/".join(rest), [root])
    assert not within(os.path.dirname(root), [root])


# -- a version's roots -------------------------------------------------------------------------


@pytest.fixture
def version(tmp_path: Path) -> Path:
    export_dir = tmp_path / "models" / "m" / "1"
    for name in ("assets", "assets.extra", "variables"):
        (export_dir / name).mkdir(parents=True)
    (export_dir / "assets" / "vocab.txt").write_text("a\nb\n")
    (export_dir / "assets.extra" / "warmup").write_text("w")
    (export_dir / "variables" / "variables.index").write_text("i")
    (export_dir / "saved_model.pb").write_text("pb")
    (tmp_path / "secret.txt").write_text("secret\n")
    return export_dir


def test_a_version_reads_its_data_directories_only(version: Path) -> None:
    readable = ReadableFiles.of_version(version)
    assert readable.allows(str(version / "assets" / "vocab.txt"), FileUse.ASSET)
    assert readable.allows(str(version / "assets.extra" / "warmup"), FileUse.ASSET)
    assert readable.allows(str(version / "assets" / "missing.txt"), FileUse.ASSET)
    assert not readable.allows(str(version / "variables" / "variables.index"), FileUse.ASSET)
    assert readable.allows(str(version / "variables" / "variables.index"), FileUse.CHECKPOINT)
    for use in FileUse:
        assert not readable.allows(str(version / "saved_model.pb"), use)
        assert not readable.allows("/etc/passwd", use)
        assert not readable.allows(str(version / "assets" / ".." / "saved_model.pb"), use)
        assert not readable.allows(str(version / "assets" / ".." / ".." / "2" / "assets"), use)


def test_a_symlink_leading_out_of_the_version_is_refused(version: Path) -> None:
    link = version / "assets" / "vocab_link.txt"
    link.symlink_to(version.parents[2] / "secret.txt")
    (version / "assets" / "up").symlink_to(version.parent, target_is_directory=True)
    readable = ReadableFiles.of_version(version)
    assert not readable.allows(str(link), FileUse.ASSET)
    assert not readable.allows(str(version / "assets" / "up" / "1" / "saved_model.pb"),
                               FileUse.ASSET)
    # A link that stays inside the data directories is fine.
    (version / "assets" / "same.txt").symlink_to(version / "assets" / "vocab.txt")
    assert readable.allows(str(version / "assets" / "same.txt"), FileUse.ASSET)


def test_a_symlinked_version_or_variables_directory_is_followed(
    version: Path, tmp_path: Path
) -> None:
    # Deployments link a version into place, or share one checkpoint between directories.
    linked = tmp_path / "linked"
    linked.symlink_to(version, target_is_directory=True)
    readable = ReadableFiles.of_version(linked)
    assert readable.allows(str(linked / "assets" / "vocab.txt"), FileUse.ASSET)
    assert readable.allows(str(version / "assets" / "vocab.txt"), FileUse.ASSET)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "variables").symlink_to(version / "variables", target_is_directory=True)
    readable = ReadableFiles.of_version(shipped)
    assert readable.allows(str(shipped / "variables" / "variables.index"), FileUse.CHECKPOINT)


def test_without_a_version_nothing_is_restricted() -> None:
    assert UNRESTRICTED.allows("/etc/passwd", FileUse.ASSET)
    assert ResourceManager().readable is UNRESTRICTED
    UNRESTRICTED.check("/etc/passwd", FileUse.CHECKPOINT, "RestoreV2")


# -- kernels -----------------------------------------------------------------------------------


def _table(resources: ResourceManager) -> ResourceHandle:
    handle: ResourceHandle = instantiate(
        "HashTableV2",
        {"key_dtype": DataType.DT_STRING, "value_dtype": DataType.DT_INT64},
        resources=resources,
    )()
    return handle


def _init_from(resources: ResourceManager, handle: ResourceHandle, path: str) -> None:
    init = instantiate(
        "InitializeTableFromTextFileV2", {"key_index": -2, "value_index": -1},
        resources=resources,
    )
    init(handle, _text(path))


def test_a_table_file_outside_the_assets_is_never_opened(version: Path, tmp_path: Path) -> None:
    resources = ResourceManager(ReadableFiles.of_version(version))
    handle = _table(resources)
    for path in ("/etc/passwd", str(tmp_path / "secret.txt"), str(tmp_path / "no_such_file")):
        # PERMISSION_DENIED even for a file that does not exist: whether it does is not told.
        with pytest.raises(PermissionDeniedError) as info:
            _init_from(resources, handle, path)
        assert info.value.message == ASSET_DENIED.format(path=path)
    assert not handle.resource.initialized
    _init_from(resources, handle, str(version / "assets" / "vocab.txt"))
    assert handle.resource.size() == 2
    # An initialized table keeps refusing: the check comes before "already initialized".
    with pytest.raises(PermissionDeniedError):
        _init_from(resources, handle, "/etc/passwd")


def test_a_table_built_in_code_reads_anywhere(tmp_path: Path) -> None:
    (tmp_path / "words.txt").write_text("x\n")
    resources = ResourceManager()
    handle = _table(resources)
    _init_from(resources, handle, str(tmp_path / "words.txt"))
    assert handle.resource.size() == 1


def _restore(resources: ResourceManager, prefix: str) -> None:
    restore = instantiate(
        "RestoreV2", {"dtypes": [DataType.DT_FLOAT]}, resources=resources, num_outputs=1
    )
    restore(_text(prefix), np.array([b"x"], dtype=object), np.array([b""], dtype=object))


def test_restore_reads_only_the_versions_checkpoint(tmp_path: Path) -> None:
    version = tmp_path / "1"
    shutil.copytree(MLP, version)
    resources = ResourceManager(ReadableFiles.of_version(version))
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(MLP / "variables", elsewhere)
    with pytest.raises(PermissionDeniedError, match="^RestoreV2 may not read '.*/elsewhere/"):
        _restore(resources, str(elsewhere / "variables"))
    # Inside variables/, the reader runs (and finds no tensor named "x").
    with pytest.raises(NotFoundError):
        _restore(resources, str(version / "variables" / "variables"))
    # A data shard that leads out is refused too, before it is read.
    shard = next((version / "variables").glob("variables.data-*"))
    shard.unlink()
    shard.symlink_to(next(elsewhere.glob("variables.data-*")))
    with pytest.raises(PermissionDeniedError, match=r"variables\.data-00000-of-00001'"):
        _restore(resources, str(version / "variables" / "variables"))


# -- a model whose request names the file ------------------------------------------------------


def _lookup(model: LoadedModel, filename: str) -> dict[str, np.ndarray]:
    keys = np.array([b"blue", b"root"], dtype=object)
    return model.run("serving_default", {"filename": _text(filename), "keys": keys})


def test_a_request_reads_the_models_assets_and_nothing_else(tmp_path: Path) -> None:
    model = load_saved_model(FILE_TABLE)
    for path in ("/etc/passwd", str(FILE_TABLE / "assets" / ".." / "saved_model.pb")):
        with pytest.raises(PermissionDeniedError) as info:
            _lookup(model, path)
        assert info.value.message.startswith(ASSET_DENIED.format(path=path))
    out = _lookup(model, str(FILE_TABLE / "assets" / "colors.txt"))
    assert out["ids"].tolist() == [2, -1]
    assert sorted(zip(out["lines"].tolist(), out["line_numbers"].tolist())) == [
        (b"blue", 2), (b"green", 1), (b"red", 0)
    ]
    with pytest.raises(PermissionDeniedError):
        _lookup(model, "/etc/passwd")


def test_a_symlink_in_the_assets_leading_out_is_refused(tmp_path: Path) -> None:
    version = tmp_path / "1"
    shutil.copytree(FILE_TABLE, version)
    (tmp_path / "secret.txt").write_text("secret\n")
    (version / "assets" / "secret.txt").symlink_to(tmp_path / "secret.txt")
    model = load_saved_model(version)
    path = str(version / "assets" / "secret.txt")
    with pytest.raises(PermissionDeniedError) as info:
        _lookup(model, path)
    assert info.value.message.startswith(ASSET_DENIED.format(path=path))
    assert "secret" not in info.value.message.replace(path, "")
