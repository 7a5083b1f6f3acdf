"""Version-directory completeness: required files present, and nothing changed for a while."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from runtime.errors import FailedPreconditionError, NotFoundError, PermissionDeniedError
from serving.core.settle import (
    Fault,
    SettleTracker,
    missing_parts,
    path_fault,
    snapshot,
)

PB = "saved_model.pb"
INDEX = "variables/variables.index"


def shard(i: int, n: int) -> str:
    return f"variables/variables.data-{i:05d}-of-{n:05d}"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write_version(path: Path, shards: int = 1, *, skip: tuple[str, ...] = ()) -> Path:
    names = [PB, INDEX] + [shard(i, shards) for i in range(shards)]
    for name in names:
        if name in skip:
            continue
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(b"x" * 16)
    return path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({PB}, None),  # a model without variables (its graph restores none)
        ({"saved_model.pbtxt"}, None),
        ({PB, INDEX, shard(0, 1)}, None),
        ({PB, INDEX, shard(0, 2), shard(1, 2), "assets/vocab.txt", "fingerprint.pb"}, None),
        (set(), "no saved_model.pb"),
        # A TFLite model is one file: whole at once (its load says it cannot be served).
        ({"model.tflite"}, None),
        ({"model.tflite", "assets/labels.txt"}, None),
        ({"variables/model.tflite"}, "no saved_model.pb"),
        ({PB, "model.tflite", INDEX}, "no variables data shard"),
        ({INDEX, shard(0, 1)}, "no saved_model.pb"),
        ({PB, shard(0, 1)}, "no variables/variables.index"),
        ({PB, INDEX}, "no variables data shard"),
        ({PB, INDEX, shard(0, 3), shard(2, 3)}, "no variables/variables.data-00001-of-00003"),
        ({PB, INDEX, shard(0, 1), shard(0, 2), shard(1, 2)}, "disagree on the shard count"),
        ({PB, "variables/variables.data-00000-of-00001.tmp", INDEX}, "no variables data shard"),
    ],
)
def test_missing_parts(files: set[str], expected: str | None) -> None:
    found = missing_parts(files, lambda: False)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found


def test_snapshot_lists_files_with_size_and_mtime(tmp_path: Path) -> None:
    version = write_version(tmp_path / "1")
    (version / "assets").mkdir()
    os.utime(version / PB, ns=(5, 1_000_000_007))
    snap = snapshot(version)
    assert snap is not None
    assert (PB, 16, 1_000_000_007) in snap
    assert {rel for rel, _, _ in snap} == {PB, "variables", INDEX, shard(0, 1), "assets"}
    assert ("assets", -1, 0) in snap


def test_snapshot_follows_a_symlinked_directory_and_survives_a_cycle(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    write_version(target)
    version = tmp_path / "1"
    version.mkdir()
    (version / PB).write_bytes(b"pb")
    (version / "variables").symlink_to(target / "variables")
    (version / "loop").symlink_to(version)
    snap = snapshot(version)
    assert snap is not None
    assert {INDEX, shard(0, 1)} <= {rel for rel, _, _ in snap}


def test_complete_at_once_with_zero_settle(tmp_path: Path) -> None:
    tracker = SettleTracker(0.0, FakeClock())
    assert tracker.check(write_version(tmp_path / "1")).complete


def test_complete_only_after_quiet_for_the_settle_time(tmp_path: Path) -> None:
    clock = FakeClock()
    tracker = SettleTracker(1.0, clock)
    version = write_version(tmp_path / "1")
    first = tracker.check(version)
    assert not first.complete and first.ready_at == 1.0
    clock.now = 0.5
    assert not tracker.check(version).complete
    clock.now = 1.0
    assert tracker.check(version).complete


@pytest.mark.parametrize("change", ["size", "mtime"])
def test_a_change_restarts_the_settle_time(tmp_path: Path, change: str) -> None:
    clock = FakeClock()
    tracker = SettleTracker(1.0, clock)
    version = write_version(tmp_path / "1")
    assert not tracker.check(version).complete
    clock.now = 0.6
    target = version / shard(0, 1)
    if change == "size":
        with target.open("ab") as f:
            f.write(b"more")
    else:
        os.utime(target, ns=(1, 123_456_789))
    readiness = tracker.check(version)
    assert not readiness.complete and readiness.ready_at == 1.6
    clock.now = 1.2
    assert not tracker.check(version).complete
    clock.now = 1.6
    assert tracker.check(version).complete


def test_missing_shard_is_never_complete_until_it_arrives(tmp_path: Path) -> None:
    clock = FakeClock()
    tracker = SettleTracker(1.0, clock)
    version = write_version(tmp_path / "1", shards=2, skip=(shard(1, 2),))
    readiness = tracker.check(version)
    # Looked at again when it is due to be reported.
    assert not readiness.complete and readiness.ready_at == 3.0
    assert readiness.reason == "no variables/variables.data-00001-of-00002"
    assert readiness.unservable is None
    clock.now = 100.0
    readiness = tracker.check(version)
    assert not readiness.complete and readiness.ready_at is None
    assert readiness.unservable is not None
    assert readiness.unservable.kind is NotFoundError
    (version / shard(1, 2)).write_bytes(b"x")
    readiness = tracker.check(version)
    assert not readiness.complete and readiness.ready_at == 101.0
    clock.now = 101.0
    assert tracker.check(version).complete


HALF_PLUS_TWO = Path(__file__).parents[3] / "saved_models" / "half_plus_two" / "00000123"


def test_a_saved_model_that_restores_variables_waits_for_them(tmp_path: Path) -> None:
    # saved_model.pb copied first: its graph has a restore op, so variables are still to come
    # (loading now would skip the restore and serve uninitialized variables).
    clock = FakeClock()
    tracker = SettleTracker(0.0, clock)
    version = tmp_path / "1"
    version.mkdir()
    shutil.copy(HALF_PLUS_TWO / PB, version / PB)
    readiness = tracker.check(version)
    assert not readiness.complete and readiness.reason == "no variables/variables.index"
    shutil.copytree(HALF_PLUS_TWO / "variables", version / "variables")
    assert tracker.check(version).complete


def test_an_unparsable_saved_model_file_is_left_to_the_loader(tmp_path: Path) -> None:
    version = tmp_path / "1"
    version.mkdir()
    (version / PB).write_bytes(b"\xff\xff not a SavedModel")
    assert SettleTracker(0.0, FakeClock()).check(version).complete


def test_stays_complete_when_touched_after(tmp_path: Path) -> None:
    version = write_version(tmp_path / "1")
    tracker = SettleTracker(0.0, FakeClock())
    assert tracker.check(version).complete
    (version / PB).write_bytes(b"rewritten by someone")
    (version / shard(0, 1)).unlink()
    assert tracker.check(version).complete


def test_forgotten_when_it_disappears(tmp_path: Path) -> None:
    clock = FakeClock()
    tracker = SettleTracker(1.0, clock)
    version = write_version(tmp_path / "1")
    tracker.check(version)
    clock.now = 1.0
    assert tracker.check(version).complete
    tracker.retain([])
    readiness = tracker.check(version)
    assert not readiness.complete and readiness.ready_at == 2.0
    shutil.rmtree(version)
    assert tracker.check(version).reason == "gone"


def test_a_replaced_directory_settles_again(tmp_path: Path) -> None:
    clock = FakeClock()
    tracker = SettleTracker(1.0, clock)
    version = write_version(tmp_path / "1")
    tracker.check(version)
    clock.now = 1.0
    assert tracker.check(version).complete
    # The old directory is kept alive under another name, so the new one has another inode.
    replacement = write_version(tmp_path / "incoming", skip=(INDEX,))
    version.rename(tmp_path / "old")
    replacement.rename(version)
    readiness = tracker.check(version)
    assert not readiness.complete and readiness.reason == f"no {INDEX}"


def test_a_file_is_not_a_version_directory(tmp_path: Path) -> None:
    (tmp_path / "7").write_bytes(b"")
    readiness = SettleTracker(0.0, FakeClock()).check(tmp_path / "7")
    assert not readiness.complete and readiness.reason == "not a directory"


def test_a_directory_untouched_for_the_settle_time_is_complete_at_first_sight(
    tmp_path: Path,
) -> None:
    # A model renamed into place, or already on disk at start-up, carries old mtimes.
    version = write_version(tmp_path / "1")
    hour_ago = os.stat(version).st_mtime - 3600
    for path in [*version.rglob("*"), version]:
        os.utime(path, (hour_ago, hour_ago))
    assert SettleTracker(1.0, FakeClock()).check(version).complete


def test_one_fresh_file_makes_an_old_directory_wait(tmp_path: Path) -> None:
    version = write_version(tmp_path / "1")
    hour_ago = os.stat(version).st_mtime - 3600
    for path in [*version.rglob("*"), version]:
        os.utime(path, (hour_ago, hour_ago))
    os.utime(version / INDEX)  # just written
    assert not SettleTracker(1.0, FakeClock()).check(version).complete


def _unservable_at(tracker: SettleTracker, clock: FakeClock, path: Path, at: float) -> Fault:
    """Checks ``path`` at 0 (waiting, to be looked at again at ``at``) and at ``at``."""
    clock.now = 0.0
    first = tracker.check(path)
    assert not first.complete and first.unservable is None and first.ready_at == at
    clock.now = at
    readiness = tracker.check(path)
    assert not readiness.complete and readiness.unservable is not None
    assert readiness.reason == readiness.unservable.reason
    return readiness.unservable


def test_a_dangling_version_symlink_is_reported_once_it_lasts(tmp_path: Path) -> None:
    clock = FakeClock()
    (tmp_path / "3").symlink_to(tmp_path / "nowhere")
    fault = _unservable_at(SettleTracker(0.5, clock, report_after_s=2.0), clock, tmp_path / "3", 2.0)
    assert fault.kind is NotFoundError
    assert fault.reason == f"3 is a dangling symbolic link (to {tmp_path / 'nowhere'})"
    message = fault.error("Version 3 of m").message
    assert message.startswith("Version 3 of m: 3 is a dangling")


def test_a_symlink_loop_is_reported(tmp_path: Path) -> None:
    clock = FakeClock()
    (tmp_path / "3").symlink_to(tmp_path / "3")
    fault = _unservable_at(SettleTracker(0.0, clock, report_after_s=1.0), clock, tmp_path / "3", 1.0)
    assert fault.kind is FailedPreconditionError
    assert fault.reason == "symbolic link loop at 3"


def test_a_dangling_symlink_inside_the_version_is_reported(tmp_path: Path) -> None:
    clock = FakeClock()
    version = write_version(tmp_path / "1")
    (version / "variables" / "variables.index").unlink()
    (version / "variables" / "variables.index").symlink_to(tmp_path / "gone.index")
    fault = _unservable_at(SettleTracker(0.0, clock, report_after_s=1.0), clock, version, 1.0)
    assert fault.kind is NotFoundError
    assert fault.reason.startswith("variables/variables.index is a dangling symbolic link")
    # Fixed: the link points at a file now, and the directory settles as usual.
    (tmp_path / "gone.index").write_bytes(b"x")
    tracker = SettleTracker(0.0, clock, report_after_s=1.0)
    assert tracker.check(version).complete


def test_a_directory_that_cannot_be_listed_is_reported(tmp_path: Path) -> None:
    denied = PermissionError(errno.EACCES, "Permission denied")
    expected = Fault(PermissionDeniedError, "cannot read assets: Permission denied")
    assert path_fault(tmp_path / "assets", denied, "assets") == expected
    version = write_version(tmp_path / "1")
    (version / "assets").mkdir()
    os.chmod(version / "assets", 0)
    try:
        result = snapshot(version)
        if os.geteuid() == 0:  # root reads it regardless
            assert isinstance(result, frozenset)
            return
        assert result == expected
    finally:
        os.chmod(version / "assets", 0o755)


def test_a_change_restarts_the_wait_before_reporting(tmp_path: Path) -> None:
    clock = FakeClock()
    tracker = SettleTracker(0.0, clock, report_after_s=2.0)
    version = write_version(tmp_path / "1", skip=(INDEX,))
    assert tracker.check(version).ready_at == 2.0
    clock.now = 1.5
    (version / "variables" / "extra").write_bytes(b"more")  # still being copied
    assert tracker.check(version).ready_at == 3.5
    clock.now = 3.0
    assert tracker.check(version).unservable is None
    clock.now = 3.5
    assert tracker.check(version).unservable == Fault(NotFoundError, f"no {INDEX}")


def test_a_complete_directory_carries_its_identity(tmp_path: Path) -> None:
    version = write_version(tmp_path / "1")
    readiness = SettleTracker(0.0, FakeClock()).check(version)
    info = version.stat()
    assert readiness.complete
    assert readiness.identity == (info.st_dev, info.st_ino, info.st_ctime_ns)
