"""JSON text the way TensorFlow Serving's REST layer (rapidjson) reads and writes it.

* ``parse_json``: rapidjson's parse with NaN/Infinity tokens allowed and parsing stopped once the
  root value is complete; errors carry rapidjson's English messages and a byte offset. orjson
  reads the ordinary bodies; the rest go through ``parse_json_reference``.
* ``PrettyWriter``: rapidjson's PrettyWriter (4-space indent, optional single-line arrays), used
  for the value dumps inside error messages (``json_encode`` builds response bodies with joins;
  the writer is its oracle in the tests).
* ``debug_string`` / ``json_type_name``: how a JSON value is quoted in error messages (dump cut
  off once 256 bytes are written).

Strings are Python ``str``; bytes that are not UTF-8 travel as surrogate escapes, so encode the
final text with ``errors="surrogateescape"`` to reproduce them byte for byte.
"""

from __future__ import annotations

import decimal
import json
import math
import re
from typing import Any

import orjson

from runtime.errors import InvalidArgumentError, from_memory_error

_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_ESCAPES = {
    ord("\b"): "\\b",
    ord("\f"): "\\f",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
}
for _c in range(0x20):
    _ESCAPES.setdefault(_c, f"\\u{_c:04X}")
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')

DEBUG_STRING_LIMIT = 256


def quote(text: str) -> str:
    """A JSON string literal, escaped as rapidjson escapes (uppercase \\u00XX, '/' kept)."""
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


def quote_bytes(data: bytes) -> str:
    return quote(data.decode("utf-8", "surrogateescape"))


def rapidjson_double(value: float) -> str | None:
    """rapidjson's text for a double (shortest digits, its own layout); None for NaN/inf."""
    if math.isnan(value) or math.isinf(value):
        return None
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    _, digit_tuple, exponent = decimal.Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    length, k = len(digits), int(exponent)
    kk = length + k  # the value is digits * 10**k, with 10**(kk-1) <= value < 10**kk
    prefix = "-" if value < 0 else ""
    if 0 <= k and kk <= 21:
        return prefix + digits + "0" * k + ".0"
    if 0 < kk <= 21:
        return prefix + digits[:kk] + "." + digits[kk:]
    if -6 < kk <= 0:
        return prefix + "0." + "0" * -kk + digits
    mantissa = digits if length == 1 else digits[0] + "." + digits[1:]
    return prefix + mantissa + "e" + str(kk - 1)


def json_type_name(value: Any) -> str:
    """rapidjson's type names, as TensorFlow Serving's messages print them."""
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _number_text(value: float) -> str | None:
    if isinstance(value, int) and -(2**63) <= value < 2**64:
        return str(value)
    return rapidjson_double(float(value))


class PrettyWriter:
    """rapidjson's PrettyWriter: the exact whitespace TensorFlow Serving's bodies have.

    Each event first checks ``limit`` (bytes written so far, like TensorFlow Serving's bounded
    debug writer) and returns False once it is reached; the caller stops there.
    """

    def __init__(self, single_line_arrays: bool = False, limit: int | None = None) -> None:
        self.parts: list[str] = []
        self.single_line_arrays = single_line_arrays
        self._stack: list[list[Any]] = []  # [in_array, value_count] per open container
        self._limit = limit
        self._size = 0

    def text(self) -> str:
        return "".join(self.parts)

    def _put(self, text: str) -> None:
        self.parts.append(text)
        if self._limit is not None:
            self._size += len(text.encode("utf-8", "surrogateescape"))

    def _in_limit(self) -> bool:
        return self._limit is None or self._size < self._limit

    def _prefix(self) -> None:
        if not self._stack:
            return
        level = self._stack[-1]
        if level[0]:
            if level[1] > 0:
                self._put(", " if self.single_line_arrays else ",")
            if not self.single_line_arrays:
                self._put("\n" + "    " * len(self._stack))
        else:
            if level[1] > 0:
                self._put(",\n" if level[1] % 2 == 0 else ": ")
            else:
                self._put("\n")
            if level[1] % 2 == 0:
                self._put("    " * len(self._stack))
        level[1] += 1

    def raw(self, token: str) -> bool:
        """A value whose text is already made (a number token, a nested array's text)."""
        if not self._in_limit():
            return False
        self._prefix()
        self._put(token)
        return True

    def string(self, text: str) -> bool:
        return self.raw(quote(text))

    key = string

    def start_object(self) -> bool:
        if not self._in_limit():
            return False
        self._prefix()
        self._stack.append([False, 0])
        self._put("{")
        return True

    def end_object(self) -> bool:
        if not self._in_limit():
            return False
        empty = self._stack.pop()[1] == 0
        if not empty:
            self._put("\n" + "    " * len(self._stack))
        self._put("}")
        return True

    def start_array(self) -> bool:
        if not self._in_limit():
            return False
        self._prefix()
        self._stack.append([True, 0])
        self._put("[")
        return True

    def end_array(self) -> bool:
        if not self._in_limit():
            return False
        empty = self._stack.pop()[1] == 0
        if not empty and not self.single_line_arrays:
            self._put("\n" + "    " * len(self._stack))
        self._put("]")
        return True

    def value(self, value: Any) -> bool:
        """Write a parsed JSON value; False if the limit stopped it (or a NaN/inf, as rapidjson
        refuses to write those without its NaN flag)."""
        if isinstance(value, dict):
            if not self.start_object():
                return False
            for key, item in value.items():
                if not (self.key(key) and self.value(item)):
                    return False
            return self.end_object()
        if isinstance(value, list):
            if not self.start_array():
                return False
            for item in value:
                if not self.value(item):
                    return False
            return self.end_array()
        if isinstance(value, str):
            return self.string(value)
        if value is None:
            return self.raw("null")
        if isinstance(value, bool):
            return self.raw("true" if value else "false")
        text = _number_text(value)
        if text is None:
            if self._in_limit():
                self._prefix()
            return False
        return self.raw(text)


