"""Which kind of model a version directory holds, and whether graphserve can serve it.

graphserve serves SavedModels. TensorFlow Serving also serves a TensorFlow Lite ``model.tflite``
when ``--prefer_tflite_model`` is set (in place of the SavedModel, when both are there); without
the flag it loads the SavedModel, and a directory holding only ``model.tflite`` fails to load for
want of one. Here a version holding ``model.tflite`` and no SavedModel fails its load with an
error that says why, with the flag (UNIMPLEMENTED) or without (NOT_FOUND, as upstream), and the
load is not retried: trying again cannot turn it into a SavedModel. With the flag, a version
holding both is served from its SavedModel, with a warning.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from runtime.errors import NotFoundError, OpError, UnimplementedError
from runtime.model_policy import RefusedByPolicy
from serving.core.settle import SAVED_MODEL_FILES, TFLITE_MODEL_FILE


class UnservableModel:
    """Marks a load error that retrying cannot fix: the version's files are the wrong kind."""


class TfLiteNotSupportedError(UnservableModel, UnimplementedError):
    pass


class NoSavedModelError(UnservableModel, NotFoundError):
    pass


def _has_saved_model(names: Collection[str]) -> bool:
    return any(name in names for name in SAVED_MODEL_FILES)


def unservable_model(
    path: Path, names: Collection[str], *, prefer_tflite: bool
) -> OpError | None:
    """The error a version directory at ``path`` holding ``names`` (its entries' names) fails
    its load with before anything is read, or None when it holds a SavedModel to load."""
    if TFLITE_MODEL_FILE not in names or _has_saved_model(names):
        return None
    export = "export the version as a SavedModel (saved_model.pb) to serve it"
    if prefer_tflite:
        return TfLiteNotSupportedError(
            f"TensorFlow Lite models are not supported (--prefer_tflite_model): {path} holds "
            f"{TFLITE_MODEL_FILE} and no SavedModel; {export}"
        )
    return NoSavedModelError(
        f"SavedModel file does not exist at: {path}/{{saved_model.pbtxt|saved_model.pb}}; "
        f"it holds {TFLITE_MODEL_FILE}, and TensorFlow Lite models are not supported: {export}"
    )


def tflite_passed_over(names: Collection[str], *, prefer_tflite: bool) -> bool:
    """Whether ``--prefer_tflite_model`` asks for a ``model.tflite`` that is not served because
    the SavedModel beside it is."""
    return prefer_tflite and TFLITE_MODEL_FILE in names and _has_saved_model(names)


def should_retry_load(error: OpError) -> bool:
    """The manager's retry rule: every failed load is retried except an unservable model and
    one the model policy refuses (the same files would be refused again; a directory replaced
    with fixed content is loaded afresh)."""
    return not isinstance(error, UnservableModel | RefusedByPolicy)
