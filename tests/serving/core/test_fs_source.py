"""The file-system source, stepped by hand with scan() and a fake clock; two tests use watchdog."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from serving.config import (
    AllVersions,
    LatestVersions,
    ModelConfig,
    SpecificVersions,
    VersionPolicy,
)
from serving.core.aspired import AspiredVersion
from serving.core.fs_source import FileSystemSource

PB = "saved_model.pb"
INDEX = "variables/variables.index"
# watchdog 7 warns, from its own inotify thread, when a directory tree created in one go gets
# the same sub-watch added twice (harmless); as an error it would kill that thread.

LATEST = LatestVersions()
WAIT_S = 10.0  # generous: only bounds a hang, never asserted on


def shard(i: int, n: int) -> str:
    return f"variables/variables.data-{i:05d}-of-{n:05d}"


def write_version(path: Path, shards: int = 1, *, skip: tuple[str, ...] = ()) -> Path:
    for name in [PB, INDEX] + [shard(i, shards) for i in range(shards)]:
        if name not in skip:
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(b"x" * 16)
    return path


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


Call = tuple[str, list[tuple[int, Path]]]


class Recorder:
    """The aspired-versions callback: records every call; wakes a waiter on a non-empty list."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.got_versions = threading.Event()

    def __call__(self, name: str, versions: Sequence[AspiredVersion]) -> None:
        self.calls.append((name, [(v.version, v.path) for v in versions]))
        if versions:
            self.got_versions.set()

    def of(self, name: str) -> list[list[tuple[int, Path]]]:
        return [versions for model, versions in self.calls if model == name]

    def last(self, name: str) -> list[tuple[int, Path]]:
        return self.of(name)[-1]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


MakeSource = Callable[..., FileSystemSource]


@pytest.fixture
def make_source(recorder: Recorder, clock: FakeClock) -> Iterator[MakeSource]:
    made: list[FileSystemSource] = []

    def make(settle_seconds: float = 0.0, poll_wait_seconds: float = -1) -> FileSystemSource:
        source = FileSystemSource(
            recorder,
            poll_wait_seconds=poll_wait_seconds,
            settle_seconds=settle_seconds,
            clock=clock,
        )
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()


def model(name: str, base: Path, policy: VersionPolicy = LATEST) -> ModelConfig:
    return ModelConfig(name, base, policy)


def messages(caplog: pytest.LogCaptureFixture, text: str, level: int | None = None) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if text in r.getMessage() and (level is None or r.levelno == level)
    ]


def test_numeric_names_only(tmp_path: Path, make_source: MakeSource, recorder: Recorder) -> None:
    for name in ["007", "12", "v3", "1.0", "latest", "-", "0x10"]:
        write_version(tmp_path / name)
    make_source().set_models([model("m", tmp_path, AllVersions())])
    assert recorder.calls == [("m", [(12, tmp_path / "12"), (7, tmp_path / "007")])]


def test_a_file_named_like_a_version_is_not_a_version(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder
) -> None:
    write_version(tmp_path / "3")
    (tmp_path / "9").write_bytes(b"not a model")
    source = make_source()
    source.set_models([model("m", tmp_path)])
    source.set_models([model("m", tmp_path, AllVersions())])
    assert recorder.of("m") == [[(3, tmp_path / "3")]]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (LatestVersions(), [3]),
        (LatestVersions(2), [3, 2]),
        (LatestVersions(0), [3]),  # 0 means 1, as TensorFlow Serving
        (AllVersions(), [3, 2, 1]),
        (SpecificVersions((1, 3)), [3, 1]),
        (SpecificVersions(()), []),
    ],
)
def test_policies(
    tmp_path: Path,
    make_source: MakeSource,
    recorder: Recorder,
    policy: VersionPolicy,
    expected: list[int],
) -> None:
    for v in (1, 2, 3):
        write_version(tmp_path / str(v))
    make_source().set_models([model("m", tmp_path, policy)])
    assert recorder.of("m") == [[(v, tmp_path / str(v)) for v in expected]]