def debug_string(value: Any) -> str:
    """A JSON value as TensorFlow Serving quotes it in error messages."""
    writer = PrettyWriter(single_line_arrays=True, limit=DEBUG_STRING_LIMIT)
    writer.value(value)
    return writer.text()


def error_body(message: str) -> bytes:
    """The body of every failed /v1 request: ``{"error": message}``, pretty-printed."""
    return ('{\n    "error": ' + quote(message) + "\n}").encode("utf-8", "surrogateescape")


# Python's json messages -> rapidjson's (GetParseError_En).
_PARSE_MESSAGES = (
    ("Expecting value", "Invalid value."),
    ("Expecting property name enclosed in double quotes", "Missing a name for object member."),
    ("Illegal trailing comma before end of object", "Missing a name for object member."),
    ("Illegal trailing comma before end of array", "Invalid value."),
    ("Expecting ':' delimiter", "Missing a colon after a name of object member."),
    ("Unterminated string", "Missing a closing quotation mark in string."),
    ("Invalid control character", "Invalid encoding in string."),
    ("Invalid \\uXXXX escape", "Incorrect hex digit after \\u escape in string."),
    ("Invalid \\escape", "Invalid escape character in string."),
)


def _innermost_container(text: str, end: int) -> str:
    """'{' or '[' open at ``end`` (ignoring brackets inside strings)."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in text[:end]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append(ch)
        elif ch in "]}" and stack:
            stack.pop()
    return stack[-1] if stack else "["


def _parse_error(text: str, err: json.JSONDecodeError) -> InvalidArgumentError:
    message = "Invalid value."
    for python_msg, rapidjson_msg in _PARSE_MESSAGES:
        if err.msg.startswith(python_msg):
            message = rapidjson_msg
            break
    else:
        if err.msg.startswith("Expecting ',' delimiter"):
            if _innermost_container(text, err.pos) == "{":
                message = "Missing a comma or '}' after an object member."
            else:
                message = "Missing a comma or ']' after an array element."
    # rapidjson notices a missing closing quote at the end of the input.
    end = len(text) if err.msg.startswith("Unterminated string") else err.pos
    offset = len(text[:end].encode("utf-8", "surrogateescape"))
    return InvalidArgumentError(f"JSON Parse error: {message} at offset: {offset}")


# A number literal that might not fit a double: 309+ digits, or an exponent of 100 or more.
# Cheap to search for; only bodies that have one get the token-by-token check.
_MAYBE_HUGE = re.compile(r"\d{309}|\d[eE]\+?0*[1-9]\d\d")
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?')


def _check_number_sizes(text: str, start: int, end: int) -> None:
    """rapidjson refuses a number too big for a double (Python would make it inf or a huge
    int, which no tensor can hold)."""
    if _MAYBE_HUGE.search(text, start, end) is None:
        return
    for match in _STRING_OR_NUMBER.finditer(text, start, end):
        token = match.group()
        if token[0] != '"' and math.isinf(float(token)):
            offset = len(text[: match.start()].encode("utf-8", "surrogateescape"))
            raise InvalidArgumentError(
                f"JSON Parse error: Number too big to be stored in double. at offset: {offset}"
            )


def parse_json(body: bytes) -> Any:
    """Parse a request body as TensorFlow Serving does; raises InvalidArgumentError.

    orjson reads the bodies it accepts to the same values as the reference parser below
    (``parse_json_reference``) in a fraction of the time, with one difference that is
    rapidjson's own: an integer literal outside 64 bits becomes a double (the reference keeps a
    Python int, which every consumer here treats as that same double). Everything orjson
    refuses (NaN/Infinity tokens, numbers beyond a double, text after the root value, non-UTF-8
    bytes, lone surrogates, deep nesting, syntax errors) goes to the reference parser, which has
    the exact messages.
    """
    try:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return parse_json_reference(body)
    except MemoryError as err:
        raise from_memory_error(err, "the parsed JSON body") from err


def parse_json_reference(body: bytes) -> Any:
    """The reference parse (Python's json with rapidjson's rules and messages)."""
    if not body:
        raise InvalidArgumentError("JSON Parse error: The document is empty")
    text = body.decode("utf-8", "surrogateescape")
    start = _WS.match(text).end()  # type: ignore[union-attr]
    if start == len(text):
        offset = len(body)
        raise InvalidArgumentError(f"JSON Parse error: The document is empty. at offset: {offset}")
    try:
        value, end = _DECODER.raw_decode(text, start)  # stops once the root value is complete
    except json.JSONDecodeError as err:
        raise _parse_error(text, err) from None
    except ValueError:  # an integer literal past Python's digit limit for int()
        _check_number_sizes(text, start, len(text))
        raise InvalidArgumentError(
            "JSON Parse error: Number too big to be stored in double. at offset: 0"
        ) from None
    except RecursionError:
        raise InvalidArgumentError(
            "JSON Parse error: Terminate parsing due to Handler error. at offset: 0"
        ) from None
    _check_number_sizes(text, start, end)
    return value
