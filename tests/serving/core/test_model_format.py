"""A version holding a TensorFlow Lite model: the error it fails with, and that it is final."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import Code, DataLossError, NotFoundError
from serving.core.model_format import (
    should_retry_load,
    tflite_passed_over,
    unservable_model,
)

DIR = Path("/models/m/2")
TFLITE, PB = "model.tflite", "saved_model.pb"


@pytest.mark.parametrize("prefer_tflite", [False, True])
@pytest.mark.parametrize(
    "names",
    [{PB}, {"saved_model.pbtxt", TFLITE}, {PB, TFLITE, "variables"}, set(), {"variables"}],
)
def test_a_saved_model_is_loaded(names: set[str], prefer_tflite: bool) -> None:
    assert unservable_model(DIR, names, prefer_tflite=prefer_tflite) is None


def test_tflite_only_with_the_flag_is_unimplemented() -> None:
    error = unservable_model(DIR, {TFLITE, "assets"}, prefer_tflite=True)
    assert error is not None and error.code == Code.UNIMPLEMENTED
    assert error.message == (
        "TensorFlow Lite models are not supported (--prefer_tflite_model): /models/m/2 holds "
        "model.tflite and no SavedModel; export the version as a SavedModel (saved_model.pb) "
        "to serve it"
    )
    assert not should_retry_load(error)


def test_tflite_only_without_the_flag_has_no_saved_model() -> None:
    # Upstream's loader finds no SavedModel there: NOT_FOUND, with the reason spelled out.
    error = unservable_model(DIR, {TFLITE}, prefer_tflite=False)
    assert error is not None and error.code == Code.NOT_FOUND
    assert error.message == (
        "SavedModel file does not exist at: /models/m/2/{saved_model.pbtxt|saved_model.pb}; it "
        "holds model.tflite, and TensorFlow Lite models are not supported: export the version "
        "as a SavedModel (saved_model.pb) to serve it"
    )
    assert not should_retry_load(error)


def test_other_load_errors_are_retried() -> None:
    assert should_retry_load(DataLossError("corrupt checkpoint"))
    assert should_retry_load(NotFoundError("SavedModel file does not exist at: /x"))


@pytest.mark.parametrize(
    ("names", "prefer_tflite", "expected"),
    [
        ({PB, TFLITE}, True, True),
        ({PB, TFLITE}, False, False),
        ({PB}, True, False),
        ({TFLITE}, True, False),  # not passed over: it fails the load instead
    ],
)
def test_tflite_passed_over(names: set[str], prefer_tflite: bool, expected: bool) -> None:
    assert tflite_passed_over(names, prefer_tflite=prefer_tflite) is expected
