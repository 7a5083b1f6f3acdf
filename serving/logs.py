"""The server's log output: ``--log_level`` and ``--log_format``.

Every logger (ours, uvicorn's, grpc's) goes through one handler on the root logger, writing to
stderr; in JSON, Python's warnings and uncaught exceptions are logged too, so that every line
is an object. ``text`` is the historical
``<asctime> <LEVEL> <logger>: <message>`` line; ``json`` writes one object per line with
``time`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``message``, ``model`` and
``version`` when the record carries them (``extra=servable_extra(id)``), and ``exception``
(the formatted traceback) when there is one. A worker of ``--workers`` says which it is: text
lines name it after the logger (``graphserve[worker 1]:``), JSON objects carry ``worker``.

The formatting is pure (``json_fields``, ``format_time``); ``configure`` is the thin shell,
called once at start-up before anything logs.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from types import TracebackType
from typing import Any, TextIO

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Third-party loggers that must not keep handlers of their own: they propagate to ours.
_FOREIGN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "grpc", "py.warnings")

# Record attributes that name the servable a line is about (set through ``extra=``), and the
# worker process that wrote it.
_SERVABLE_FIELDS = ("model", "version", "worker")


def servable_extra(name: str, version: int) -> dict[str, Any]:
    """The ``extra=`` of a log call about one model version."""
    return {"model": name, "version": version}


def format_time(created: float) -> str:
    """``created`` (seconds since the epoch) as RFC 3339 UTC with milliseconds:
    ``2024-05-01T12:34:56.789Z``."""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def json_fields(record: logging.LogRecord, exception: str | None = None) -> dict[str, Any]:
    """The JSON object of one record; ``exception`` is its formatted traceback, if any."""
    fields: dict[str, Any] = {
        "time": format_time(record.created),
        "level": record.levelname,
        "logger": record.name,
        "message": record.getMessage(),
    }
    for name in _SERVABLE_FIELDS:
        value = record.__dict__.get(name)
        if value is not None:
            fields[name] = value
    if exception:
        fields["exception"] = exception
    return fields


def traceback_without_messages(err: BaseException) -> str:
    """``err``'s traceback (and those of its causes) as Python prints it, but with each
    exception's type alone: on the request path a message may quote what the client sent (a
    tensor value, a header), which never goes into the logs. The client gets the message."""
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    parts: list[str] = []
    for failure in reversed(chain):
        if parts:
            parts.append("\n\nThe above exception led to the following one:\n\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_list(traceback.extract_tb(failure.__traceback__)))
        kind = type(failure)
        parts.append(f"{kind.__module__}.{kind.__qualname__} (message not logged)")
    return "".join(parts)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in values are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        exception = None
        if record.exc_info:
            exception = self.formatException(record.exc_info)
        elif record.exc_text:
            exception = record.exc_text
        if record.stack_info:
            stack = self.formatStack(record.stack_info)
            exception = f"{exception}\n{stack}" if exception else stack
        return json.dumps(json_fields(record, exception), ensure_ascii=False, default=str)


class _WorkerTag(logging.Filter):
    def __init__(self, worker: int) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self.worker
        return True


def formatter(fmt: str, worker: int | None = None) -> logging.Formatter:
    """The formatter of ``--log_format``; ValueError for an unknown one."""
    if fmt == "text":
        if worker is not None:
            return logging.Formatter(TEXT_FORMAT.replace("%(name)s", "%(name)s[worker %(worker)d]"))
        return logging.Formatter(TEXT_FORMAT)
    if fmt == "json":
        return JsonFormatter()
    raise ValueError(f"--log_format must be one of {', '.join(FORMATS)}; was {fmt!r}")


def level_number(level: str) -> int:
    """The logging level of ``--log_level``; ValueError for an unknown one."""
    try:
        return LEVELS[level.lower()]
    except KeyError:
        raise ValueError(
            f"--log_level must be one of {', '.join(LEVELS)}; was {level!r}"
        ) from None


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes (not when the handler was made),
    as logging's own last-resort handler does."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        raise AttributeError("writes to sys.stderr")


# Marks the handler ``configure`` installed, so that configuring again replaces it (and only
# it: handlers others put on the root logger, such as pytest's, stay).
_OURS = "_graphserve_log_handler"


def configure(
    level: str = "info",
    fmt: str = "text",
    stream: TextIO | None = None,
    worker: int | None = None,
) -> None:
    """Send every log record at ``level`` or above to ``stream`` (default: stderr) in format
    ``fmt``, through one handler on the root logger that replaces the one an earlier call
    installed; ``worker``: the index of the worker process writing. Raises ValueError for an
    unknown level or format, changing nothing."""
    number = level_number(level)
    handler: logging.Handler = (
        _StderrHandler() if stream is None else logging.StreamHandler(stream)
    )
    handler.setFormatter(formatter(fmt, worker))
    if worker is not None:
        handler.addFilter(_WorkerTag(worker))
    setattr(handler, _OURS, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _OURS, False):
            root.removeHandler(old)
            old.close()
    root.addHandler(handler)
    root.setLevel(number)
    for name in _FOREIGN_LOGGERS:
        foreign = logging.getLogger(name)
        for old in list(foreign.handlers):
            foreign.removeHandler(old)
        foreign.propagate = True
        foreign.setLevel(logging.NOTSET)
    # In JSON every line must be an object: warnings and uncaught exceptions go through
    # logging too (in text they keep printing as Python prints them).
    json_only = fmt == "json"
    logging.captureWarnings(json_only)
    if json_only:
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread
    else:  # undo only our own hooks
        if sys.excepthook is _log_uncaught:
            sys.excepthook = sys.__excepthook__
        if threading.excepthook is _log_uncaught_in_thread:
            threading.excepthook = threading.__excepthook__


def _log_uncaught(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("graphserve").critical("Uncaught exception", exc_info=(kind, value, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("graphserve").critical(
        "Uncaught exception in thread %s", name,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
