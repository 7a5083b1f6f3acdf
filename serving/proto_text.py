"""Text-format proto files, read and rejected as TensorFlow Serving reads them.

TensorFlow Serving reads every config file (``--model_config_file``,
``--batching_parameters_file``, ``--ssl_config_file``, a version's ``batching_params.pbtxt``)
through ``ParseProtoTextFile`` (util/proto_util.h). A file that does not parse makes protobuf log
its own parser error and the call fail with a bare message naming the file::

    Error parsing text-format tensorflow.serving.ModelServerConfig: 3:7: <reason>
    INVALID_ARGUMENT: Invalid protobuf file: '/models/models.config'

``parse_proto_text`` does the same, so both lines read as tensorflow_model_server's (the reason
is Python protobuf's wording, which differs from the C++ parser's). Text that comes from no file
fails with the parser error itself.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TypeVar

from google.protobuf import text_format
from google.protobuf.message import Message

from runtime.errors import InvalidArgumentError, NotFoundError

log = logging.getLogger("graphserve")

M = TypeVar("M", bound=Message)


def parse_error_text(type_name: str, text: str, err: text_format.ParseError) -> str:
    """protobuf's ``Error parsing text-format TYPE: LINE:COL: reason`` for ``err``, raised while
    parsing ``text``."""
    line, column = err.GetLine(), err.GetColumn()
    reason = str(err)
    where = ""
    if line is not None:
        where = f"{line}:{column}" if column is not None else str(line)
        reason = reason.removeprefix(f"{where} : ")
        where += ": "
        # Python's tokenizer quotes the line it stopped on (empty at the end of the text); the C++
        # parser gives the position alone.
        lines = text.split("\n")
        current = lines[line - 1] if 0 < line <= len(lines) else ""
        for quoted in (current, ""):
            if reason.startswith(f"'{quoted}': "):
                reason = reason[len(quoted) + 4:]
                break
    return f"Error parsing text-format {type_name}: {where}{reason}"


def decode_error_text(type_name: str, data: bytes, err: UnicodeDecodeError) -> str:
    """The same message for bytes that are not UTF-8, with the position of the first bad byte."""
    before = data[: err.start]
    line = before.count(b"\n") + 1
    column = len(before) - (before.rfind(b"\n") + 1) + 1
    return f"Error parsing text-format {type_name}: {line}:{column}: Invalid UTF-8 ({err.reason})"


def parse_proto_text(text: str | bytes, message: M, *, source: str | None = None) -> M:
    """Parse ``text`` into ``message`` and return it.

    A parse failure raises InvalidArgumentError: with ``source`` (the file the text came from),
    the parser error is logged and the message is ``Invalid protobuf file: '<source>'``, as in
    TensorFlow Serving; without, the message is the parser error."""
    type_name = message.DESCRIPTOR.full_name
    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError as err:
        assert isinstance(text, bytes)
        detail = decode_error_text(type_name, text, err)
        cause: Exception = err
    else:
        try:
            text_format.Parse(decoded, message)
            return message
        except text_format.ParseError as err:
            detail = parse_error_text(type_name, decoded, err)
            cause = err
    if source is None:
        raise InvalidArgumentError(detail) from cause
    log.error("%s", detail)
    raise InvalidArgumentError(f"Invalid protobuf file: '{source}'") from cause


def read_proto_text_file(path: str | os.PathLike[str], message: M, *, what: str) -> M:
    """Read a text-format ``message`` from ``path`` (``what`` names the file in errors).

    Raises NotFoundError when the file cannot be read, InvalidArgumentError (after logging the
    parser error) when it does not parse."""
    source = os.fspath(path)
    try:
        data = Path(source).read_bytes()
    except OSError as err:
        raise NotFoundError(f"Could not read {what} {source}: {err}") from err
    return parse_proto_text(data, message, source=source)