def test_specific_version_missing_is_warned_once(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    write_version(tmp_path / "1")
    source = make_source()
    source.set_models([model("m", tmp_path, SpecificVersions((1, 5)))])
    source.scan()
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "1")]]
    assert (
        messages(
            caplog,
            "Version 5 of servable m, which was requested to be served as a "
            "'specific' version in the servable's version policy, was not found in the "
            "file system",
            logging.WARNING,
        )
        != []
    )
    assert len(messages(caplog, "Version 5 of servable m")) == 1


def test_half_copied_version_waits_and_the_old_one_stays(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder, clock: FakeClock
) -> None:
    source = make_source(settle_seconds=1.0)
    write_version(tmp_path / "1")
    source.set_models([model("m", tmp_path)])
    assert recorder.calls == []  # seen, but not quiet yet: nothing, not even []
    clock.now = 1.0
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "1")]]

    # Version 2 arrives without its second shard: version 1 stays the one aspired.
    write_version(tmp_path / "2", shards=2, skip=(shard(1, 2),))
    clock.now = 2.0
    source.scan()
    clock.now = 50.0
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "1")]]

    # The shard arrives, then saved_model.pb is still growing: still waiting.
    (tmp_path / "2" / shard(1, 2)).write_bytes(b"x")
    source.scan()
    clock.now = 50.8
    with (tmp_path / "2" / PB).open("ab") as f:
        f.write(b"more")
    source.scan()
    clock.now = 51.5
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "1")]]

    clock.now = 51.8  # one settle time after the last change
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "1")], [(2, tmp_path / "2")]]


def test_incomplete_version_is_logged_once(
    tmp_path: Path, make_source: MakeSource, caplog: pytest.LogCaptureFixture
) -> None:
    write_version(tmp_path / "1", skip=(INDEX,))
    source = make_source(settle_seconds=1.0)
    caplog.set_level(logging.INFO, logger="graphserve")
    source.set_models([model("m", tmp_path)])
    source.scan()
    source.scan()
    assert len(messages(caplog, f"not complete yet (no {INDEX})")) == 1


def test_missing_base_path_is_retried_and_others_still_served(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "a"
    write_version(tmp_path / "b" / "1")
    source = make_source()
    source.set_models([model("a", missing), model("b", tmp_path / "b")])
    source.scan()
    source.scan()
    assert recorder.calls == [("b", [(1, tmp_path / "b" / "1")])]
    errors = messages(caplog, f"Could not find base path {missing} for servable a", logging.ERROR)
    assert len(errors) == 1

    write_version(missing / "4")
    source.scan()
    assert recorder.of("a") == [[(4, missing / "4")]]

    # Gone again after versions were emitted: nothing is emitted, so they keep serving.
    shutil.rmtree(missing)
    source.scan()
    assert recorder.of("a") == [[(4, missing / "4")]]


def test_zero_versions_unloads_and_warns_once(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    write_version(tmp_path / "1")
    (tmp_path / "not_a_version").mkdir()
    source = make_source()
    source.set_models([model("m", tmp_path)])
    shutil.rmtree(tmp_path / "1")
    source.scan()
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "1")], []]
    warning = (
        f"No versions of servable m found under base path {tmp_path}. Did you forget to name "
        "your leaf directory as a number (eg. '/1/')?"
    )
    assert messages(caplog, warning, logging.WARNING) == [warning]


def test_empty_base_path_emits_an_empty_list(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder
) -> None:
    make_source().set_models([model("m", tmp_path)])
    assert recorder.calls == [("m", [])]


def test_removed_model_gets_an_empty_list(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder
) -> None:
    write_version(tmp_path / "a" / "1")
    write_version(tmp_path / "b" / "2")
    source = make_source()
    source.set_models([model("a", tmp_path / "a"), model("b", tmp_path / "b")])
    source.set_models([model("b", tmp_path / "b")])
    assert recorder.calls == [
        ("a", [(1, tmp_path / "a" / "1")]),
        ("b", [(2, tmp_path / "b" / "2")]),
        ("a", []),
    ]
    source.scan()
    assert len(recorder.of("a")) == 2


