"""The log formats: JSON fields (pure), the RFC 3339 time, and configure's one handler."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from serving.logs import (
    JsonFormatter,
    configure,
    format_time,
    formatter,
    json_fields,
    level_number,
    servable_extra,
    traceback_without_messages,
)


def record(message: str = "loaded %s", *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("graphserve", logging.INFO, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    made.created = 1714566896.789  # 2024-05-01T12:34:56.789Z
    return made


def test_time_is_rfc3339_utc_with_milliseconds() -> None:
    assert format_time(1714566896.789) == "2024-05-01T12:34:56.789Z"
    assert format_time(0.0) == "1970-01-01T00:00:00.000Z"
    assert format_time(1714566896.0005) == "2024-05-01T12:34:56.000Z"


def test_json_fields() -> None:
    assert json_fields(record("loaded %s", "m")) == {
        "time": "2024-05-01T12:34:56.789Z",
        "level": "INFO",
        "logger": "graphserve",
        "message": "loaded m",
    }


def test_json_fields_name_the_servable_when_the_record_carries_it() -> None:
    fields = json_fields(record("x", **servable_extra("m", 3)), exception="Traceback ...")
    assert fields["model"] == "m"
    assert fields["version"] == 3
    assert fields["exception"] == "Traceback ..."


def test_json_formatter_writes_one_object_per_line_with_the_exception() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        failed = logging.LogRecord(
            "graphserve", logging.ERROR, __file__, 1, "two\nlines", (), sys.exc_info()
        )
    line = JsonFormatter().format(failed)
    assert "\n" not in line
    fields = json.loads(line)
    assert fields["message"] == "two\nlines"
    assert fields["level"] == "ERROR"
    assert "ValueError: bad" in fields["exception"]


def test_text_format_is_unchanged() -> None:
    text = formatter("text").format(record("loaded %s", "m"))
    assert text.endswith(" INFO graphserve: loaded m")


@pytest.mark.parametrize("bad", [lambda: formatter("xml"), lambda: level_number("loud")])
def test_unknown_values_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="must be one of"):
        bad()  # type: ignore[operator]


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    hooks = sys.excepthook, threading.excepthook
    yield
    sys.excepthook, threading.excepthook = hooks
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)


@pytest.mark.usefixtures("restored_logging")
def test_configure_routes_every_logger_through_one_handler() -> None:
    out = io.StringIO()
    configure("warning", "json", out)
    configure("debug", "json", out)  # replaces the first one's handler
    logging.getLogger("uvicorn.error").debug("from uvicorn")
    logging.getLogger("grpc._server").info("from grpc")
    logging.getLogger("graphserve").debug("ours", extra=servable_extra("m", 1))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(f["logger"], f["message"]) for f in lines] == [
        ("uvicorn.error", "from uvicorn"), ("grpc._server", "from grpc"), ("graphserve", "ours"),
    ]
    assert lines[2]["model"] == "m"


@pytest.mark.usefixtures("restored_logging")
def test_configure_level_filters() -> None:
    out = io.StringIO()
    configure("error", "text", out)
    logging.getLogger("graphserve").warning("dropped")
    logging.getLogger("graphserve").error("kept")
    assert "dropped" not in out.getvalue()
    assert "ERROR graphserve: kept" in out.getvalue()


@pytest.mark.usefixtures("restored_logging")
def test_json_logs_uncaught_exceptions_as_objects() -> None:
    out = io.StringIO()
    configure("info", "json", out)
    try:
        raise RuntimeError("lost")
    except RuntimeError as err:
        sys.excepthook(RuntimeError, err, err.__traceback__)
    fields = json.loads(out.getvalue())
    assert (fields["level"], fields["message"]) == ("CRITICAL", "Uncaught exception")
    assert "RuntimeError: lost" in fields["exception"]


VALUE = "what-the-client-sent-4f9a"


def test_tracebacks_on_the_request_path_leave_out_messages() -> None:
    def decode(value: str) -> float:
        return float(value)

    try:
        try:
            decode(VALUE)
        except ValueError as err:
            raise KeyError(VALUE) from err
    except KeyError as err:
        text = traceback_without_messages(err)
    assert VALUE not in text
    assert text.count("Traceback (most recent call last):") == 2
    assert "in decode" in text
    assert text.endswith("builtins.KeyError (message not logged)")
    assert "builtins.ValueError (message not logged)\n\nThe above exception" in text


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_worker_says_which_it_is(fmt: str) -> None:
    out = io.StringIO()
    configure("info", fmt, out, worker=1)
    logging.getLogger("graphserve").info("loaded")
    line = out.getvalue().strip()
    if fmt == "text":
        assert line.endswith(" INFO graphserve[worker 1]: loaded")
    else:
        assert json.loads(line)["worker"] == 1