def test_policy_change_rescans_at_once(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder
) -> None:
    for v in (1, 2, 3):
        write_version(tmp_path / str(v))
    source = make_source()
    source.set_models([model("m", tmp_path)])
    source.set_models([model("m", tmp_path, AllVersions())])
    source.set_models([model("m", tmp_path, SpecificVersions((2,)))])
    assert recorder.of("m") == [
        [(3, tmp_path / "3")],
        [(3, tmp_path / "3"), (2, tmp_path / "2"), (1, tmp_path / "1")],
        [(2, tmp_path / "2")],
    ]


def test_new_base_path_keeps_the_old_versions_until_a_new_one_settles(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder, clock: FakeClock
) -> None:
    write_version(tmp_path / "old" / "1")
    write_version(tmp_path / "new" / "5")
    source = make_source(settle_seconds=1.0)
    source.set_models([model("m", tmp_path / "old")])
    clock.now = 1.0
    source.scan()
    source.set_models([model("m", tmp_path / "new")])
    assert recorder.of("m") == [[(1, tmp_path / "old" / "1")]]
    clock.now = 2.0
    source.scan()
    assert recorder.of("m") == [[(1, tmp_path / "old" / "1")], [(5, tmp_path / "new" / "5")]]


def test_unchanged_list_is_not_emitted_again(
    tmp_path: Path, make_source: MakeSource, recorder: Recorder
) -> None:
    write_version(tmp_path / "1")
    source = make_source()
    source.set_models([model("m", tmp_path)])
    source.set_models([model("m", tmp_path)])
    source.scan()
    assert len(recorder.calls) == 1


def test_callback_failure_is_retried_on_the_next_scan(
    tmp_path: Path, make_source: MakeSource
) -> None:
    write_version(tmp_path / "1")
    calls: list[str] = []

    def flaky(name: str, versions: Sequence[AspiredVersion]) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("manager busy")

    source = FileSystemSource(flaky, poll_wait_seconds=-1, settle_seconds=0)
    with pytest.raises(RuntimeError):
        source.set_models([model("m", tmp_path)])
    source.scan()
    assert calls == ["m", "m"]


def test_poll_wait_zero_scans_at_start_and_finishes_settling(tmp_path: Path) -> None:
    recorder = Recorder()
    write_version(tmp_path / "1")
    # Real clock: the version found by the start-up scan completes by a rescan of its own.
    source = FileSystemSource(recorder, poll_wait_seconds=0, settle_seconds=0.05)
    try:
        source.set_models([model("m", tmp_path)])
        assert recorder.calls == []
        source.start()
        assert source.watched_paths == []  # no watchdog without polling
        assert recorder.got_versions.wait(WAIT_S)
        assert recorder.calls == [("m", [(1, tmp_path / "1")])]
    finally:
        source.close()


def wait_for_watch(source: FileSystemSource, path: Path) -> None:
    if source.watched_paths != [str(path)]:
        pytest.skip("file-system events unavailable here (inotify limits?)")


def test_watchdog_sees_a_new_version(tmp_path: Path) -> None:
    recorder = Recorder()
    base = tmp_path / "m"
    base.mkdir()
    # Polling far apart: start() scans once, then only events can find the new version.
    source = FileSystemSource(recorder, poll_wait_seconds=600, settle_seconds=0.1)
    try:
        source.set_models([model("m", base)])
        source.start()
        wait_for_watch(source, base)
        write_version(base / "1", shards=2)
        assert recorder.got_versions.wait(WAIT_S)
        assert recorder.calls == [("m", []), ("m", [(1, base / "1")])]
    finally:
        source.close()
    source.close()  # idempotent


def test_base_path_that_appears_later_is_watched(tmp_path: Path) -> None:
    recorder = Recorder()
    base = tmp_path / "m"
    source = FileSystemSource(recorder, poll_wait_seconds=600, settle_seconds=0.1)
    try:
        source.set_models([model("m", base)])
        source.start()
        assert source.watched_paths == []
        base.mkdir()
        source.scan()  # what the next poll does
        wait_for_watch(source, base)
        write_version(base / "3")
        assert recorder.got_versions.wait(WAIT_S)
        assert recorder.calls == [("m", []), ("m", [(3, base / "3")])]
    finally:
        source.close()


def test_base_path_removed_and_recreated_is_watched_again(tmp_path: Path) -> None:
    recorder = Recorder()
    base = tmp_path / "m"
    write_version(base / "1")
    source = FileSystemSource(recorder, poll_wait_seconds=600, settle_seconds=0)
    try:
        source.set_models([model("m", base)])
        source.start()
        wait_for_watch(source, base)
        shutil.rmtree(base)
        source.scan()
        assert source.watched_paths == []
        base.mkdir()
        source.scan()
        assert source.watched_paths == [str(base)]
        recorder.got_versions.clear()
        write_version(base / "2")
        assert recorder.got_versions.wait(WAIT_S)
        # Vanishing emitted nothing; coming back empty unloads (zero versions), as upstream.
        assert recorder.calls == [("m", [(1, base / "1")]), ("m", []), ("m", [(2, base / "2")])]
    finally:
        source.close()


def test_unservable_versions_are_reported_and_the_serving_one_stays(
    tmp_path: Path, recorder: Recorder, clock: FakeClock
) -> None:
    reports: list[tuple[str, int, str | None]] = []
    source = FileSystemSource(
        recorder,
        poll_wait_seconds=-1,
        settle_seconds=0.0,
        clock=clock,
        on_unservable=lambda name, v, err: reports.append(
            (name, v, None if err is None else err.status_text())
        ),
    )
    try:
        write_version(tmp_path / "1")
        source.set_models([model("m", tmp_path)])
        assert recorder.last("m") == [(1, tmp_path / "1")]
        (tmp_path / "2").symlink_to(tmp_path / "nowhere")
        source.scan()
        assert reports == []  # not yet: it may be fixed in a moment
        clock.now = 3.0
        source.scan()
        message = (
            f"NOT_FOUND: Version 2 of servable m at {tmp_path / '2'} cannot be loaded: "
            f"2 is a dangling symbolic link (to {tmp_path / 'nowhere'})"
        )
        assert reports == [("m", 2, message)]
        source.scan()
        assert len(reports) == 1  # told once
        assert recorder.last("m") == [(1, tmp_path / "1")]  # version 1 keeps serving
        # Broken under the loaded version 1: it stays aspired, and the fault is told.
        (tmp_path / "2").unlink()
        (tmp_path / "1" / PB).unlink()
        source.scan()
        clock.now = 6.0
        source.scan()
        assert recorder.last("m") == [(1, tmp_path / "1")]
        assert reports[-1][:2] == ("m", 1) and reports[-1][2] is not None
        assert reports[-1][2].endswith("cannot be loaded: no saved_model.pb")
        # Mended where it lies: the fault is over.
        write_version(tmp_path / "1")
        source.scan()
        assert reports[-1] == ("m", 1, None)
    finally:
        source.close()


def test_a_directory_replaced_in_place_is_aspired_as_new_content(
    tmp_path: Path, clock: FakeClock
) -> None:
    lists: list[list[AspiredVersion]] = []
    source = FileSystemSource(
        lambda name, versions: lists.append(list(versions)),
        poll_wait_seconds=-1,
        settle_seconds=0.0,
        clock=clock,
    )
    try:
        write_version(tmp_path / "1")
        source.set_models([model("m", tmp_path)])
        (first,) = lists[-1]
        shutil.rmtree(tmp_path / "1")
        write_version(tmp_path / "incoming")  # made elsewhere, so it cannot reuse the inode
        (tmp_path / "incoming").rename(tmp_path / "1")
        source.scan()
        (second,) = lists[-1]
        assert (second.version, second.path) == (first.version, first.path)
        assert first.identity is not None and second.identity != first.identity
    finally:
        source.close()
